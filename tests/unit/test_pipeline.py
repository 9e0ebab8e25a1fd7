"""bulk_load_table's wiring: what each generated task is given."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG
from airflow.sdk.definitions.xcom_arg import PlainXComArg

from airflow_bulkload.operators import BulkModeTarget
from airflow_bulkload.pipeline import bulk_load_table


def pipeline(**arguments: Any) -> DAG:
    """A DAG holding one ``bulk_load_table`` group for ``public.t`` with ``arguments``."""
    with DAG("wiring", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        bulk_load_table(
            table="public.t", conn_id="pg", source="s3://in/x/", staging="s3://s/x", **arguments
        )
    return dag


def test_the_pipeline_wires_reload_and_the_reports_table_check() -> None:
    dag = pipeline(reload="{{ params.reload }}")
    claim = dag.get_task("load_public_t.claim_table")  # claims, then withdraws superseded chunks
    report = dag.get_task("load_public_t.report")
    assert claim.reload == "{{ params.reload }}"  # type: ignore[attr-defined]
    assert claim.manifest is not None  # type: ignore[attr-defined]
    assert {"reload", "manifest", "mode"} <= set(claim.template_fields)
    assert report.conn_id == "pg"  # type: ignore[attr-defined]
    assert report.manifest is not None  # type: ignore[attr-defined]


def test_the_pipeline_gives_its_teardowns_retries_backoff_and_timeouts() -> None:
    dag = pipeline(restore_timeout=timedelta(hours=2))
    for task_id, timeout in (("restore_table", 2), ("exit_bulk_mode", 1)):
        task = dag.get_task(f"load_public_t.{task_id}")
        assert task.retries == 5
        assert task.retry_exponential_backoff
        assert task.execution_timeout == timedelta(hours=timeout)
        assert task.is_teardown


def test_explicit_knobs_are_what_runs_not_the_advice() -> None:
    dag = pipeline(drop_indexes=False, drop_primary_key=False, parallelism=3)
    prepare = dag.get_task("load_public_t.prepare_table")
    assert prepare.drop_indexes is False  # type: ignore[attr-defined]
    assert prepare.drop_primary_key is False  # type: ignore[attr-defined]
    load = dag.get_task("load_public_t.load")
    assert load.partial_kwargs["max_concurrent_loads"] == 3  # type: ignore[attr-defined]
    assert load.partial_kwargs["max_active_tis_per_dagrun"] == 3  # type: ignore[attr-defined]


def test_the_table_is_claimed_before_bulk_mode_and_released_by_the_teardown() -> None:
    dag = pipeline()
    claim = dag.get_task("load_public_t.claim_table")
    assert "load_public_t.preflight" in claim.upstream_task_ids
    enter = dag.get_task("load_public_t.enter_bulk_mode")
    assert enter.task_id in claim.downstream_task_ids
    assert claim.task_id in enter.get_flat_relative_ids(upstream=True)
    assert "load_public_t.restore_table" in claim.downstream_task_ids


def ids(task_ids: set[str]) -> set[str]:
    return {task_id.rsplit(".", 1)[-1] for task_id in task_ids}


def test_bulk_mode_and_the_tables_preparation_run_side_by_side() -> None:
    """Neither needs the other: after the claim both start, and the load waits for both; after
    finalize_table the report and both teardowns start together."""
    dag = pipeline()
    task = {t.task_id.rsplit(".", 1)[-1]: t for t in dag.tasks}
    assert {"enter_bulk_mode", "prepare_table"} <= ids(task["claim_table"].downstream_task_ids)
    assert "prepare_table" not in ids(task["enter_bulk_mode"].downstream_task_ids)
    assert {"enter_bulk_mode", "prepare_table"} <= ids(task["load"].upstream_task_ids)
    assert ids(task["finalize_table"].downstream_task_ids) == {
        "report",
        "restore_table",
        "exit_bulk_mode",
    }
    assert "exit_bulk_mode" not in ids(task["restore_table"].downstream_task_ids)
    # restore_table still follows the claim (to release it), prepare and finalize, whatever ends
    assert {"claim_table", "prepare_table", "finalize_table"} <= ids(
        task["restore_table"].upstream_task_ids
    )
    assert {"enter_bulk_mode", "finalize_table"} <= ids(task["exit_bulk_mode"].upstream_task_ids)
    for teardown in ("restore_table", "exit_bulk_mode"):
        assert task[teardown].trigger_rule == "all_done"
        assert task[teardown].is_teardown


@pytest.mark.parametrize(
    "target",
    [
        {"rds_instance": "db1"},
        {"rds_instance": "db1", "reboot_policy": "allowed"},
        {"rds_instance": "db1", "reboot_policy": "{{ params.reboot_policy }}"},
        {"rds_cluster": "aurora1"},
    ],
)
def test_where_bulk_mode_may_reboot_the_instance_the_table_ddl_waits_for_it(
    target: dict[str, str],
) -> None:
    """A reboot under prepare_table's or restore_table's DDL would break it. On RDS a reboot
    follows the instance's shared state (another holder's policy, a swap left by the last
    holder), whatever this run's policy: there they run one after the other, as before."""
    dag = pipeline(**target)
    task = {t.task_id.rsplit(".", 1)[-1]: t for t in dag.tasks}
    assert "prepare_table" in ids(task["enter_bulk_mode"].downstream_task_ids)
    assert "exit_bulk_mode" in ids(task["restore_table"].downstream_task_ids)


def test_a_self_managed_server_never_reboots_so_its_setups_run_side_by_side() -> None:
    dag = pipeline(reboot_policy="allowed")  # no RDS target: the policy has nothing to reboot
    task = {t.task_id.rsplit(".", 1)[-1]: t for t in dag.tasks}
    assert "prepare_table" not in ids(task["enter_bulk_mode"].downstream_task_ids)
    assert "exit_bulk_mode" not in ids(task["restore_table"].downstream_task_ids)


def test_without_bulk_mode_the_claim_leads_to_prepare() -> None:
    dag = pipeline(bulk_mode="off")
    task = {t.task_id.rsplit(".", 1)[-1]: t for t in dag.tasks}
    assert "enter_bulk_mode" not in task and "exit_bulk_mode" not in task
    assert "prepare_table" in ids(task["claim_table"].downstream_task_ids)
    assert ids(task["load"].upstream_task_ids) >= {"prepare_table"}


def test_knobs_left_on_auto_take_the_preflight_plan_as_native_values() -> None:
    from airflow.sdk.definitions.xcom_arg import PlainXComArg

    dag = pipeline()
    preflight = dag.get_task("load_public_t.preflight")
    load = dag.get_task("load_public_t.load")
    for value, key in (
        (dag.get_task("load_public_t.prepare_table").drop_indexes, "plan_drop_indexes"),  # type: ignore[attr-defined]
        (load.partial_kwargs["max_concurrent_loads"], "plan_parallelism"),  # type: ignore[attr-defined]
        (
            dag.get_task("load_public_t.finalize_table").parallelism,  # type: ignore[attr-defined]
            "plan_index_build_parallelism",
        ),
    ):
        # an XCom reference resolved when the task runs, not a Jinja string to parse back
        assert isinstance(value, PlainXComArg)
        assert (value.operator, value.key) == (preflight, key)


def test_the_bulk_mode_tasks_get_one_target() -> None:
    rds = pipeline(rds_instance="prod-pg", rds_cluster="prod-aurora", reboot_policy="allowed")
    enter = rds.get_task("load_public_t.enter_bulk_mode")
    exit_ = rds.get_task("load_public_t.exit_bulk_mode")
    expected = BulkModeTarget(db_instance_identifier="prod-pg", db_cluster_identifier="prod-aurora")
    assert enter.target == exit_.target == expected  # type: ignore[attr-defined]
    assert exit_.reboot_policy == "allowed"  # type: ignore[attr-defined]
    own = pipeline().get_task("load_public_t.enter_bulk_mode")
    assert own.target == BulkModeTarget(conn_id="pg")  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="reboot_policy"):
        pipeline(reboot_policy="sometimes")


def test_per_stage_arguments_route_the_staging_and_load_tasks() -> None:
    dag = pipeline(
        stage_kwargs={"queue": "staging", "execution_timeout": timedelta(hours=3)},
        load_kwargs={"pool": "db1", "retries": 5},
        direct=True,
    )
    stage = dag.get_task("load_public_t.stage")
    load = dag.get_task("load_public_t.load")
    assert stage.queue == "staging"
    assert stage.execution_timeout == timedelta(hours=3)
    assert stage.direct is True  # type: ignore[attr-defined]
    assert load.partial_kwargs["pool"] == "db1"  # type: ignore[attr-defined]
    assert load.partial_kwargs["retries"] == 5  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"load_kwargs may not set \['task_id'\]"):
        pipeline(load_kwargs={"task_id": "other"})


def test_a_staging_workers_limits_reach_the_plan_task_and_every_stage_group_task() -> None:
    limits = {"temp_dir": "/mnt/scratch", "duckdb_memory_limit": "3GB", "duckdb_threads": 1}
    dag = pipeline(stage_group_size="4GB", stage_kwargs={**limits, "check_temp_space": False})
    stage = dag.get_task("load_public_t.stage")
    groups = dag.get_task("load_public_t.stage_group")
    for name, value in {**limits, "check_temp_space": False}.items():
        assert getattr(stage, name) == value
        assert groups.partial_kwargs[name] == value  # type: ignore[attr-defined]
    resources = stage.staging_resources()  # type: ignore[attr-defined]
    assert (resources.temp_dir, resources.memory_limit, resources.threads) == (
        "/mnt/scratch",
        "3GB",
        1,
    )
    assert resources.check_temp_space is False


def test_finalize_arguments_reach_the_index_rebuild_and_may_override_the_plan() -> None:
    dag = pipeline(finalize_kwargs={"maintenance_work_mem": "256MB", "parallelism": 1})
    finalize = dag.get_task("load_public_t.finalize_table")
    assert finalize.maintenance_work_mem == "256MB"  # type: ignore[attr-defined]
    assert finalize.parallelism == 1  # type: ignore[attr-defined]
    planned = pipeline().get_task("load_public_t.finalize_table")
    assert planned.maintenance_work_mem == "64MB"  # type: ignore[attr-defined]
    assert isinstance(planned.parallelism, PlainXComArg)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match=r"finalize_kwargs may not set \['task_id'\]"):
        pipeline(finalize_kwargs={"task_id": "other"})
    # a literal setting is refused when the DAG is built, not after the load; a template renders
    # only when the task runs, where finalize's validate checks it
    with pytest.raises(ValueError, match="maintenance_work_mem must be a PostgreSQL memory"):
        pipeline(finalize_kwargs={"maintenance_work_mem": "64mb"})
    templated = "{{ params.mwm }}"
    dag = pipeline(finalize_kwargs={"maintenance_work_mem": templated})
    assert dag.get_task("load_public_t.finalize_table").maintenance_work_mem == templated  # type: ignore[attr-defined]
    # not templated: the text of a bool would fail finalize after the whole load
    with pytest.raises(ValueError, match="finalize_kwargs checkpoint must be True or False"):
        pipeline(finalize_kwargs={"checkpoint": "false"})
    no_checkpoint = pipeline(finalize_kwargs={"checkpoint": False})
    assert no_checkpoint.get_task("load_public_t.finalize_table").checkpoint is False  # type: ignore[attr-defined]


@pytest.mark.parametrize("stage_group_size", [None, "4GB"])
def test_every_generated_task_says_what_it_does_and_a_dag_authors_doc_wins(
    stage_group_size: str | None,
) -> None:
    dag = pipeline(stage_group_size=stage_group_size, load_kwargs={"doc_md": "ours"})
    assert dag.task_group_dict["load_public_t"].tooltip == "Bulk load of public.t"
    docs = {task.task_id.rpartition(".")[2]: task.doc_md for task in dag.tasks}
    assert docs.pop("load") == "ours"
    assert all(docs.values()), [name for name, doc in docs.items() if not doc]
    if stage_group_size:
        assert "stage_group" in docs  # pre-flight collects the groups: no collect_staging task


def test_a_wait_for_input_sensor_runs_before_staging_on_the_inputs_keys() -> None:
    with DAG("wiring", schedule=None, start_date=pendulum.datetime(2026, 1, 1)) as dag:
        bulk_load_table(
            table="public.t",
            conn_id="pg",
            source=["s3://in/x/{{ ds }}/", "s3://in/y/*.csv.gz", "s3://in/z.csv"],
            staging="s3://s/x",
            wait_for_input=timedelta(hours=2),
        )
    wait = dag.get_task("load_public_t.wait_for_input")
    # it waits for what staging reads, listed the way staging lists it
    assert wait.source == ["s3://in/x/{{ ds }}/", "s3://in/y/*.csv.gz", "s3://in/z.csv"]  # type: ignore[attr-defined]
    assert wait.timeout == 7200 and wait.mode == "reschedule"  # type: ignore[attr-defined]
    assert wait.downstream_task_ids == {"load_public_t.stage"}
    assert "wait_for_input" not in {t.task_id for t in pipeline().tasks}
    with (
        pytest.raises(ValueError, match="not local paths"),
        DAG("local", schedule=None, start_date=pendulum.datetime(2026, 1, 1)),
    ):
        bulk_load_table(
            table="t",
            conn_id="pg",
            source="/data/x.csv",
            staging="s3://s/x",
            wait_for_input=timedelta(minutes=5),
        )


def test_a_dry_run_stages_checks_and_trials_each_chunk_but_changes_nothing() -> None:
    dag = pipeline(dry_run=True, stage_group_size="4GB")
    tasks = {task.task_id.rpartition(".")[2]: task for task in dag.tasks}
    assert set(tasks) == {"stage", "stage_group", "collect_staging", "preflight", "load", "report"}
    assert tasks["load"].partial_kwargs["validate_only"] is True  # type: ignore[attr-defined]
    assert tasks["report"].validate_only is True and not tasks["report"].outlets  # type: ignore[attr-defined]
    assert "load_public_t.preflight" in tasks["load"].upstream_task_ids
    assert all(task.doc_md for name, task in tasks.items() if name != "load")


def test_loads_map_over_preflights_batches_unless_told_one_task_per_chunk() -> None:
    dag = pipeline()
    preflight = dag.get_task("load_public_t.preflight")
    load = dag.get_task("load_public_t.load")
    assert preflight.load_batch_size == "2GB"  # type: ignore[attr-defined]
    [(_, mapped_over)] = load.expand_input.value.items()  # type: ignore[attr-defined]
    assert mapped_over.operator is preflight  # its return value: the batches
    per_chunk = pipeline(load_batch_size=None)
    assert per_chunk.get_task("load_public_t.preflight").load_batch_size is None  # type: ignore[attr-defined]
    [(_, mapped_over)] = per_chunk.get_task("load_public_t.load").expand_input.value.items()  # type: ignore[attr-defined]
    assert mapped_over.operator.task_id == "load_public_t.collect_staging"


@pytest.mark.parametrize("size", ["0", "lots", True])
def test_a_load_batch_size_no_run_could_use_is_refused_when_the_dag_is_parsed(size: Any) -> None:
    with pytest.raises(ValueError, match=r"load_batch_size|size"):
        pipeline(load_batch_size=size)


def test_presorted_input_is_staged_unsorted_and_preflight_is_not_told_to_sort() -> None:
    dag = pipeline(sort_by_primary_key="presorted")
    assert dag.get_task("load_public_t.stage").sort_by_primary_key == "presorted"  # type: ignore[attr-defined]
    assert dag.get_task("load_public_t.preflight").sort is False  # type: ignore[attr-defined]


def test_a_mapped_load_is_named_by_its_first_chunk_and_how_many_more_it_holds() -> None:
    from types import SimpleNamespace

    import jinja2

    from airflow_bulkload.pipeline_args import CHUNK_MAP_INDEX

    template = jinja2.Environment().from_string(CHUNK_MAP_INDEX)

    def name(chunk: Any) -> str:
        return template.render(task=SimpleNamespace(chunk=chunk))

    one = {"uri": "s3://b/p/chunk-00003.csv.gz"}
    ranged = {"uri": "s3://in/day/big.csv", "byte_range": [0, 1048575]}
    assert name(one) == "chunk-00003.csv.gz"
    assert name([one]) == "chunk-00003.csv.gz"
    assert name([ranged, one, one]) == "big.csv bytes 0-1048575 +2 more"


@pytest.mark.parametrize("size", ["0", "-5", "abc", 0, -1, "0.4B", "", "1 XB", [], {}, False])
def test_a_bad_load_batch_size_is_refused_naming_it(size: Any) -> None:
    with pytest.raises(ValueError, match="load_batch_size must be a size"):
        pipeline(load_batch_size=size)


@pytest.mark.parametrize("name", ["chunk_size", "stage_group_size"])
@pytest.mark.parametrize("size", ["abc", 0, "-1MB"])
def test_a_staging_size_no_run_could_use_is_refused_when_the_dag_is_parsed(
    name: str, size: Any
) -> None:
    with pytest.raises(ValueError, match=f"{name} must be a size"):
        pipeline(**{name: size})
    pipeline(**{name: "{{ params.size }}"})  # a template is checked once rendered


def test_steps_without_a_task_of_their_own_run_inside_their_neighbours() -> None:
    """Each task launch costs seconds: withdraw runs in claim_table, CHECKPOINT in finalize."""
    dag = pipeline()
    ids = {task.task_id.rpartition(".")[2] for task in dag.tasks}
    assert "withdraw_superseded" not in ids
    assert "checkpoint" not in ids
    finalize = dag.get_task("load_public_t.finalize_table")
    assert finalize.checkpoint is True  # type: ignore[attr-defined]
    report = dag.get_task("load_public_t.report")
    assert finalize.task_id in report.upstream_task_ids
    assert "load_public_t.restore_table" in finalize.downstream_task_ids
    assert "claim_table" in report.stage_task_ids  # type: ignore[attr-defined]
    assert "checkpoint" not in report.stage_task_ids  # type: ignore[attr-defined]


def test_by_default_large_input_is_staged_in_groups_and_preflight_collects_them() -> None:
    dag = pipeline()
    stage = dag.get_task("load_public_t.stage")
    preflight = dag.get_task("load_public_t.preflight")
    assert stage.group_size == "4GB"  # type: ignore[attr-defined]
    names = {task.task_id.rpartition(".")[2] for task in dag.tasks}
    assert "collect_staging" not in names  # pre-flight writes the input's manifest itself
    # no groups maps no stage_group task, which is skipped: pre-flight runs on the plan task's
    # manifest; a failed stage_group, or a skipped stage, stops it
    assert preflight.trigger_rule == "none_failed_min_one_success"
    assert {"load_public_t.stage", "load_public_t.stage_group"} <= preflight.upstream_task_ids
    assert preflight.staging_groups.operator is stage  # type: ignore[attr-defined]
    assert preflight.manifest.operator is stage  # type: ignore[attr-defined]
    assert dag.get_task("load_public_t.report").manifest.operator is stage  # type: ignore[attr-defined]


@pytest.mark.parametrize("arguments", [{"load_batch_size": None}, {"dry_run": True}])
def test_loads_that_map_over_the_staged_chunk_list_always_collect_it(
    arguments: dict[str, Any],
) -> None:
    dag = pipeline(**arguments)
    collect = dag.get_task("load_public_t.collect_staging")
    assert collect.trigger_rule == "none_failed"  # runs after a skipped stage_group
    preflight = dag.get_task("load_public_t.preflight")
    assert preflight.trigger_rule == "all_success"
    assert preflight.staging_groups is None  # type: ignore[attr-defined]
    assert "load_public_t.collect_staging" in dag.get_task("load_public_t.load").upstream_task_ids


def test_without_stage_groups_one_stage_task_stages_everything() -> None:
    dag = pipeline(stage_group_size=None)
    names = {task.task_id.rpartition(".")[2] for task in dag.tasks}
    assert not {"stage_group", "collect_staging"} & names
    assert dag.get_task("load_public_t.preflight").trigger_rule == "all_success"


def test_preflight_is_advice_only_so_clearing_it_alone_changes_nothing() -> None:
    """Clearing one task without its downstream (``airflow tasks clear -t preflight``, the REST
    API's default) re-runs it outside the setup/teardown scope: a claim or a withdraw there would
    outlive the run (a claim no teardown releases; with reload, the run's own rows taken out
    under a green run). Pre-flight must stay read-only advice."""
    from airflow_bulkload.operators import PreflightCheckOperator

    dag = pipeline(reload=True)
    preflight = dag.get_task("load_public_t.preflight")
    assert type(preflight) is PreflightCheckOperator
    assert not preflight.is_setup and not preflight.is_teardown


@pytest.mark.parametrize(
    ("step", "teardown"),
    [
        ("claim_table", "restore_table"),
        ("prepare_table", "restore_table"),
        ("enter_bulk_mode", "exit_bulk_mode"),
    ],
)
def test_each_step_a_teardown_undoes_has_it_right_after_so_a_clear_without_it_is_refused(
    step: str, teardown: str
) -> None:
    """A step re-run without its teardown (``claim_table`` cleared alone; "only failed" after a
    setup failed) refuses when that teardown already ended (``refuse_if_teardown_ended``, which
    looks at the teardowns directly downstream). Its state says so only if the teardown waits
    for the step whatever happened to it."""
    dag = pipeline(reload=True)
    task = dag.get_task(f"load_public_t.{step}")
    teardowns = [t.task_id for t in task.downstream_list if t.is_teardown]
    assert teardowns == [f"load_public_t.{teardown}"]
    assert dag.get_task(teardowns[0]).trigger_rule == "all_done"
