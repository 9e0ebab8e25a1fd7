"""Hostile: ``bulk_load_table(finalize_kwargs=...)`` and its build-time memory check.

The promise (commit de0a374): a literal ``finalize_kwargs`` value that finalize would refuse is
refused when the DAG is built, not after the load; a template is checked by finalize's validate
once rendered. And, like ``stage_kwargs``/``load_kwargs``, the extras may not change what makes
the task part of this pipeline.
"""

from __future__ import annotations

from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG, task

from airflow_bulkload.operators import FinalizeTableOperator
from airflow_bulkload.pipeline import bulk_load_table

FINALIZE = "load_public_t.finalize_table"


def pipeline(**arguments: Any) -> DAG:
    with DAG("hostile", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        bulk_load_table(
            table="public.t", conn_id="pg", source="s3://in/x/", staging="s3://s/x", **arguments
        )
    return dag


def finalize_refuses_at_run_time(**arguments: Any) -> bool:
    """Whether finalize's validate (run after the whole load) refuses these arguments."""
    task = FinalizeTableOperator(task_id="f", table="t", conn_id="c", **arguments)
    try:
        task.validate()
    except ValueError:
        return True
    return False


# -- handled: each of these is refused when the DAG is built, with the check's message ---------------
@pytest.mark.parametrize("value", [65536, True, 1.5, ["64MB"], "64mb", "1GB; RESET ALL", "1GiB"])
def test_a_literal_that_is_not_text_or_not_a_setting_is_refused_when_built(value: Any) -> None:
    with pytest.raises(ValueError, match="finalize_kwargs maintenance_work_mem must be"):
        pipeline(finalize_kwargs={"maintenance_work_mem": value})


def test_an_xcom_value_is_left_for_finalize_to_check() -> None:
    with DAG("hostile", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:

        @task
        def pick() -> str:
            return "256MB"

        memory = pick()
        bulk_load_table(
            table="public.t",
            conn_id="pg",
            source="s3://in/x/",
            staging="s3://s/x",
            finalize_kwargs={"maintenance_work_mem": memory},
        )
    assert dag.get_task(FINALIZE).maintenance_work_mem is memory  # type: ignore[attr-defined]


def test_task_identity_stays_reserved() -> None:
    for key in ("task_id", "table", "conn_id"):
        with pytest.raises(ValueError, match="finalize_kwargs may not set"):
            pipeline(finalize_kwargs={key: "x"})


# -- breaks -------------------------------------------------------------------------------------------
def test_a_literal_none_is_refused_when_built_not_after_the_load() -> None:
    """Fails now: ``None`` skips the build-time check (``memory is not None``), overrides the
    default, and finalize's validate refuses it after the load."""
    assert finalize_refuses_at_run_time(maintenance_work_mem=None)
    with pytest.raises(ValueError, match="maintenance_work_mem"):
        pipeline(finalize_kwargs={"maintenance_work_mem": None})


@pytest.mark.parametrize(
    "template",
    [
        "{% if params.big %}1GB{% else %}64MB{% endif %}",
        "{%- set mb = 256 -%}{{- mb -}}MB",  # has "{{" too, control
    ],
)
def test_a_jinja_template_is_left_for_finalize_to_check(template: str) -> None:
    """Fails now for the first: a template with only ``{% ... %}`` blocks is taken for a literal
    (the check looks for ``{{``) and refused, though it renders to a valid setting."""
    dag = pipeline(finalize_kwargs={"maintenance_work_mem": template})
    assert dag.get_task(FINALIZE).maintenance_work_mem == template  # type: ignore[attr-defined]


@pytest.mark.parametrize("parallelism", ["junk", 0, -2, "0", None, 1.5])
def test_a_literal_parallelism_finalize_refuses_is_refused_when_built(parallelism: Any) -> None:
    """Fails now: the same hole the memory check closed, for the other documented key
    (``{"parallelism": 1}``): the DAG builds, the whole load runs, and finalize's validate then
    fails the task without retries."""
    assert finalize_refuses_at_run_time(parallelism=parallelism)
    with pytest.raises(ValueError, match="parallelism"):
        pipeline(finalize_kwargs={"parallelism": parallelism})


@pytest.mark.parametrize(
    "extra",
    [
        # finalize of another load id finds "nothing saved", succeeds and rebuilds nothing; the
        # table stays without its indexes until the teardown (proven on PostgreSQL:
        # finalize(load_id="other") after prepare(load_id="L1") -> status "nothing saved",
        # 0 indexes, state still "prepared")
        {"load_id": "other"},
        # finalize would treat an append as a replace/upsert (or the reverse) of another table
        {"mode": "replace"},
        {"upsert_keys": ["id"]},
        # finalize would run (rebuild, mark done, release the claim) while loads still run
        {"trigger_rule": "one_success"},
        {"trigger_rule": "always"},
    ],
    ids=lambda extra: "-".join(f"{k}={v}" for k, v in extra.items()),
)
def test_finalize_kwargs_may_not_unhook_finalize_from_its_load(extra: dict[str, Any]) -> None:
    """Fails now: only task_id/table/conn_id/source/staging/chunk/pre_/post_execute are reserved."""
    with pytest.raises(ValueError, match="finalize_kwargs may not set"):
        pipeline(finalize_kwargs=extra)


@pytest.mark.parametrize("analyze", ["{{ params.analyze }}", "false", 0, None])
def test_analyze_is_not_templated_so_anything_but_a_bool_is_refused_when_built(
    analyze: Any,
) -> None:
    """Found by review: ``analyze`` is not a templated field, so a template (or any text) is never
    rendered; it passed the build-time check as "renders later", then finalize's validate refused
    it after the load."""
    assert finalize_refuses_at_run_time(analyze=analyze)
    with pytest.raises(ValueError, match="finalize_kwargs analyze must be True or False"):
        pipeline(finalize_kwargs={"analyze": analyze})
    dag = pipeline(finalize_kwargs={"analyze": False})
    assert dag.get_task(FINALIZE).analyze is False  # type: ignore[attr-defined]


def test_a_refused_parallelism_names_where_it_came_from() -> None:
    with pytest.raises(ValueError, match="finalize_kwargs parallelism must be"):
        pipeline(finalize_kwargs={"parallelism": "junk"})
