"""Prepare / finalize / restore on the real MariaDB server: the key definitions come back exact."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.exceptions import DuplicateKeyError, TableClaimedError
from airflow_bulkload.hooks import TableStateHook
from tests.harness import TestDatabase

SCHEMA = [
    "CREATE TABLE parents (id INT PRIMARY KEY, name VARCHAR(50)) ENGINE=InnoDB",
    """CREATE TABLE items (
        id BIGINT NOT NULL,
        parent_id INT,
        sku VARCHAR(40) NOT NULL,
        title VARCHAR(200),
        body TEXT,
        price DECIMAL(10, 2),
        PRIMARY KEY (id),
        UNIQUE KEY items_sku (sku),
        KEY items_title_prefix (title(10)),
        KEY items_multi (price, title(20), id) COMMENT 'multi-column',
        KEY items_parent (parent_id),
        FULLTEXT KEY items_body_ft (body),
        CONSTRAINT items_parent_fk FOREIGN KEY (parent_id) REFERENCES parents (id)
            ON DELETE CASCADE
    ) ENGINE=InnoDB""",
    """CREATE TABLE notes (id INT PRIMARY KEY, item_id BIGINT,
        CONSTRAINT notes_item_fk FOREIGN KEY (item_id) REFERENCES items (id)) ENGINE=InnoDB""",
    "INSERT INTO parents VALUES (1, 'a'), (2, 'b')",
]


def insert_items(db: TestDatabase, start: int, count: int) -> None:
    rows = [
        (i, 1 + i % 2, f"sku-{i}", f"Title number {i}", f"body text {i}", i * 1.5)
        for i in range(start, start + count)
    ]
    import contextlib

    with contextlib.closing(db.connect()) as conn:
        conn.cursor().executemany("INSERT INTO items VALUES (%s, %s, %s, %s, %s, %s)", rows)


def catalog(db: TestDatabase) -> dict[str, Any]:
    return {
        # every line of SHOW CREATE TABLE (columns, keys, constraints), in any order: a rebuilt
        # key is listed after the ones that stayed, which changes no definition
        "create": sorted(
            line.strip().rstrip(",")
            for line in db.query("SHOW CREATE TABLE items")[0][1].splitlines()
        ),
        "notes": sorted(
            line.strip().rstrip(",")
            for line in db.query("SHOW CREATE TABLE notes")[0][1].splitlines()
        ),
        "statistics": db.query(
            "SELECT INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, SUB_PART, NON_UNIQUE, INDEX_TYPE "
            "FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() "
            "AND TABLE_NAME = 'items' ORDER BY 1, 2"
        ),
        "foreign_keys": db.query(
            "SELECT CONSTRAINT_NAME, TABLE_NAME, REFERENCED_TABLE_NAME, DELETE_RULE "
            "FROM information_schema.REFERENTIAL_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = DATABASE() ORDER BY 1"
        ),
    }


@pytest.fixture
def items(mysql_db: TestDatabase) -> dict[str, Any]:
    for statement in SCHEMA:
        mysql_db.query(statement)
    insert_items(mysql_db, 1, 50)
    return catalog(mysql_db)


def keys(db: TestDatabase) -> set[str]:
    return {
        r[0]
        for r in db.query(
            "SELECT DISTINCT INDEX_NAME FROM information_schema.STATISTICS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'items'"
        )
    }


def test_auto_keeps_fks_and_the_indexes_they_need(
    mysql_db: TestDatabase, items: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=mysql_db.conn_id)
    prepared = hook.prepare("items", load_id="M1", incoming_bytes=10**9, drop_unique_indexes=True)
    assert not prepared["decision"]["drop_primary_key"]
    assert not prepared["decision"]["drop_foreign_keys"]
    assert keys(mysql_db) == {"PRIMARY", "items_parent"}  # the FK's index stays
    insert_items(mysql_db, 1000, 2000)
    result = hook.finalize("items", load_id="M1")
    assert catalog(mysql_db) == items
    assert "index items_sku" in result["seconds"]
    assert mysql_db.query("SELECT `status` FROM bulkload_table_state") == [("done",)]
    assert mysql_db.query("SELECT COUNT(*) FROM bulkload_table_claims") == [(0,)]


def test_forced_foreign_key_drop_and_restore_twice(
    mysql_db: TestDatabase, items: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=mysql_db.conn_id)
    prepared = hook.prepare(
        "items", load_id="M2", drop_indexes="True", drop_foreign_keys=True, drop_unique_indexes=True
    )
    assert keys(mysql_db) == {"PRIMARY"}
    assert mysql_db.query(
        "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS "
        "WHERE CONSTRAINT_SCHEMA = DATABASE()"
    ) == [(0,)]
    assert len(prepared["dropped"]) == 7
    # a re-run of prepare continues; it does not capture the stripped table
    assert hook.prepare("items", load_id="M2", drop_indexes=True)["resumed"]
    assert hook.restore("items", load_id="M2")["status"] == "restored"
    assert catalog(mysql_db) == items
    assert hook.restore("items", load_id="M2")["status"] == "already done"
    assert catalog(mysql_db) == items


def test_duplicates_fail_finalize_and_keep_the_state(
    mysql_db: TestDatabase, items: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=mysql_db.conn_id)
    hook.prepare("items", load_id="D", drop_indexes=True, drop_unique_indexes=True)
    mysql_db.query("INSERT INTO items VALUES (9999, 1, 'sku-7', 't', 'b', 1)")
    with pytest.raises(DuplicateKeyError, match="sku-7") as failure:
        hook.finalize("items", load_id="D")
    assert failure.value.index == "items_sku"
    assert mysql_db.query("SELECT `status` FROM bulkload_table_state") == [("prepared",)]
    mysql_db.query("DELETE FROM items WHERE id = 9999")
    hook.finalize("items", load_id="D")
    assert catalog(mysql_db) == items


def test_primary_key_drop_is_refused_and_claims_name_the_holder(
    mysql_db: TestDatabase, items: dict[str, Any]
) -> None:
    hook = TableStateHook(conn_id=mysql_db.conn_id)
    with pytest.raises(ValueError, match="clustered"):
        hook.prepare("items", load_id="P", drop_primary_key=True)
    hook.restore("items", load_id="P")  # releases the claim the refused prepare took
    hook.prepare("items", load_id="A", drop_indexes=False)
    with pytest.raises(TableClaimedError, match="load A"):
        hook.prepare("items", load_id="B")
    hook.finalize("items", load_id="A")
    assert catalog(mysql_db) == items
    assert hook.checkpoint().startswith("no-op")
