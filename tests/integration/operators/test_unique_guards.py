"""Unique keys are guards: kept on a table that holds rows, dropped only on an empty one, and a
run whose own rows break a key it dropped leaves the table as it was before the run."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError, DuplicateKeyError
from airflow_bulkload.hooks import BulkLoadHook, TableStateHook
from tests.harness import MotoServer, TestDatabase, put_chunk


def catalog(db: TestDatabase) -> list[tuple[Any, ...]]:
    if db.engine == "postgres":
        return db.query(
            "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid) FROM pg_index"
            " WHERE indrelid = 'notes'::regclass ORDER BY 1"
        ) + db.query("SELECT reloptions::text FROM pg_class WHERE oid = 'notes'::regclass")
    return db.query(
        "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'notes' ORDER BY 1, 2"
    )


def claims(db: TestDatabase) -> list[tuple[Any, ...]]:
    table = "bulkload.table_claims" if db.engine == "postgres" else "bulkload_table_claims"
    return db.query(f"SELECT load_id FROM {table}")


@pytest.fixture
def notes(any_db: TestDatabase) -> TestDatabase:
    text = "text" if any_db.engine == "postgres" else "VARCHAR(100)"
    any_db.query(f"CREATE TABLE notes (id int PRIMARY KEY, code {text} NOT NULL, note {text})")
    any_db.query("CREATE UNIQUE INDEX notes_code ON notes (code)")
    any_db.query("CREATE INDEX notes_note ON notes (note)")
    return any_db


def chunk(moto: MotoServer, bucket: str, name: str, first: int, last: int) -> dict[str, Any]:
    body = "".join(f"{i},code-{i},note {i}\n" for i in range(first, last + 1)).encode()
    return put_chunk(
        moto, bucket, name, body, rows=last - first + 1, columns=["id", "code", "note"]
    )


def test_a_redelivered_file_fails_and_the_table_stays_as_it_was(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Date A loaded rows 1..200; the same file arrives again under date B, with an input large
    against the table: the keys stay, the chunk fails on the duplicate, restore puts back the
    rest, the claim is released, the rows are A's, once."""
    loader = BulkLoadHook(conn_id=notes.conn_id)
    loader.load_chunk("notes", chunk(moto_server, s3_bucket, "a/c0.csv.gz", 1, 200))
    before = catalog(notes)
    hook = TableStateHook(conn_id=notes.conn_id)

    prepared = hook.prepare("notes", load_id="B", incoming_bytes=10**9)
    assert prepared["decision"]["drop_indexes"]  # secondary indexes go: the input is large
    assert not prepared["decision"]["drop_primary_key"]
    assert not prepared["decision"]["drop_unique"]
    with pytest.raises(Exception, match=r"(?i)duplicate"):
        loader.load_chunk("notes", chunk(moto_server, s3_bucket, "b/c0.csv.gz", 1, 200))
    hook.restore("notes", load_id="B")

    assert catalog(notes) == before
    assert claims(notes) == []
    assert notes.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(200, 200)]


def test_duplicates_inside_the_input_of_an_empty_table_leave_it_empty_again(
    notes: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    before = catalog(notes)
    hook = TableStateHook(conn_id=notes.conn_id)
    prepared = hook.prepare("notes", load_id="E", incoming_bytes=10**6)
    assert prepared["decision"]["table_empty"]
    assert prepared["decision"]["drop_unique"]
    loader = BulkLoadHook(conn_id=notes.conn_id)
    loader.load_chunk("notes", chunk(moto_server, s3_bucket, "e/c0.csv.gz", 1, 100), load_id="E")
    # the second chunk repeats rows 91..100 of the first
    repeated = chunk(moto_server, s3_bucket, "e/c1.csv.gz", 91, 150)
    if notes.engine == "mysql":  # InnoDB keeps its clustered primary key: the chunk fails
        with pytest.raises(ChunkLoadError, match="Duplicate entry '91'"):
            loader.load_chunk("notes", repeated, load_id="E")
        hook.restore("notes", load_id="E")
        assert catalog(notes) == before
        assert notes.query("SELECT count(*) FROM notes") == [(100,)]
        return
    loader.load_chunk("notes", repeated, load_id="E")  # nothing rejects them: keys dropped

    with pytest.raises(DuplicateKeyError, match=r"notes_pkey|notes_code"):
        hook.finalize("notes", load_id="E")
    hook.restore("notes", load_id="E")

    assert catalog(notes) == before
    assert claims(notes) == []
    assert notes.query("SELECT count(*) FROM notes") == [(0,)]


def test_rows_from_elsewhere_are_never_emptied_away(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Another writer inserted while the keys were dropped: restore refuses to empty the table
    and leaves the state for a person, naming the key."""
    pg_db.query("CREATE TABLE notes (id int PRIMARY KEY, code text NOT NULL, note text)")
    hook = TableStateHook(conn_id=pg_db.conn_id)
    hook.prepare("notes", load_id="W", incoming_bytes=10**6)
    BulkLoadHook(conn_id=pg_db.conn_id).load_chunk(
        "notes", chunk(moto_server, s3_bucket, "w/c0.csv.gz", 1, 50), load_id="W"
    )
    pg_db.query("INSERT INTO notes VALUES (7, 'someone else', 'x')")

    with pytest.raises(DuplicateKeyError, match="notes_pkey"):
        hook.restore("notes", load_id="W")
    assert pg_db.query("SELECT count(*) FROM notes") == [(51,)]


def test_explicit_drop_indexes_false_keeps_every_index_on_an_empty_table(
    notes: TestDatabase,
) -> None:
    """Pre-flight would drop everything on an empty table with a large input; the author said
    no, and that is what runs."""
    before = catalog(notes)
    prepared = TableStateHook(conn_id=notes.conn_id).prepare(
        "notes", load_id="X", drop_indexes=False, incoming_bytes=10**10
    )
    assert prepared["dropped"] == []
    assert (
        catalog(notes)[: len(before) - (1 if notes.engine == "postgres" else 0)]
        == before[: len(before) - (1 if notes.engine == "postgres" else 0)]
    )


def test_a_claim_held_by_another_load_fails_the_claim_step_before_anything_changes(
    notes: TestDatabase,
) -> None:
    from airflow_bulkload.exceptions import TableClaimedError
    from airflow_bulkload.operators.claim import ClaimTableOperator

    before = catalog(notes)
    hook = TableStateHook(conn_id=notes.conn_id)
    hook.claim("notes", load_id="crashed-load")
    step = ClaimTableOperator(
        task_id="claim_table", table="notes", conn_id=notes.conn_id, load_id="tonight"
    )
    with pytest.raises(TableClaimedError, match="crashed-load"):
        step.execute({})
    assert catalog(notes) == before
    hook.restore("notes", load_id="crashed-load")  # its teardown, or a person, releases it
    assert step.execute({})["load_id"] == "tonight"
    assert hook.prepare("notes", load_id="tonight", drop_indexes=False)["load_id"] == "tonight"
    hook.finalize("notes", load_id="tonight")
    assert claims(notes) == []


def test_index_and_constraint_comments_survive_the_drop_and_rebuild(
    notes: TestDatabase,
) -> None:
    if notes.engine == "postgres":
        notes.query("COMMENT ON INDEX notes_note IS 'for the search page'")
        notes.query("COMMENT ON INDEX notes_code IS 'one row per code'")
        notes.query("COMMENT ON CONSTRAINT notes_pkey ON notes IS 'the row id'")
        comments = (
            "SELECT c.relname, obj_description(c.oid, 'pg_class') FROM pg_index i"
            " JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'notes'::regclass"
            " UNION ALL SELECT conname, obj_description(oid, 'pg_constraint') FROM pg_constraint"
            " WHERE conrelid = 'notes'::regclass ORDER BY 1"
        )
    else:
        notes.query(
            "ALTER TABLE notes DROP INDEX notes_note, ADD INDEX notes_note (note) COMMENT 'for the search page'"
        )
        comments = (
            "SELECT INDEX_NAME, INDEX_COMMENT FROM information_schema.STATISTICS"
            " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'notes' ORDER BY 1"
        )
    before = notes.query(comments)
    hook = TableStateHook(conn_id=notes.conn_id)
    kwargs = {"drop_primary_key": True} if notes.engine == "postgres" else {}
    hook.prepare("notes", load_id="C", drop_indexes=True, drop_unique_indexes=True, **kwargs)
    assert notes.query(comments) != before
    hook.finalize("notes", load_id="C")
    assert notes.query(comments) == before
