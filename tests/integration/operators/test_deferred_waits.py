"""The two long database waits, deferred: a free load slot and the table's claim, run with dag.test().

``dag.test()`` runs a deferred task's trigger in-process, then resumes the task with the event, so
these tests go through the real trigger and the real resume on the real servers. Another session
holds the slot or the claim, and lets go of it once the task is seen deferred in the metadata DB.
"""

from __future__ import annotations

import threading
import time
from contextlib import closing
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import TableClaimedError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.table_state import TableStateHook
from airflow_bulkload.operators import ClaimTableOperator, LoadChunkOperator
from tests.harness import MotoServer, TestDatabase, put_chunk, register_dag, unique_name


def _run(task_factory: Any, release: Any = None) -> tuple[dict[str, str], bool]:
    """Run a one-task DAG; ``release`` is called once the task is seen deferred (or after 60 s).

    Returns the task states and whether the task was seen in the deferred state.
    """
    from airflow.sdk import DAG

    dag_id = unique_name("bulkload_defer")
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2025, 1, 1)) as dag:
        task_factory()
    register_dag(dag)
    seen = threading.Event()
    done = threading.Event()

    def watch() -> None:
        from airflow.models.taskinstance import TaskInstance
        from airflow.utils.session import create_session
        from sqlalchemy import select

        deadline = time.monotonic() + 60
        while not done.is_set() and time.monotonic() < deadline:
            with create_session() as session:
                # dag.test() moves a deferred task on to queued while it runs the trigger in
                # line; the trigger the deferral created stays named on the task instance
                triggers = session.scalars(
                    select(TaskInstance.trigger_id).where(TaskInstance.dag_id == dag_id)
                ).all()
            if any(trigger is not None for trigger in triggers):
                seen.set()
                break
            time.sleep(0.2)
        if release is not None:
            release()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        run = dag.test(run_after=datetime(2025, 1, 2))
    finally:
        done.set()
        watcher.join()
    return {ti.task_id: str(ti.state) for ti in run.get_task_instances()}, seen.is_set()


def _hold_slot(hook: BulkLoadHook) -> Any:
    holder = hook.get_conn()
    table = hook.dialect.qualified_name(holder, hook.dialect.table_ref("t"))
    assert hook.dialect.try_acquire_load_slot(holder, table, 0)
    holder.commit()
    return holder


def test_a_deferred_load_waits_for_a_slot_in_the_trigger_then_loads_exactly(
    airflow_db: Path, any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    any_db.query("CREATE TABLE t (id INT PRIMARY KEY)")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1\n2\n3\n", rows=3)
    holder = _hold_slot(BulkLoadHook(conn_id=any_db.conn_id))

    states, deferred = _run(
        lambda: LoadChunkOperator(
            task_id="load",
            table="t",
            conn_id=any_db.conn_id,
            chunk=chunk,
            max_concurrent_loads=1,
            deferrable=True,
            poll_interval=0.5,
        ),
        release=holder.close,  # as the other load's session ends
    )

    assert states == {"load": "success"}, states
    assert deferred, "the load never showed as deferred while the slot was held"
    assert any_db.query("SELECT count(*), sum(id) FROM t") == [(3, 6)]


def test_a_deferred_load_fails_when_no_slot_frees_up_in_time(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    pg_db.query("CREATE TABLE t (id INT PRIMARY KEY)")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1\n", rows=1)
    with closing(_hold_slot(BulkLoadHook(conn_id=pg_db.conn_id))):
        states, deferred = _run(
            lambda: LoadChunkOperator(
                task_id="load",
                table="t",
                conn_id=pg_db.conn_id,
                chunk=chunk,
                max_concurrent_loads=1,
                slot_wait_timeout=2,
                deferrable=True,
                poll_interval=0.5,
            )
        )
    assert states == {"load": "failed"}, states
    assert deferred
    assert pg_db.query("SELECT count(*) FROM t") == [(0,)]


def test_a_deferred_claim_is_taken_when_the_other_load_lets_go(
    airflow_db: Path, any_db: TestDatabase
) -> None:
    any_db.query("CREATE TABLE t (id INT PRIMARY KEY)")
    hook = TableStateHook(conn_id=any_db.conn_id)
    hook.claim("t", load_id="the other load")

    states, deferred = _run(
        lambda: ClaimTableOperator(
            task_id="claim_table",
            table="t",
            conn_id=any_db.conn_id,
            load_id="this load",
            claim_timeout=60,
            deferrable=True,
            poll_interval=0.5,
        ),
        release=lambda: hook.restore("t", load_id="the other load"),
    )

    assert states == {"claim_table": "success"}, states
    assert deferred
    # the claim is this load's now: another load is refused, naming it
    with pytest.raises(TableClaimedError, match="this load"):
        hook.claim("t", load_id="a third load")
    hook.restore("t", load_id="this load")


def test_a_deferred_claim_fails_naming_the_holder_when_it_never_lets_go(
    airflow_db: Path, pg_db: TestDatabase
) -> None:
    pg_db.query("CREATE TABLE t (id INT PRIMARY KEY)")
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.claim("t", load_id="the other load")
    try:
        states, deferred = _run(
            lambda: ClaimTableOperator(
                task_id="claim_table",
                table="t",
                conn_id=pg_db.conn_id,
                load_id="this load",
                claim_timeout=2,
                deferrable=True,
                poll_interval=0.5,
            )
        )
        assert states == {"claim_table": "failed"}, states
        assert deferred
        with pytest.raises(TableClaimedError, match="the other load"):
            hook.claim("t", load_id="this load")
    finally:
        hook.restore("t", load_id="the other load")
