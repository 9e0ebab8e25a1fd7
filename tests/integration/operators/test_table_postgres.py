"""Prepare / finalize / restore on the real PostgreSQL server: the table comes back identical."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from airflow_bulkload.exceptions import DuplicateKeyError, TableClaimedError
from airflow_bulkload.hooks import BulkLoadHook, TableStateHook
from tests.harness import REPO_ROOT, MotoServer, TestDatabase, put_chunk

SCHEMA = """
CREATE TABLE customers (id int PRIMARY KEY, email text);
CREATE TABLE orders (
    id bigint,
    customer_id int,
    code text NOT NULL,
    status text,
    amount numeric(12, 2),
    created timestamptz,
    note text,
    CONSTRAINT orders_pk PRIMARY KEY (id),
    CONSTRAINT orders_code_status_uq UNIQUE (code, status) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT orders_customer_fk FOREIGN KEY (customer_id) REFERENCES customers (id)
        ON DELETE CASCADE
) WITH (fillfactor = 90, autovacuum_vacuum_scale_factor = 0.05);
CREATE UNIQUE INDEX orders_code_key ON orders (code);
CREATE INDEX orders_open_idx ON orders (created) WHERE status = 'open';
CREATE INDEX orders_lower_note_idx ON orders (lower(note));
CREATE INDEX orders_cust_created_desc ON orders (customer_id DESC, created DESC NULLS LAST)
    INCLUDE (amount) WITH (fillfactor = 80);
CREATE INDEX orders_note_c ON orders (note COLLATE "C" text_pattern_ops);
CREATE INDEX orders_status_hash ON orders USING hash (status);
CREATE TABLE refunds (id int PRIMARY KEY, order_id bigint,
    CONSTRAINT refunds_order_fk FOREIGN KEY (order_id) REFERENCES orders (id));
INSERT INTO customers SELECT g, 'c' || g || '@x' FROM generate_series(1, 50) g;
"""


def insert_orders(db: TestDatabase, start: int, count: int) -> None:
    db.query(
        "INSERT INTO orders SELECT g, 1 + g %% 50, 'code-' || g,"
        " CASE WHEN g %% 3 = 0 THEN 'open' ELSE 'closed' END, g * 1.5,"
        " '2025-01-01'::timestamptz + g * interval '1 minute', 'Note ' || g"
        " FROM generate_series(%s::int, %s::int) g",
        (start, start + count - 1),
    )


def catalog(db: TestDatabase) -> dict[str, Any]:
    """Everything prepare may touch, as the catalog prints it."""
    return {
        "indexes": db.query(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid), indisvalid"
            " FROM pg_index WHERE indrelid = 'orders'::regclass ORDER BY 1"
        ),
        "constraints": db.query(
            "SELECT conrelid::regclass::text, conname, contype, pg_get_constraintdef(oid),"
            " convalidated, condeferrable, condeferred FROM pg_constraint"
            " WHERE conrelid = 'orders'::regclass OR confrelid = 'orders'::regclass ORDER BY 1, 2"
        ),
        "reloptions": db.query("SELECT reloptions FROM pg_class WHERE oid = 'orders'::regclass"),
    }


@pytest.fixture
def orders(pg_db: TestDatabase) -> dict[str, Any]:
    pg_db.query(SCHEMA)
    insert_orders(pg_db, 1, 100)
    return catalog(pg_db)


def state(db: TestDatabase) -> list[tuple[Any, ...]]:
    return db.query("SELECT load_id, status FROM bulkload.table_state ORDER BY 1")


def claims(db: TestDatabase) -> list[tuple[Any, ...]]:
    return db.query("SELECT table_name, load_id FROM bulkload.table_claims")


def test_prepare_load_finalize_gives_the_same_catalog(
    pg_db: TestDatabase, orders: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    # the table holds rows: its keys go only because the author asks
    prepared = hook.prepare(
        "orders", load_id="L1", incoming_bytes=10**9, drop_primary_key=True, drop_foreign_keys=True
    )

    assert prepared["decision"]["drop_indexes"] and prepared["decision"]["drop_primary_key"]
    assert pg_db.query("SELECT count(*) FROM pg_index WHERE indrelid = 'orders'::regclass") == [
        (0,)
    ]
    assert pg_db.query(
        "SELECT count(*) FROM pg_constraint WHERE contype = 'f'"
        " AND (conrelid = 'orders'::regclass OR confrelid = 'orders'::regclass)"
    ) == [(0,)]
    assert "autovacuum_enabled=false" in catalog(pg_db)["reloptions"][0][0]
    assert claims(pg_db) == [("public.orders", "L1")]
    assert len(prepared["dropped"]) == 10  # 8 indexes + 2 foreign keys

    insert_orders(pg_db, 101, 5000)
    result = hook.finalize("orders", load_id="L1", parallelism=3)

    assert catalog(pg_db) == orders
    assert set(result["seconds"]) >= {"index orders_pk", "constraint orders_pk"}
    assert "foreign key refunds.refunds_order_fk" in result["seconds"]
    assert state(pg_db) == [("L1", "done")]
    assert claims(pg_db) == []
    assert pg_db.query("SELECT count(*) FROM orders") == [(5100,)]
    # restore after a successful finalize changes nothing
    assert hook.restore("orders", load_id="L1")["status"] == "already done"
    assert catalog(pg_db) == orders


def test_auto_keeps_everything_when_the_input_is_small_for_a_big_table(pg_db: TestDatabase) -> None:
    pg_db.query("CREATE TABLE big (id int PRIMARY KEY, pad text)")
    pg_db.query("CREATE INDEX big_pad ON big (pad)")
    pg_db.query("INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 80000) g")
    before = pg_db.query(
        "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'big'::regclass ORDER BY 1"
    )
    prepared = TableStateHook(conn_id=pg_db.conn_id).prepare(
        "big", load_id="L", incoming_bytes=1000
    )
    assert prepared["dropped"] == []
    assert not prepared["decision"]["drop_indexes"]
    assert "only" in prepared["decision"]["reasons"]["drop_indexes"]
    assert (
        pg_db.query(
            "SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = 'big'::regclass ORDER BY 1"
        )
        == before
    )


def run_child(db: TestDatabase, action: str, kill_after: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "tests.integration.operators.table_child",
            db.conn_id,
            "orders",
            "K",
            action,
            str(kill_after),
        ],
        cwd=REPO_ROOT,
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_kill_9_mid_prepare_then_rerun_prepare_and_finalize(
    pg_db: TestDatabase, orders: dict[str, Any]
) -> None:
    child = run_child(pg_db, "prepare", 4)
    assert child.returncode == -9, child.stderr
    assert state(pg_db) == [("K", "saved")]
    left = pg_db.query("SELECT count(*) FROM pg_index WHERE indrelid = 'orders'::regclass")[0][0]
    assert 0 < left < 8  # some dropped, some not

    hook = TableStateHook(conn_id=pg_db.conn_id)
    again = hook.prepare(
        "orders", load_id="K", drop_indexes=True, drop_primary_key=True, drop_foreign_keys=True
    )
    assert again["resumed"]
    assert len(again["dropped"]) == 10
    insert_orders(pg_db, 101, 1000)
    hook.finalize("orders", load_id="K")
    assert catalog(pg_db) == orders


def test_kill_9_mid_finalize_then_finalize_again(
    pg_db: TestDatabase, orders: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare(
        "orders", load_id="K", drop_indexes=True, drop_primary_key=True, drop_foreign_keys=True
    )
    insert_orders(pg_db, 101, 3000)
    child = run_child(pg_db, "finalize", 3)  # the PK's index and two more built, then killed
    assert child.returncode == -9, child.stderr
    indexes = pg_db.query("SELECT count(*) FROM pg_index WHERE indrelid = 'orders'::regclass")
    assert indexes == [(3,)]
    assert state(pg_db) == [("K", "prepared")]

    result = hook.finalize("orders", load_id="K")
    assert "index orders_pk" not in result["seconds"]  # already built: only attached
    assert "constraint orders_pk" in result["seconds"]
    assert catalog(pg_db) == orders


def test_restore_after_a_failed_load(
    pg_db: TestDatabase, orders: dict[str, Any], moto_server: MotoServer, s3_bucket: str
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("orders", load_id="R", drop_indexes=True, drop_primary_key=True)
    good = put_chunk(
        moto_server, s3_bucket, "c0.csv.gz", b"1001,1,g1,open,1,,a\n1002,2,g2,open,2,,b\n", rows=2
    )
    bad = put_chunk(moto_server, s3_bucket, "c1.csv.gz", b"2001,1,b1,open,1,,x\n2002,oops\n")
    loader = BulkLoadHook(conn_id=pg_db.conn_id)
    loader.load_chunk("public.orders", good, load_id="R")
    with pytest.raises(Exception, match=r"c1\.csv\.gz"):
        loader.load_chunk("public.orders", bad, load_id="R")

    restored = hook.restore("orders", load_id="R")
    assert restored["status"] == "restored"
    assert catalog(pg_db) == orders
    assert pg_db.query("SELECT count(*) FROM orders WHERE id >= 2001") == [(0,)]
    assert pg_db.query("SELECT count(*) FROM orders") == [(102,)]
    assert hook.restore("orders", load_id="R")["status"] == "already done"
    assert catalog(pg_db) == orders


def test_restore_without_prepare_does_nothing(pg_db: TestDatabase, orders: dict[str, Any]) -> None:
    assert TableStateHook(conn_id=pg_db.conn_id).restore("orders", load_id="N")["status"] == (
        "nothing saved"
    )
    assert catalog(pg_db) == orders


def test_duplicate_keys_fail_finalize_with_a_sample_and_keep_the_state(
    pg_db: TestDatabase, orders: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("orders", load_id="D", drop_indexes=True, drop_primary_key=True)
    pg_db.query("INSERT INTO orders VALUES (5000, 1, 'code-7', 'closed', 1, now(), 'dup')")
    with pytest.raises(DuplicateKeyError, match="code-7") as failure:
        hook.finalize("orders", load_id="D")
    assert failure.value.index == "orders_code_key"
    assert state(pg_db) == [("D", "prepared")]
    assert claims(pg_db) == [("public.orders", "D")]

    pg_db.query("DELETE FROM orders WHERE id = 5000")
    hook.finalize("orders", load_id="D")
    assert catalog(pg_db) == orders


def test_a_second_load_of_the_table_fails_naming_the_holder(
    pg_db: TestDatabase, orders: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("orders", load_id="first", drop_indexes=False)
    with pytest.raises(TableClaimedError, match="load first"):
        hook.prepare("orders", load_id="second", claim_timeout=0.5, claim_poll_interval=0.1)
    hook.prepare("orders", load_id="first", drop_indexes=False)  # its own re-run re-claims
    hook.finalize("orders", load_id="first")
    assert hook.prepare("orders", load_id="second", drop_indexes=False)["load_id"] == "second"
    hook.finalize("orders", load_id="second")
    assert catalog(pg_db) == orders


def test_checkpoint(pg_db: TestDatabase) -> None:
    assert TableStateHook(conn_id=pg_db.conn_id).checkpoint() == "CHECKPOINT"
