"""PostgresDialect against the real PostgreSQL server: state schema, ledger locking, introspection."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import psycopg
import pytest

from airflow_bulkload.catalog import LedgerEntry, TableRef
from airflow_bulkload.dialects.postgres import PostgresDialect
from airflow_bulkload.dialects.postgres.migrations import MIGRATIONS
from airflow_bulkload.exceptions import TableNotFoundError
from airflow_bulkload.staging.manifest import ChunkSpec
from tests.harness import TestDatabase

dialect = PostgresDialect()


@pytest.fixture
def conn(pg_db: TestDatabase) -> Iterator[Any]:
    """A connection set up like BulkLoadHook's: psycopg 3, autocommit off."""
    with closing(pg_db.connect(autocommit=False)) as connection:
        yield connection


def test_state_schema_is_created_once_even_by_concurrent_first_users(pg_db: TestDatabase) -> None:
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def first_use() -> None:
        try:
            with closing(pg_db.connect(autocommit=False)) as c:
                barrier.wait()
                dialect.ensure_state_schema(c)
                assert c.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=first_use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert pg_db.query("SELECT version FROM bulkload.schema_migrations ORDER BY version") == [
        (version,) for version, _, _ in MIGRATIONS
    ]
    with closing(pg_db.connect(autocommit=False)) as c:
        dialect.ensure_state_schema(c)  # and again: a no-op
        assert dialect.state_schema_version(c) == MIGRATIONS[-1][0]


def test_claim_serialises_loaders_of_one_chunk_until_the_first_commits(
    pg_db: TestDatabase, conn: Any
) -> None:
    dialect.ensure_state_schema(conn)
    table = TableRef("events", "public")
    chunk = ChunkSpec(uri="s3://bucket/run/chunk-0.csv.gz", checksum="abc", rows=3)
    second_saw: list[LedgerEntry | None] = []

    with dialect.transaction(conn):
        assert dialect.claim_chunk(conn, table, chunk) is None
        first_pid = conn.info.backend_pid

        def second_loader() -> None:
            with closing(pg_db.connect(autocommit=False)) as other, dialect.transaction(other):
                second_saw.append(dialect.claim_chunk(other, table, chunk))

        thread = threading.Thread(target=second_loader)
        thread.start()
        # the second loader is blocked on our advisory lock, not racing past the ledger check
        waiting: list[tuple[Any, ...]] = []
        for _ in range(200):
            waiting = pg_db.query(
                "SELECT l.pid FROM pg_locks l JOIN pg_locks h ON h.locktype = 'advisory'"
                " AND h.database = l.database AND h.objid = l.objid AND h.classid = l.classid"
                " AND h.granted"
                " WHERE l.locktype = 'advisory' AND NOT l.granted AND h.pid = %s",
                (first_pid,),
            )
            if waiting:
                break
            threading.Event().wait(0.05)
        assert waiting, "the second claim did not wait for the first"
        assert second_saw == []
        dialect.record_chunk(conn, LedgerEntry(str(table), chunk.key, "abc", 3, 10, "run-1"))
    thread.join(timeout=30)
    assert second_saw == [LedgerEntry("public.events", chunk.key, "abc", 3, 10, "run-1")]


def test_claim_finds_a_chunk_recorded_with_another_checksum(conn: Any) -> None:
    dialect.ensure_state_schema(conn)
    table = TableRef("events", "public")
    with dialect.transaction(conn):
        dialect.record_chunk(conn, LedgerEntry("public.events", "k/0.gz", "old", 1, 1, "a"))
    with dialect.transaction(conn):
        found = dialect.claim_chunk(conn, table, ChunkSpec(uri="s3://b/k/0.gz", checksum="new"))
    assert found is not None and found.checksum == "old"


def test_stored_key_values_are_the_keys_as_the_columns_store_them(
    pg_db: TestDatabase, conn: Any
) -> None:
    pg_db.query('CREATE TABLE "Keys" (at timestamp(0), n numeric(10,1), name text)')
    table = TableRef("Keys", "public")
    with dialect.transaction(conn):
        stored = dialect.stored_key_values(
            conn,
            table,
            ["at", "n", "name"],
            [["2026-01-01 00:00:59.600", "0.04", "a"], ["2026-01-01 00:01:02", "7", None]],
        )
    assert stored == [
        ["2026-01-01 00:01:00", "0.0", "a"],
        ["2026-01-01 00:01:02", "7.0", None],
    ]


def test_transaction_rolls_back_on_error_and_commits_on_success(
    pg_db: TestDatabase, conn: Any
) -> None:
    pg_db.query("CREATE TABLE t (id int)")
    with pytest.raises(RuntimeError), dialect.transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
        raise RuntimeError("boom")
    with dialect.transaction(conn):
        conn.execute("INSERT INTO t VALUES (2)")
    assert pg_db.query("SELECT id FROM t") == [(2,)]


def test_qualified_name_follows_the_search_path(pg_db: TestDatabase, conn: Any) -> None:
    pg_db.query("CREATE SCHEMA other; CREATE TABLE other.only_here (id int)")
    conn.execute("SET search_path = public, other")
    conn.commit()
    assert dialect.qualified_name(conn, TableRef("only_here")) == TableRef("only_here", "other")
    assert dialect.qualified_name(conn, TableRef("not_yet")) == TableRef("not_yet", "public")
    assert dialect.qualified_name(conn, TableRef("x", "s")) == TableRef("x", "s")
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


RICH_TABLE_DDL = """
CREATE SCHEMA app;
CREATE TABLE app.customers (id bigint PRIMARY KEY, email text NOT NULL);
CREATE TABLE app.orders (
    id bigint GENERATED BY DEFAULT AS IDENTITY,
    customer_id bigint NOT NULL REFERENCES app.customers (id),
    code text NOT NULL,
    amount numeric(12, 2) DEFAULT 0 CHECK (amount >= 0),
    status text,
    created_at timestamptz NOT NULL DEFAULT now(),
    "Mixed Case" text,
    CONSTRAINT orders_pkey PRIMARY KEY (id),
    CONSTRAINT orders_code_key UNIQUE (code)
) WITH (fillfactor = 80, autovacuum_enabled = false);
CREATE INDEX orders_open_idx ON app.orders (created_at) WHERE status = 'open';
CREATE INDEX orders_lower_code_idx ON app.orders (lower(code));
CREATE INDEX orders_customer_created_idx ON app.orders (customer_id, created_at DESC);
CREATE INDEX "orders Mixed idx" ON app.orders USING hash ("Mixed Case");
CREATE TABLE app.shipments (
    id bigint PRIMARY KEY,
    order_id bigint REFERENCES app.orders (id) ON DELETE CASCADE
);
CREATE FUNCTION app.touch() RETURNS trigger LANGUAGE plpgsql AS
    $$ BEGIN NEW.created_at := now(); RETURN NEW; END $$;
CREATE TRIGGER orders_touch BEFORE INSERT ON app.orders FOR EACH ROW EXECUTE FUNCTION app.touch();
"""


def test_describe_table_reads_everything_table_preparation_needs(
    pg_db: TestDatabase, conn: Any
) -> None:
    pg_db.query(RICH_TABLE_DDL)
    info = dialect.describe_table(conn, TableRef("orders", "app"))

    assert [c.name for c in info.columns] == [
        "id",
        "customer_id",
        "code",
        "amount",
        "status",
        "created_at",
        "Mixed Case",
    ]
    types = info.column_types()
    assert types["amount"] == "numeric(12,2)"
    assert types["created_at"] == "timestamp with time zone"
    assert [c.nullable for c in info.columns][:3] == [False, False, False]
    assert info.extra["identity_columns"] == {"id": "by default"}
    assert info.primary_key == ["id"]

    by_name = {ix.name: ix for ix in info.indexes}
    assert set(by_name) == {
        "orders_pkey",
        "orders_code_key",
        "orders_open_idx",
        "orders_lower_code_idx",
        "orders_customer_created_idx",
        "orders Mixed idx",
    }
    assert by_name["orders_pkey"].is_primary and by_name["orders_pkey"].constraint_name == (
        "orders_pkey"
    )
    assert by_name["orders_code_key"].is_unique
    assert by_name["orders_code_key"].constraint_name == "orders_code_key"
    assert by_name["orders_open_idx"].definition == (
        "CREATE INDEX orders_open_idx ON app.orders USING btree (created_at)"
        " WHERE (status = 'open'::text)"
    )
    assert by_name["orders_open_idx"].predicate == "(status = 'open'::text)"
    assert by_name["orders_lower_code_idx"].columns == ["lower(code)"]
    assert by_name["orders_lower_code_idx"].definition == (
        "CREATE INDEX orders_lower_code_idx ON app.orders USING btree (lower(code))"
    )
    assert by_name["orders_customer_created_idx"].columns == ["customer_id", "created_at"]
    assert by_name["orders_customer_created_idx"].definition.endswith(
        "USING btree (customer_id, created_at DESC)"
    )
    assert by_name["orders Mixed idx"].method == "hash"
    assert by_name["orders Mixed idx"].columns == ["Mixed Case"]
    assert by_name["orders Mixed idx"].definition == (
        'CREATE INDEX "orders Mixed idx" ON app.orders USING hash ("Mixed Case")'
    )
    assert all(ix.is_valid for ix in info.indexes)
    assert {ix.name for ix in info.secondary_indexes} == set(by_name) - {"orders_pkey"}

    kinds = {c.name: (c.kind, c.definition) for c in info.constraints}
    assert kinds["orders_pkey"] == ("p", "PRIMARY KEY (id)")
    assert kinds["orders_code_key"] == ("u", "UNIQUE (code)")
    assert kinds["orders_amount_check"] == ("c", "CHECK ((amount >= (0)::numeric))")
    # search_path emptied for the read: the referenced table is always schema-qualified
    assert kinds["orders_customer_id_fkey"] == (
        "f",
        "FOREIGN KEY (customer_id) REFERENCES app.customers(id)",
    )
    assert [c.name for c in info.foreign_keys] == ["orders_customer_id_fkey"]
    assert info.foreign_keys[0].columns == ["customer_id"]

    [into] = info.referencing_foreign_keys
    assert into.table == TableRef("shipments", "app")
    assert into.columns == ["order_id"]
    assert into.definition == ("FOREIGN KEY (order_id) REFERENCES app.orders(id) ON DELETE CASCADE")

    assert info.triggers == ["orders_touch"]
    assert info.extra["trigger_definitions"]["orders_touch"] == (
        "CREATE TRIGGER orders_touch BEFORE INSERT ON app.orders FOR EACH ROW"
        " EXECUTE FUNCTION app.touch()"
    )
    assert info.reloptions == {"fillfactor": "80", "autovacuum_enabled": "false"}
    assert info.estimated_rows == 0 and info.extra["analyzed"] is False
    assert info.size_bytes > 0
    # the read left the session as it found it
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("SHOW search_path").fetchone()[0] == '"$user", public'


def test_describe_table_definitions_recreate_the_same_table(pg_db: TestDatabase, conn: Any) -> None:
    """Drop every index and constraint, replay the saved DDL, and read back the same table."""
    pg_db.query(RICH_TABLE_DDL)
    pg_db.query("INSERT INTO app.customers VALUES (1, 'a@example.com')")
    pg_db.query("INSERT INTO app.orders (customer_id, code, status) VALUES (1, 'X1', 'open')")
    pg_db.query("ANALYZE app.orders")
    table = TableRef("orders", "app")
    before = dialect.describe_table(conn, table)
    assert before.estimated_rows == 1 and before.extra["analyzed"] is True

    statements = [
        f'ALTER TABLE app.shipments DROP CONSTRAINT "{fk.name}"'
        for fk in before.referencing_foreign_keys
    ]
    statements += [
        f'ALTER TABLE app.orders DROP CONSTRAINT "{c.name}"'
        for c in before.constraints
        if c.kind in "pufc"
    ]
    statements += [
        f'DROP INDEX app."{ix.name}"' for ix in before.indexes if ix.constraint_name is None
    ]
    pg_db.query("; ".join(statements))
    stripped = dialect.describe_table(conn, table)
    assert stripped.indexes == [] and stripped.constraints == []

    # replay in a session whose search_path does not find schema app
    replay = [ix.definition for ix in before.indexes if ix.constraint_name is None]
    replay += [
        f'ALTER TABLE app.orders ADD CONSTRAINT "{c.name}" {c.definition}'
        for c in before.constraints
    ]
    replay += [
        f'ALTER TABLE app.shipments ADD CONSTRAINT "{fk.name}" {fk.definition}'
        for fk in before.referencing_foreign_keys
    ]
    pg_db.query("SET search_path = pg_catalog; " + "; ".join(replay))
    after = dialect.describe_table(conn, table)

    def shape(info: Any) -> Any:
        return (
            sorted(info.indexes, key=lambda ix: ix.name),
            sorted(info.constraints, key=lambda c: c.name),
            info.referencing_foreign_keys,
        )

    assert shape(after) == shape(before)


def test_describe_table_refuses_a_missing_table(conn: Any) -> None:
    with pytest.raises(TableNotFoundError, match=r"public\.nope"):
        dialect.describe_table(conn, TableRef("nope", "public"))


def test_a_missing_table_whose_name_differs_only_in_case_is_named(conn: Any) -> None:
    """A user who created ``"Events"`` and asks for ``events`` (names are not folded) is told."""
    conn.execute('CREATE TABLE "Events" (id int)')
    with pytest.raises(
        TableNotFoundError, match=r"not folded to lower case: did you mean .*Events"
    ):
        dialect.describe_table(conn, TableRef("events", "public"))
