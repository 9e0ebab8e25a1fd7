"""Teardowns survive a blip: a failed attempt of restore_table or exit_bulk_mode is finished by
its retry, on both engines."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.bulk_mode import BulkModeTarget
from airflow_bulkload.hooks import TableStateHook
from airflow_bulkload.operators import EnterBulkModeOperator, ExitBulkModeOperator
from airflow_bulkload.operators.table import RestoreTableOperator
from tests.harness import TestDatabase, free_port, register_dag
from tests.integration.hooks.test_bulk_mode_server import (
    _bulk_shown,
    _show,
    _wait_shown,
    restore_globals,  # noqa: F401 (fixture)
)
from tests.integration.operators.test_table_mysql import SCHEMA as MYSQL_SCHEMA
from tests.integration.operators.test_table_mysql import catalog as mysql_catalog
from tests.integration.operators.test_table_mysql import insert_items
from tests.integration.operators.test_table_postgres import SCHEMA, catalog, insert_orders


@pytest.fixture
def orders(pg_db: TestDatabase) -> dict[str, Any]:
    pg_db.query(SCHEMA)
    insert_orders(pg_db, 1, 100)
    return catalog(pg_db)


def point_connection(monkeypatch: pytest.MonkeyPatch, db: TestDatabase, port: int) -> str:
    """An Airflow connection ``blip`` to ``db``, on ``port``."""
    conn = json.loads(db.airflow_conn) | {"port": port}
    monkeypatch.setenv("AIRFLOW_CONN_BLIP", json.dumps(conn))
    return "blip"


def test_restore_that_fails_on_a_lost_server_is_finished_by_its_retry(
    pg_db: TestDatabase, orders: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    TableStateHook(conn_id=pg_db.conn_id).prepare(
        "orders", load_id="T", drop_indexes=True, drop_unique_indexes=True
    )
    assert catalog(pg_db) != orders
    restore = RestoreTableOperator(
        task_id="restore_table", table="orders", conn_id="blip", load_id="T"
    )

    point_connection(monkeypatch, pg_db, free_port())  # the server is unreachable: a blip
    with pytest.raises(Exception, match=r"(?i)connect|refused"):
        restore.execute({})
    assert catalog(pg_db) != orders

    point_connection(monkeypatch, pg_db, pg_db.server.port)  # the retry, once it is back
    assert restore.execute({})["status"] != "already done"
    assert catalog(pg_db) == orders


def test_restore_retried_after_rebuilding_some_indexes_finishes_the_rest(
    pg_db: TestDatabase, orders: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("orders", load_id="P", drop_indexes=True, drop_unique_indexes=True)
    # what an attempt killed half-way leaves: some indexes back, others not
    pg_db.query("CREATE INDEX orders_status_hash ON orders USING hash (status)")
    pg_db.query("CREATE UNIQUE INDEX orders_code_key ON orders (code)")

    hook.restore("orders", load_id="P")

    assert catalog(pg_db) == orders


def test_exit_bulk_mode_that_fails_on_a_blip_is_retried_by_airflow_and_restores(
    airflow_db: Path,
    restore_globals: TestDatabase,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A real DAG run: exit_bulk_mode's first attempt cannot reach the server, Airflow retries
    it (the pipeline's teardown arguments), and the server ends with its own settings."""
    from airflow.sdk import DAG, task
    from airflow.utils.state import DagRunState

    db = restore_globals
    before = {n: _show(db, n) for n in _bulk_shown(db)}
    point_connection(monkeypatch, db, free_port())  # exit's connection: unreachable at first
    attempts: list[int] = []

    def server_back(context: Any) -> None:
        attempts.append(context["ti"].try_number)
        point_connection(monkeypatch, db, db.server.port)

    with DAG(
        dag_id=f"bulkload_test_exit_blip_{db.engine}",
        schedule=None,
        start_date=datetime(2025, 1, 1),
    ) as dag:
        enter = EnterBulkModeOperator(
            task_id="enter_bulk_mode", table="events", target=BulkModeTarget(conn_id=db.conn_id)
        )
        exit_ = ExitBulkModeOperator(
            task_id="exit_bulk_mode",
            table="events",
            target=BulkModeTarget(conn_id="blip"),
            retries=2,
            retry_delay=timedelta(seconds=0),
            on_retry_callback=server_back,
        )

        @task
        def load() -> None:
            assert _wait_shown(db, _bulk_shown(db)) == _bulk_shown(db)

        enter.as_setup() >> load() >> exit_.as_teardown(setups=enter)

    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2))

    states = {ti.task_id: str(ti.state) for ti in run.get_task_instances()}
    assert run.state == DagRunState.SUCCESS, states
    assert attempts == [1]
    assert _wait_shown(db, before) == before


def test_mysql_restore_that_fails_on_a_lost_server_is_finished_by_its_retry(
    mysql_db: TestDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    for statement in MYSQL_SCHEMA:
        mysql_db.query(statement)
    insert_items(mysql_db, 1, 50)
    items = mysql_catalog(mysql_db)
    TableStateHook(conn_id=mysql_db.conn_id).prepare(
        "items", load_id="M", incoming_bytes=10**9, drop_unique_indexes=True
    )
    assert mysql_catalog(mysql_db) != items
    restore = RestoreTableOperator(
        task_id="restore_table", table="items", conn_id="blip", load_id="M"
    )

    point_connection(monkeypatch, mysql_db, free_port())
    with pytest.raises(Exception, match=r"(?i)connect|refused"):
        restore.execute({})
    assert mysql_catalog(mysql_db) != items

    point_connection(monkeypatch, mysql_db, mysql_db.server.port)
    restore.execute({})
    assert mysql_catalog(mysql_db) == items
