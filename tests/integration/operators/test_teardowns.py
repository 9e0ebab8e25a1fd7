"""Teardowns survive a blip: a failed attempt of restore_table is finished by its retry."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_bulkload.hooks import TableStateHook
from airflow_bulkload.operators.table import RestoreTableOperator
from tests.harness import TestDatabase, free_port
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
