"""Foreign keys: an orphan row never ends a run green, and the foreign key is put back as it was."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError, ForeignKeyViolationError
from airflow_bulkload.hooks import BulkLoadHook, TableStateHook
from tests.harness import MotoServer, TestDatabase, put_chunk


def foreign_keys(db: TestDatabase) -> list[tuple[Any, ...]]:
    if db.engine == "postgres":
        return db.query(
            "SELECT conname, pg_get_constraintdef(oid), convalidated FROM pg_constraint"
            " WHERE conrelid = 'orders'::regclass AND contype = 'f'"
        )
    return db.query(
        "SELECT CONSTRAINT_NAME, REFERENCED_TABLE_NAME FROM information_schema.REFERENTIAL_CONSTRAINTS"
        " WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = 'orders'"
    )


def claims(db: TestDatabase) -> list[tuple[Any, ...]]:
    table = "bulkload.table_claims" if db.engine == "postgres" else "bulkload_table_claims"
    return db.query(f"SELECT load_id FROM {table}")


@pytest.fixture
def orders(any_db: TestDatabase) -> TestDatabase:
    any_db.query("CREATE TABLE customers (id int PRIMARY KEY)")
    any_db.query("INSERT INTO customers VALUES (1), (2), (3)")
    any_db.query(
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int,"
        " CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id))"
    )
    any_db.query("CREATE INDEX orders_customer_idx ON orders (customer_id)")
    return any_db


def chunk(moto: MotoServer, bucket: str, name: str, rows: list[tuple[int, int]]) -> dict[str, Any]:
    body = "".join(f"{i},{c}\n" for i, c in rows).encode()
    return put_chunk(moto, bucket, name, body, rows=len(rows), columns=["id", "customer_id"])


def test_an_orphan_row_fails_its_chunk_on_a_table_holding_rows(
    orders: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    orders.query("INSERT INTO orders VALUES (1, 1)")
    before = foreign_keys(orders)
    hook = TableStateHook(conn_id=orders.conn_id)
    hook.prepare("orders", load_id="F", incoming_bytes=10**9)
    loader = BulkLoadHook(conn_id=orders.conn_id)
    loader.load_chunk("orders", chunk(moto_server, s3_bucket, "f/c0.csv.gz", [(2, 2), (3, 3)]))
    orphan = chunk(moto_server, s3_bucket, "f/c1.csv.gz", [(4, 1), (5, 999)])

    with pytest.raises(ChunkLoadError, match=r"f/c1\.csv\.gz.*(?i:foreign key)"):
        loader.load_chunk("orders", orphan)
    hook.restore("orders", load_id="F")

    assert foreign_keys(orders) == before
    assert claims(orders) == []
    assert orders.query("SELECT count(*) FROM orders WHERE customer_id = 999") == [(0,)]


def test_an_orphan_in_an_empty_tables_load_leaves_it_empty_with_its_key_validated(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    pg_db.query("CREATE TABLE customers (id int PRIMARY KEY)")
    pg_db.query("INSERT INTO customers VALUES (1), (2)")
    pg_db.query(
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int,"
        " CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id))"
    )
    before = foreign_keys(pg_db)
    hook = TableStateHook(conn_id=pg_db.conn_id)
    prepared = hook.prepare("orders", load_id="E", incoming_bytes=10**9)
    assert "foreign key orders.orders_customer_fk" in prepared["dropped"]
    BulkLoadHook(conn_id=pg_db.conn_id).load_chunk(
        "orders", chunk(moto_server, s3_bucket, "e/c0.csv.gz", [(1, 1), (2, 999)]), load_id="E"
    )

    with pytest.raises(ForeignKeyViolationError, match=r"orders_customer_fk.*999"):
        hook.finalize("orders", load_id="E")
    assert foreign_keys(pg_db) == []  # not left NOT VALID
    hook.restore("orders", load_id="E")

    assert foreign_keys(pg_db) == before  # validated, as it was
    assert claims(pg_db) == []
    assert pg_db.query("SELECT count(*) FROM orders") == [(0,)]


def test_a_clean_input_loads_and_keeps_the_key(
    orders: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    orders.query("INSERT INTO orders VALUES (1, 1)")
    before = foreign_keys(orders)
    hook = TableStateHook(conn_id=orders.conn_id)
    hook.prepare("orders", load_id="C", incoming_bytes=10**9)
    BulkLoadHook(conn_id=orders.conn_id).load_chunk(
        "orders", chunk(moto_server, s3_bucket, "c/c0.csv.gz", [(2, 2), (3, 3)])
    )
    hook.finalize("orders", load_id="C")
    assert foreign_keys(orders) == before
    assert orders.query("SELECT count(*) FROM orders") == [(3,)]


def test_mysql_orphans_loaded_while_the_key_was_dropped_refuse_it_naming_them(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Asked to drop the foreign key (drop_foreign_keys=True), MySQL loads an orphan without a
    check; InnoDB would re-add the key without checking either. The rows are checked first."""
    mysql_db.query("CREATE TABLE customers (id int PRIMARY KEY)")
    mysql_db.query("INSERT INTO customers VALUES (1), (2), (3)")
    mysql_db.query(
        "CREATE TABLE orders (id int PRIMARY KEY, customer_id int,"
        " CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id))"
    )
    before = foreign_keys(mysql_db)
    hook = TableStateHook(conn_id=mysql_db.conn_id)
    hook.prepare("orders", load_id="M", incoming_bytes=10**9, drop_foreign_keys=True)
    assert foreign_keys(mysql_db) == []
    rows = [(1, 1), (2, 2), (3, 999), (4, 3)]
    body = "".join(f"{i},{c}\n" for i, c in rows).encode()
    loader = BulkLoadHook(conn_id=mysql_db.conn_id)
    loader.load_chunk(
        "orders",
        put_chunk(
            moto_server, s3_bucket, "m/c0.csv.gz", body, rows=4, columns=["id", "customer_id"]
        ),
    )

    with pytest.raises(ForeignKeyViolationError, match=r"orders_customer_fk.*\(999\)"):
        hook.finalize("orders", load_id="M")
    assert foreign_keys(mysql_db) == []  # never added over an orphan

    mysql_db.query("DELETE FROM orders WHERE customer_id = 999")
    hook.finalize("orders", load_id="M")
    assert foreign_keys(mysql_db) == before
