"""Prepare -> load -> finalize -> checkpoint, restore as teardown, run with dag.test()."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow_bulkload.operators import (
    CheckpointOperator,
    FinalizeTableOperator,
    PrepareTableOperator,
    RestoreTableOperator,
)
from tests.harness import TestDatabase, register_dag
from tests.integration.operators.test_table_postgres import SCHEMA, catalog, insert_orders


def test_the_operators_through_dag_test(airflow_db: Path, pg_db: TestDatabase) -> None:
    from airflow.sdk import DAG, task
    from airflow.utils.state import DagRunState

    pg_db.query(SCHEMA)
    insert_orders(pg_db, 1, 100)
    before = catalog(pg_db)
    conn_id = pg_db.conn_id

    with DAG(dag_id="bulkload_test_table_ops", schedule=None, start_date=datetime(2025, 1, 1)):
        prepare = PrepareTableOperator(
            task_id="prepare_table",
            table="orders",
            conn_id=conn_id,
            drop_indexes="{{ 'TRUE' }}",  # rendered by Jinja, parsed case-insensitively
            incoming_bytes="{{ 10 ** 9 }}",
        )

        @task
        def load() -> None:
            insert_orders(pg_db, 101, 500)

        finalize = FinalizeTableOperator(
            task_id="finalize_table", table="orders", conn_id=conn_id, parallelism="{{ 2 }}"
        )
        restore = RestoreTableOperator(task_id="restore_table", table="orders", conn_id=conn_id)
        checkpoint = CheckpointOperator(task_id="checkpoint", conn_id=conn_id)
        (
            prepare.as_setup()
            >> load()
            >> finalize
            >> checkpoint
            >> restore.as_teardown(setups=prepare)
        )

    dag = prepare.dag
    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2))

    assert run.state == DagRunState.SUCCESS
    assert catalog(pg_db) == before
    states = pg_db.query("SELECT load_id, status FROM bulkload.table_state")
    assert len(states) == 1 and states[0][1] == "done"
    assert states[0][0].startswith("bulkload_test_table_ops/orders/")
    assert pg_db.query("SELECT count(*) FROM orders") == [(600,)]
