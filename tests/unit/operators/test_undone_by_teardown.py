"""Steps that a teardown undoes refuse to run once that teardown has ended in their DAG run."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from airflow_bulkload.operators.undone_by_teardown import (
    refuse_if_run_on,
    started_after_step_error,
)
from airflow_bulkload.pipeline import bulk_load_table


@pytest.mark.parametrize("states", [{}, {"g.restore_table": None}, {"g.load_3": "removed"}])
def test_tasks_after_the_step_not_yet_run_let_it_run(states: dict[str, str | None]) -> None:
    assert started_after_step_error("g.claim_table", states, "x") is None


@pytest.mark.parametrize(
    "state",
    ["success", "failed", "skipped", "upstream_failed", "running", "up_for_retry", "restarting"],
)
def test_a_task_after_the_step_that_ran_stops_it_and_says_how_to_load_again(state: str) -> None:
    """Ended, or still running or waiting to retry from an earlier attempt: a teardown that has
    begun may already have released what the step would take again."""
    error = started_after_step_error(
        "g.claim_table", {"g.prepare_table": None, "g.restore_table": state}, "the claim stays"
    )
    assert error is not None
    assert f"which already ran in this DAG run: g.restore_table ({state})." in error
    assert "Run on, the claim stays. Nothing was changed." in error
    assert "clear g.claim_table together with its downstream tasks" in error


def test_many_tasks_that_ran_are_named_five_at_most() -> None:
    states = {f"g.load_{i}": "success" for i in range(12)}
    error = started_after_step_error("g.claim_table", states, "x")
    assert error is not None and "and 7 more." in error


class _TaskInstance:
    """What a step asks of Airflow's task instance: the states of tasks in its DAG run."""

    dag_id = "d"

    def __init__(self, states: dict[str, dict[str, str | None]], map_index: int = -1) -> None:
        self.map_index = map_index
        self.states = states
        self.asked: list[dict[str, Any]] = []

    def get_task_states(self, **query: Any) -> dict[str, dict[str, str | None]]:
        self.asked.append(query)
        return self.states


def pipeline_task(task_id: str) -> Any:
    with DAG("d", schedule=None) as dag:
        bulk_load_table(
            table="public.t",
            conn_id="pg",
            source="s3://in/p/",
            staging="s3://stage/",
            reload=True,
            drop_indexes=True,  # literal, so prepare's checks pass without pre-flight's advice
        )
    return dag.get_task(f"load_public_t.{task_id}")


#: each step, and the tasks after it it watches (the loads are mapped, so they are listed by
#: their id and Airflow answers for each map index)
WATCHED = {
    "claim_table": [
        "enter_bulk_mode",
        "exit_bulk_mode",
        "finalize_table",
        "load",
        "prepare_table",
        "report",
        "restore_table",
    ],
    "prepare_table": ["restore_table"],
    "enter_bulk_mode": ["exit_bulk_mode"],
}


@pytest.mark.parametrize("step", sorted(WATCHED))
def test_each_step_fails_without_retries_before_touching_the_server_once_a_task_after_it_ran(
    step: str,
) -> None:
    """``execute`` asks first: the fake context has no connection, so anything after the
    question would fail otherwise."""
    watched = [f"load_public_t.{task_id}" for task_id in WATCHED[step]]
    ti = _TaskInstance({"run": {watched[-1]: "success"}})
    with pytest.raises(AirflowFailException, match=rf"{watched[-1]} \(success\)"):
        pipeline_task(step).execute({"ti": ti, "run_id": "run", "params": {}})
    assert ti.asked == [{"dag_id": "d", "task_ids": watched, "run_ids": ["run"], "map_index": None}]


def test_the_claim_is_refused_when_the_report_ran_though_the_teardown_still_runs() -> None:
    """The hostile review's break: cleared alone while ``restore_table`` was still running (or
    waiting to retry), the claim went on and a reload withdrew every row under a green run."""
    ti = _TaskInstance(
        {
            "run": {
                "load_public_t.report": "success",
                "load_public_t.load_0": "success",
                "load_public_t.restore_table": "up_for_retry",
            }
        }
    )
    with pytest.raises(AirflowFailException, match=r"load_public_t.report \(success\)"):
        refuse_if_run_on(
            pipeline_task("claim_table"),
            {"ti": ti, "run_id": "run"},  # type: ignore[arg-type]
            "x",
            whole_downstream=True,
        )


@pytest.mark.parametrize(
    "states", [{}, {"run": {}}, {"run": {"load_public_t.restore_table": None}}]
)
def test_a_teardown_not_yet_run_or_unknown_lets_the_step_go_on(states: dict[str, Any]) -> None:
    refuse_if_run_on(
        pipeline_task("claim_table"),
        {"ti": _TaskInstance(states), "run_id": "run"},  # type: ignore[arg-type]
        "x",
        whole_downstream=True,
    )


def test_an_operator_with_no_teardown_after_it_asks_nothing() -> None:
    from airflow_bulkload.operators import ClaimTableOperator

    ti = _TaskInstance({})
    with DAG("d", schedule=None):
        claim = ClaimTableOperator(task_id="claim_table", table="public.t", conn_id="pg")
    refuse_if_run_on(claim, {"ti": ti, "run_id": "run"}, "x")  # type: ignore[arg-type]
    assert ti.asked == []


def test_a_step_in_a_mapped_task_group_watches_its_own_instance() -> None:
    """Airflow answers for a mapped task as ``<task id>_<map index>``; a step of a mapped task
    group asks for its own map index, so another table's finished teardown does not stop it and
    its own does (the hostile review: the bare id never matched)."""
    from airflow.sdk import task_group

    from airflow_bulkload.operators import ClaimTableOperator, RestoreTableOperator

    with DAG("d", schedule=None) as dag:

        @task_group
        def per_table(table: str) -> None:
            claim = ClaimTableOperator(task_id="claim_table", table=table, conn_id="pg")
            restore = RestoreTableOperator(task_id="restore_table", table=table, conn_id="pg")
            claim >> restore.as_teardown()

        per_table.expand(table=["public.a", "public.b"])
    claim = dag.get_task("per_table.claim_table")
    ti = _TaskInstance({"run": {"per_table.restore_table_1": "success"}}, map_index=1)
    with pytest.raises(AirflowFailException, match=r"per_table.restore_table_1 \(success\)"):
        refuse_if_run_on(claim, {"ti": ti, "run_id": "run"}, "x")  # type: ignore[arg-type]
    assert ti.asked[0]["map_index"] == 1
