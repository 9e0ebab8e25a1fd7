"""Hostile: finalize's ``maintenance_work_mem`` on a real PostgreSQL, prepare -> finalize -> restore.

Can a bad value (one that ``check_memory_setting`` lets through) leave the table without its
indexes? Disproved below: finalize fails before it builds anything, the saved state and the claim
stay, and restore (the pipeline's teardown, which builds with its own default memory) puts every
index, constraint, foreign key and reloption back. A value the server would read as another size
(a leading zero: octal) is refused by the hook before anything is read.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.hooks import TableStateHook
from tests.harness import TestDatabase
from tests.integration.operators.test_table_postgres import SCHEMA, catalog, insert_orders


@pytest.fixture
def orders(pg_db: TestDatabase) -> dict[str, Any]:
    pg_db.query(SCHEMA)
    insert_orders(pg_db, 1, 100)
    return catalog(pg_db)


def index_count(db: TestDatabase) -> int:
    return int(db.query("SELECT count(*) FROM pg_index WHERE indrelid = 'orders'::regclass")[0][0])


@pytest.mark.parametrize("bad", ["0", "1kB", "2TB", "64\u00a0MB", "\u0666\u0664MB"], ids=ascii)
@pytest.mark.parametrize("parallelism", [1, 3])
def test_a_memory_setting_the_server_refuses_leaves_nothing_restore_cannot_put_back(
    pg_db: TestDatabase, orders: dict[str, Any], bad: str, parallelism: int
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare(
        "orders", load_id="M", incoming_bytes=10**9, drop_primary_key=True, drop_foreign_keys=True
    )
    assert index_count(pg_db) == 0
    insert_orders(pg_db, 101, 2000)  # "the load"

    with pytest.raises(Exception, match="maintenance_work_mem"):
        hook.finalize("orders", load_id="M", parallelism=parallelism, maintenance_work_mem=bad)

    # nothing half-built, the state and the claim kept for restore
    assert index_count(pg_db) == 0
    assert pg_db.query("SELECT load_id, status FROM bulkload.table_state") == [("M", "prepared")]
    assert pg_db.query("SELECT table_name, load_id FROM bulkload.table_claims") == [
        ("public.orders", "M")
    ]
    # the teardown: RestoreTableOperator passes no maintenance_work_mem (the hook's default)
    assert hook.restore("orders", load_id="M")["status"] == "restored"
    assert catalog(pg_db) == orders
    assert pg_db.query("SELECT count(*) FROM orders") == [(2100,)]


@pytest.mark.parametrize("octal", ["01024MB", "065536"])
def test_a_setting_the_server_would_read_as_octal_is_refused_before_anything(
    pg_db: TestDatabase, orders: dict[str, Any], octal: str
) -> None:
    """Found by this hostile round: "01024MB" passed the check and the server read it as octal
    01024 = 532 MB, so every index was built with other memory than asked, silently. The hook now
    refuses it before reading anything; restore then puts the table back."""
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("orders", load_id="O", incoming_bytes=10**9, drop_primary_key=True)
    with pytest.raises(ValueError, match="without leading zeros"):
        hook.finalize("orders", load_id="O", parallelism=2, maintenance_work_mem=octal)
    assert index_count(pg_db) == 0
    assert pg_db.query("SELECT load_id, status FROM bulkload.table_state") == [("O", "prepared")]
    assert hook.restore("orders", load_id="O")["status"] == "restored"
    assert catalog(pg_db) == orders
