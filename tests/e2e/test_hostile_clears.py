"""Clears that re-run a step without the tasks after it, under a real scheduler.

``claim_table`` cleared alone (``airflow tasks clear -t`` without ``-d``, the REST API's default)
after a green ``reload`` run, also while ``restore_table`` was still running or waiting to retry
(the hostile review's breaks: the claim went on and the reload withdrew every row under a run
that ended green), and "only failed" after the claim timed out (its teardown ran anyway, so it
is not cleared again). The step must refuse, changing nothing; cleared with its downstream
tasks, as its error says, the run loads every row once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.airflow_cluster import AirflowCluster
from tests.e2e.backfills import (
    backfill,
    clear,
    next_dates,
    run_logs,
    run_state,
    start_backfill,
    task_states,
    the_run,
    wait_run_ended,
    wait_task_ran_again,
)
from tests.e2e.conftest import _example
from tests.e2e.example_load import ExampleLoad
from tests.harness import MotoServer, TestDatabase

DAG_ID = "clears"
#: the example's PostgreSQL pipeline, with a claim that gives up after 6 s
DAG_SOURCE = f"""
import os
from datetime import timedelta

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.pipeline import bulk_load_table, reload_param

with DAG(
    {DAG_ID!r},
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    user_defined_macros={{"input_root": os.environ["BULKLOAD_EXAMPLE_INPUT"]}},
    params={{"reload": reload_param()}},
) as dag:
    bulk_load_table(
        table=os.environ["BULKLOAD_EXAMPLE_PG_TABLE"],
        conn_id=os.environ["BULKLOAD_EXAMPLE_PG_CONN"],
        reload="{{{{ params.reload }}}}",
        source="{{{{ input_root ~ '/events/' ~ ds ~ '/' }}}}",
        staging=os.environ["BULKLOAD_EXAMPLE_STAGING"],
        file_format={{"format": "csv", "header": True}},
        chunk_size=os.environ["BULKLOAD_EXAMPLE_CHUNK_SIZE"],
        parallelism=2,
        table_claim_timeout=timedelta(seconds=6),
    )
"""
#: before ``restore_table`` or ``prepare_table`` does anything: it waits while the file
#: ``HOLD_<TASK>`` names exists, and fails as with a lost connection while ``FAIL_<TASK>``'s does
STEP_POLICY = """
import os, time

NAMES = {"restore_table": "RESTORE", "prepare_table": "PREPARE"}


def _hold_or_fail(name):
    while os.path.exists(os.environ.get("HOLD_" + name, "/nonexistent")):
        time.sleep(0.5)
    if os.path.exists(os.environ.get("FAIL_" + name, "/nonexistent")):
        raise ConnectionError(name.lower() + " lost its connection (test)")


def task_policy(task):
    # pre_execute, not on_execute_callback: an error in a callback is only logged
    name = NAMES.get(task.task_id.rsplit(".", 1)[-1])
    if name:
        before = task._pre_execute_hook

        def pre_execute(context, _before=before, _name=name):
            _hold_or_fail(_name)
            if _before is not None:
                _before(context)

        task._pre_execute_hook = pre_execute
"""
CLAIM = ".claim_table"  # `tasks clear -t` matches a substring of the task ids
REFUSED = "was cleared to run again without the tasks after it"


@pytest.fixture
def clears(
    pg_db: TestDatabase, moto_server: MotoServer, tmp_path: Path
) -> Iterator[tuple[ExampleLoad, AirflowCluster, Path, Path]]:
    """The example's table with 3,000 rows a date in 96KB chunks, a deployment running
    :data:`DAG_SOURCE` with :data:`STEP_POLICY`, and its hold and fail files for restore."""
    example = _example(pg_db, moto_server, tmp_path)
    example.files = 2
    example.chunk_size = "96KB"
    example.rows = 3_000
    example.dag = DAG_ID
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "clears.py").write_text(DAG_SOURCE)
    hold, fail = tmp_path / "hold-restore", tmp_path / "fail-restore"
    env = example.env() | {
        "HOLD_RESTORE": str(hold),
        "FAIL_RESTORE": str(fail),
        "FAIL_PREPARE": str(tmp_path / "fail-prepare"),
    }
    cluster = AirflowCluster(
        tmp_path / "cluster", env, dags_folder=dags, local_settings=STEP_POLICY
    )
    try:
        cluster.start()
        cluster.wait_for_dag(DAG_ID)
        yield example, cluster, hold, fail
    finally:
        cluster.stop()


def claims(example: ExampleLoad) -> list[tuple[Any, ...]]:
    return example.query("SELECT table_name, load_id FROM bulkload.table_claims")


def rows(example: ExampleLoad) -> int:
    return int(example.query("SELECT count(*) FROM public.events")[0][0])


def test_a_claim_cleared_alone_after_a_green_reload_run_refuses_and_the_rows_stay(
    clears: tuple[ExampleLoad, AirflowCluster, Path, Path],
) -> None:
    """Nothing else runs again: the claim must neither take the table (nothing would release
    it) nor withdraw the run's rows (nothing would load them again, and the run stays green)."""
    example, cluster, _, _ = clears
    [ds] = next_dates(cluster, DAG_ID, 1)
    example.add_input(ds, seed=21)
    before = example.snapshot()
    [(run_id, _, _)] = backfill(cluster, DAG_ID, [ds], conf={"reload": True})
    example.assert_loaded_once(before)
    first = task_states(cluster, DAG_ID, run_id)

    clear(cluster, DAG_ID, run_id, "-t", CLAIM)
    again = wait_task_ran_again(cluster, DAG_ID, run_id, "claim_table", first["claim_table"][1])
    assert again["claim_table"][0] == "failed", again
    assert {k: v for k, v in again.items() if k != "claim_table"} == {
        k: v for k, v in first.items() if k != "claim_table"
    }
    example.assert_loaded_once(before)
    assert claims(example) == []
    logs = run_logs(cluster, DAG_ID, run_id)
    assert REFUSED in logs and "Nothing was changed" in logs

    # as the error says: with its downstream tasks the reload runs, green, every row once
    clear(cluster, DAG_ID, run_id, "-t", CLAIM, "-d")
    wait_task_ran_again(cluster, DAG_ID, run_id, "claim_table", again["claim_table"][1])
    assert run_state(cluster, DAG_ID, run_id) == "success", cluster.failure(
        "the run did not end green", DAG_ID
    )
    example.assert_loaded_once(before)
    assert claims(example) == []


@pytest.mark.parametrize("restore", ["running", "up_for_retry"])
def test_a_claim_cleared_alone_while_restore_still_runs_refuses_and_the_rows_stay(
    clears: tuple[ExampleLoad, AirflowCluster, Path, Path], restore: str
) -> None:
    """The report verified the load, ``restore_table`` has not ended: held running, or failed
    once and waiting for its retry (the teardowns retry with exponential backoff, so that can
    last minutes). The claim cleared then must refuse all the same."""
    example, cluster, hold, fail = clears
    [ds] = next_dates(cluster, DAG_ID, 1)
    example.add_input(ds, seed=35)
    before = example.snapshot()
    (hold if restore == "running" else fail).write_text("")
    start_backfill(cluster, DAG_ID, [ds], {"reload": True})
    run_id = the_run(cluster, DAG_ID)

    def verified_and_restore_waits() -> dict[str, tuple[Any, int]] | None:
        states = task_states(cluster, DAG_ID, run_id)
        done = states.get("report", (None,))[0] == "success"
        return states if done and states.get("restore_table", (None,))[0] == restore else None

    first = cluster.wait_for(f"report green, restore {restore}", verified_and_restore_waits, 300)
    loaded = rows(example)
    clear(cluster, DAG_ID, run_id, "-t", CLAIM)

    def claim_ran() -> dict[str, tuple[Any, int]] | None:
        states = task_states(cluster, DAG_ID, run_id)
        state, tries = states["claim_table"]
        return (
            states if tries > first["claim_table"][1] and state in ("success", "failed") else None
        )

    again = cluster.wait_for("the claim cleared alone to end", claim_ran, 120)
    assert again["claim_table"][0] == "failed", again
    assert rows(example) == loaded
    assert REFUSED in run_logs(cluster, DAG_ID, run_id)
    hold.unlink(missing_ok=True)
    fail.unlink(missing_ok=True)  # the connection is back
    wait_run_ended(cluster, DAG_ID, run_id, 600)
    assert rows(example) == loaded
    example.assert_loaded_once(before)
    assert claims(example) == []


def test_only_failed_after_the_claim_timed_out_refuses_then_a_downstream_clear_loads(
    clears: tuple[ExampleLoad, AirflowCluster, Path, Path],
) -> None:
    """Another load holds the table: the claim times out, ``restore_table`` and
    ``exit_bulk_mode`` run anyway (they succeed: nothing to undo). "Only failed" then clears the
    claim and what failed after it, not the teardowns: the claim must refuse, or a failure after
    it would leave the table stripped and claimed, and the server in bulk mode."""
    from airflow_bulkload.hooks.load_modes import LoadModesHook

    example, cluster, _, _ = clears
    [ds] = next_dates(cluster, DAG_ID, 1)
    example.add_input(ds, seed=31)
    empty = example.snapshot()
    LoadModesHook(conn_id=example.db.conn_id).claim(example.table, load_id="someone/else")
    start_backfill(cluster, DAG_ID, [ds])
    run_id = the_run(cluster, DAG_ID)
    assert wait_run_ended(cluster, DAG_ID, run_id) == "failed"
    first = task_states(cluster, DAG_ID, run_id)
    assert first["claim_table"][0] == "failed" and first["restore_table"][0] == "success", first
    assert "is held by load someone/else" in run_logs(cluster, DAG_ID, run_id)
    example.query("DELETE FROM bulkload.table_claims WHERE load_id = 'someone/else'")

    clear(cluster, DAG_ID, run_id, "-f")  # the UI's "Clear only failed" on the run
    again = wait_task_ran_again(cluster, DAG_ID, run_id, "claim_table", first["claim_table"][1])
    assert again["claim_table"][0] == "failed", again
    assert REFUSED in run_logs(cluster, DAG_ID, run_id)
    assert claims(example) == [] and example.leases() == []
    assert example.snapshot() == empty and rows(example) == 0

    clear(cluster, DAG_ID, run_id, "-t", CLAIM, "-d")
    wait_task_ran_again(cluster, DAG_ID, run_id, "claim_table", again["claim_table"][1])
    assert run_state(cluster, DAG_ID, run_id) == "success", cluster.failure(
        "the run did not end green", DAG_ID
    )
    example.assert_loaded_once(empty)
    assert claims(example) == []


def test_only_failed_after_prepare_failed_refuses_then_a_downstream_clear_loads(
    clears: tuple[ExampleLoad, AirflowCluster, Path, Path],
) -> None:
    """``prepare_table`` fails (a lost connection); ``restore_table``, its teardown, runs anyway.
    "Only failed" clears prepare and what failed after it, not restore: prepare must refuse, or
    a failure after it would leave the table without its indexes and claimed."""
    example, cluster, hold, _ = clears
    fail_prepare = hold.with_name("fail-prepare")
    [ds] = next_dates(cluster, DAG_ID, 1)
    example.add_input(ds, seed=41)
    empty = example.snapshot()
    fail_prepare.write_text("")
    start_backfill(cluster, DAG_ID, [ds])
    run_id = the_run(cluster, DAG_ID)
    assert wait_run_ended(cluster, DAG_ID, run_id) == "failed"
    first = task_states(cluster, DAG_ID, run_id)
    assert first["prepare_table"][0] == "failed" and first["restore_table"][0] == "success", first
    fail_prepare.unlink()  # the connection is back

    clear(cluster, DAG_ID, run_id, "-f")
    again = wait_task_ran_again(cluster, DAG_ID, run_id, "prepare_table", first["prepare_table"][1])
    assert again["prepare_table"][0] == "failed", again
    assert again["claim_table"] == first["claim_table"]  # not cleared: it had succeeded
    assert "prepare_table was cleared to run again" in run_logs(cluster, DAG_ID, run_id)
    assert claims(example) == [] and example.snapshot() == empty and rows(example) == 0

    clear(cluster, DAG_ID, run_id, "-t", ".prepare_table", "-d")
    wait_task_ran_again(cluster, DAG_ID, run_id, "prepare_table", again["prepare_table"][1])
    assert run_state(cluster, DAG_ID, run_id) == "success", cluster.failure(
        "the run did not end green", DAG_ID
    )
    example.assert_loaded_once(empty)
    assert claims(example) == []
