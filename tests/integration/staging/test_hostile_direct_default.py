"""Hostile regression tests for ``direct="auto"``, the new default: PostgreSQL S3 CSV input is
loaded as stored. Each test states what the user did, what happened and what should happen;
a test that fails shows a break of the direct path that every PostgreSQL user now gets.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
from pathlib import Path
from typing import Any

import matplotlib
import pytest

from airflow_bulkload.exceptions import (
    BulkLoadError,
    ChunkLoadError,
    DuplicateKeyError,
    LoadModeError,
)
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import stage_checked

LOAD_ID = "nightly/notes/2026-11-21"


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def plan(
    db: TestDatabase, moto: MotoServer, bucket: str, table: str = "notes", **options: Any
) -> StageResult:
    """What the stage operator does by default on PostgreSQL now ("auto" resolves to True)."""
    return stage_checked(db, moto, bucket, table, **({"direct": True} | options))


def append(db: TestDatabase, staged: StageResult, table: str = "notes", **kw: Any) -> Any:
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile(table, staged.manifest_uri, load_id=LOAD_ID, **kw)
    for chunk in staged.manifest.chunks:
        hook.load_chunk(table, chunk, load_id=LOAD_ID)
    return hook.verify_load(table, staged.manifest_uri, load_id=LOAD_ID)


def rows(db: TestDatabase, table: str = "notes") -> list[tuple[Any, ...]]:
    return sorted(db.query(f"SELECT * FROM {table}"))


NOTES = "CREATE TABLE notes (id int PRIMARY KEY, note text, n int)"
ITEMS = "CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, n int)"
OLD_ITEMS = "INSERT INTO items SELECT g, 'old', g FROM generate_series(1, 10) g"


def items_csv(first: int, last: int, tag: str = "v1") -> bytes:
    return (
        "id,name,n\n" + "".join(f"{i},{tag}-{i},{i}\n" for i in range(first, last + 1))
    ).encode()


def load_mode(
    db: TestDatabase, staged: StageResult, mode: str, *, finalize: bool = True
) -> dict[str, Any]:
    """prepare, every load task, finalize and the report's check, as the pipeline runs them."""
    hook = LoadModesHook(conn_id=db.conn_id)
    hook.prepare_work_table("items", mode=mode, load_id=LOAD_ID, manifest=staged.manifest_uri)
    into = hook.load_table("items", mode)
    for chunk in staged.manifest.chunks:
        BulkLoadHook(conn_id=db.conn_id).load_chunk(into, chunk, load_id=LOAD_ID)
    if not finalize:
        return {}
    hook.finalize_work_table("items", mode=mode, load_id=LOAD_ID, manifest=staged.manifest_uri)
    return hook.verify_load("items", staged.manifest_uri, load_id=LOAD_ID, mode=mode)


def items(db: TestDatabase) -> dict[int, tuple[Any, ...]]:
    return {r[0]: tuple(r[1:]) for r in db.query("SELECT id, name, n FROM items")}


# ---------------------------------------------------------------------------------------------
# Breaks: CSV that COPY reads differently from staging, and that the direct reader lets through
# ---------------------------------------------------------------------------------------------


def test_an_inch_mark_at_the_end_of_a_value_never_merges_two_records(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a product export (the default path, append) whose unquoted
    names END in an inch mark: ``1,Monitor 27",2`` and ``2,Monitor 32",4``.

    What happened: the stray-quote guard only flags a quote that is neither after nor before a
    delimiter/line end; ``27",`` looks like a closing quote, so it passes. COPY opens a quoted
    part at the first quote and closes it at the second: records 1 and 2 became ONE row
    (1, 'Monitor 27,2\\n2,Monitor 32', 4). Row 2 is gone, the quote count was even, and
    verify_load reported the run verified (2 rows). Staged (direct=False) loads 3 rows.

    What should happen: the 3 rows load as staging loads them, or the chunk fails before
    commit naming line 2; two records are never silently merged into one.
    Cause: staging/direct.py ``_DirectReader._stray`` judges each quote by its neighbours
    only, not by whether the value it is in was opened by a quote.
    """
    pg_db.query(NOTES)
    put(
        moto_server,
        s3_bucket,
        "in/monitors.csv",
        b'id,note,n\n1,Monitor 27",2\n2,Monitor 32",4\n3,plain,6\n',
    )
    staged = plan(pg_db, moto_server, s3_bucket)
    try:
        append(pg_db, staged)
    except ChunkLoadError as exc:
        assert rows(pg_db) == []
        assert (exc.source, exc.line) == (f"s3://{s3_bucket}/in/monitors.csv", 2), exc
        assert "direct=False" in str(exc)
        return
    assert rows(pg_db) == [(1, 'Monitor 27"', 2), (2, 'Monitor 32"', 4), (3, "plain", 6)]


def test_a_doubled_quote_inside_an_unquoted_value_is_not_silently_dropped(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded (default path) values with a doubled quote inside an unquoted
    value, ``1,x"",2`` and ``2,ab""cd,4`` (e.g. a feet-and-inches column).

    What happened: the guard lets a quote next to another quote pass, and COPY reads ``""``
    inside an unquoted value as an empty quoted part: the rows loaded as 'x' and 'abcd', green.
    Python's csv module and the staged path read 'x""' and 'ab""cd'.

    What should happen: the values load as staging loads them, or the chunk fails before
    commit naming the line; never a silently changed value.
    Cause: staging/direct.py ``_DirectReader._stray`` (a quote preceded or followed by a quote
    is taken for an escape, even outside a quoted value).
    """
    pg_db.query(NOTES)
    put(moto_server, s3_bucket, "in/sizes.csv", b'id,note,n\n1,x"",2\n2,ab""cd,4\n3,plain,6\n')
    staged = plan(pg_db, moto_server, s3_bucket)
    try:
        append(pg_db, staged)
    except ChunkLoadError:
        assert rows(pg_db) == []
        return
    assert rows(pg_db) == [(1, 'x""', 2), (2, 'ab""cd', 4), (3, "plain", 6)]


def test_a_backslash_dot_value_does_not_end_the_load_early(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded (default path) a one-column list of tokens into a keyless
    table; one token is ``\\.`` (valid CSV: Python's csv module reads 5 records).

    What happened: COPY FROM STDIN in CSV mode takes an unquoted ``\\.`` alone on a line as
    its end-of-data marker (PostgreSQL < 18): the 2 records after it were silently dropped, the
    chunk committed 2 rows, the ledger and verify_load counted 2 and the run was green.

    What should happen: every record loads ('\\.' as text), or the chunk fails before commit
    naming line 4; never a green run with rows missing.
    Cause: staging/direct.py ``_DirectReader`` streams the object as is; a line ``\\.`` must be
    quoted (or refused) before COPY sees it, as the staged writer would have to.
    """
    pg_db.query("CREATE TABLE tokens (token text)")
    body = b"token\nalpha\nbeta\n\\.\ngamma\ndelta\n"
    put(moto_server, s3_bucket, "in/tokens.csv", body)
    expected = [r[0] for r in csv.reader(io.StringIO(body.decode()))][1:]
    staged = plan(pg_db, moto_server, s3_bucket, table="tokens")
    try:
        append(pg_db, staged, "tokens")
    except ChunkLoadError as exc:
        assert rows(pg_db, "tokens") == []
        assert exc.line == 4 and "\\. alone" in str(exc), exc
        return
    assert sorted(r[0] for r in rows(pg_db, "tokens")) == sorted(expected)


@pytest.mark.parametrize("mode", ["replace", "upsert"])
@pytest.mark.parametrize(
    "body",
    [
        b"id,name,n\n1,a,1\n\\.\n3,c,3\n4,d,4\n",
        b'id,name,n\n1,TV 27",1\n2,TV 32",2\n3,c,3\n',
    ],
    ids=["backslash-dot", "inch-mark"],
)
def test_replace_and_upsert_never_publish_a_misread_input(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, mode: str, body: bytes
) -> None:
    """What the user did: a nightly replace (or upsert) of ``items`` (10 old rows) from one
    CSV object, on the default path; the object holds either a line ``\\.`` or two names
    ending in an inch mark (``TV 27"``).

    What happened: COPY read fewer records than the object holds (it stopped at ``\\.``, or
    merged records 1 and 2); the work table's count equals its ledger's, so finalize published
    it. replace: the old 10 rows were dropped and the table swapped to 1-2 rows; with ``\\.``
    verify_load then failed, AFTER the swap (the docs promise a failed replace leaves the old
    table); with the inch mark it was green holding (1, 'TV 27,1\\n2,TV 32', 2). upsert: green,
    rows 3 and 4 (or 2) never merged.

    What should happen: a load task fails before commit naming the line, and the target keeps
    its rows; or every record of the input is merged / swapped in exactly as staging reads it.
    Cause: staging/direct.py ``_DirectReader`` (see the two tests above); load_modes.py's
    ``_check_complete`` can only compare with the ledger, which counts what COPY read.
    """
    pg_db.query(ITEMS)
    pg_db.query(OLD_ITEMS)
    before = items(pg_db)
    put(moto_server, s3_bucket, "in/items.csv", body)
    staged = plan(pg_db, moto_server, s3_bucket, table="items")
    truth = {
        int(r[0]): (r[1], int(r[2]))
        for r in csv.reader(io.StringIO(body.decode()))
        if r[0] != "id" and len(r) == 3
    }
    try:
        load_mode(pg_db, staged, mode)
    except BulkLoadError:
        LoadModesHook(conn_id=pg_db.conn_id).restore_work_table("items", mode=mode, load_id=LOAD_ID)
        assert items(pg_db) == before
        return
    expected = truth if mode == "replace" else before | truth
    assert items(pg_db) == expected


# ---------------------------------------------------------------------------------------------
# Regression tests that pass: the modes, the ledger and odd CSV over direct chunks
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["replace", "upsert"])
def test_empty_and_header_only_objects_among_full_ones_load_and_rerun_exactly(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, mode: str
) -> None:
    """What the user did: a replace / upsert from a prefix holding two full objects, a
    zero-byte object and a header-only one (a shard with no rows), then ran it again.

    What should happen (and does): the zero-byte object is no chunk, the header-only one a
    chunk of 0 rows; the table is exactly the input (replace) or old rows merged with it
    (upsert), and the re-run with the same input leaves it as it is.
    """
    pg_db.query(ITEMS)
    pg_db.query(OLD_ITEMS)
    put(moto_server, s3_bucket, "in/a.csv", items_csv(5, 20))
    put(moto_server, s3_bucket, "in/b.csv", b"")
    put(moto_server, s3_bucket, "in/c.csv", b"id,name,n\n")
    put(moto_server, s3_bucket, "in/d.csv", items_csv(21, 30))
    new = {i: (f"v1-{i}", i) for i in range(5, 31)}
    expected = new if mode == "replace" else {i: ("old", i) for i in range(1, 5)} | new
    for _ in range(2):
        staged = plan(pg_db, moto_server, s3_bucket, table="items")
        assert len(staged.manifest.chunks) == 3
        assert load_mode(pg_db, staged, mode)["verified"]
        assert items(pg_db) == expected


@pytest.mark.parametrize("mode", ["replace", "upsert"])
def test_a_key_in_two_objects_is_refused_and_the_target_kept(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, mode: str
) -> None:
    """What the user did: a replace / upsert whose two objects both hold id 20.

    What should happen (and does): finalize refuses (the key rebuild for replace, the
    duplicate check for upsert) and the target keeps its 10 old rows.
    """
    pg_db.query(ITEMS)
    pg_db.query(OLD_ITEMS)
    before = items(pg_db)
    put(moto_server, s3_bucket, "in/a.csv", items_csv(5, 20))
    put(moto_server, s3_bucket, "in/b.csv", items_csv(20, 25, "v2"))
    staged = plan(pg_db, moto_server, s3_bucket, table="items")
    with pytest.raises((DuplicateKeyError, LoadModeError), match=r"\(id\)=\(20\)"):
        load_mode(pg_db, staged, mode)
    LoadModesHook(conn_id=pg_db.conn_id).restore_work_table("items", mode=mode, load_id=LOAD_ID)
    assert items(pg_db) == before


@pytest.mark.parametrize("mode", ["replace", "upsert"])
def test_objects_rewritten_after_a_killed_run_load_exactly_once(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, mode: str
) -> None:
    """What the user did: a replace / upsert whose object b.csv held a bad value; a.csv loaded
    into the work table, b.csv failed, the worker was killed (no teardown). Both objects were
    re-uploaded with other rows (unversioned bucket) and the run cleared.

    What should happen (and does): the re-run's work table is rebuilt for the new input and
    the target holds exactly the new rows (replace) or the old ones merged with them (upsert).
    """
    pg_db.query(ITEMS)
    pg_db.query(OLD_ITEMS)
    put(moto_server, s3_bucket, "in/a.csv", items_csv(5, 20))
    put(moto_server, s3_bucket, "in/b.csv", items_csv(21, 25) + b"26,x,notanint\n")
    with pytest.raises(ChunkLoadError, match=r"b\.csv, line 7, column n"):
        load_mode(pg_db, plan(pg_db, moto_server, s3_bucket, table="items"), mode, finalize=False)
    put(moto_server, s3_bucket, "in/a.csv", items_csv(5, 19, "v2"))
    put(moto_server, s3_bucket, "in/b.csv", items_csv(21, 26, "v2"))
    assert load_mode(pg_db, plan(pg_db, moto_server, s3_bucket, table="items"), mode)["verified"]
    new = {i: (f"v2-{i}", i) for i in [*range(5, 20), *range(21, 27)]}
    expected = new if mode == "replace" else {i: ("old", i) for i in range(1, 5)} | new
    assert items(pg_db) == expected


def test_a_fixed_object_after_a_failed_append_loads_each_row_once(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: an append of a.csv and b.csv; a.csv committed, b.csv failed on a bad
    value; the user re-uploaded b.csv only (unversioned bucket) and re-ran.

    What should happen (and does): the first attempt's a.csv chunk is withdrawn (its bytes
    are unchanged) and the corrected input loads once: 26 rows, verified.
    """
    pg_db.query(ITEMS)
    put(moto_server, s3_bucket, "in/a.csv", items_csv(1, 20))
    put(moto_server, s3_bucket, "in/b.csv", items_csv(21, 25) + b"26,x,notanint\n")
    with pytest.raises(ChunkLoadError, match=r"b\.csv, line 7"):
        append(pg_db, plan(pg_db, moto_server, s3_bucket, table="items"), "items")
    put(moto_server, s3_bucket, "in/b.csv", items_csv(21, 26, "v2"))
    assert append(pg_db, plan(pg_db, moto_server, s3_bucket, table="items"), "items")["verified"]
    assert sorted(items(pg_db)) == list(range(1, 27))
    assert pg_db.query("SELECT count(*) FROM items")[0][0] == 26


def test_gzip_members_and_names_that_lie_load_by_their_bytes(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded a ``cat``-ed gzip of three members (the header line itself
    split across the first two), a gzip object named ``.csv`` and a plain one named ``.gz``.

    What should happen (and does): every object is read by its bytes, all 5 rows load.
    """
    pg_db.query(NOTES)
    members = [b"id,no", b"te,n\n1,a,1\n", b"2,b,2\n3,c,3\n"]
    put(moto_server, s3_bucket, "in/a.csv.gz", b"".join(gzip.compress(m) for m in members))
    put(moto_server, s3_bucket, "in/b.csv", gzip.compress(b"id,note,n\n4,d,4\n"))
    put(moto_server, s3_bucket, "in/c.gz", b"id,note,n\n5,e,5")
    staged = plan(pg_db, moto_server, s3_bucket)
    assert all(c.is_direct for c in staged.manifest.chunks)
    assert append(pg_db, staged)["verified"]
    assert rows(pg_db) == [(1, "a", 1), (2, "b", 2), (3, "c", 3), (4, "d", 4), (5, "e", 5)]


def test_generated_identity_and_default_columns_with_a_columns_subset(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded ``columns=["id", "note", "n"]`` (a header in another case)
    into a table with a default, a stored generated column and an identity column.

    What should happen (and does): the columns load by position, the others are computed.
    """
    pg_db.query(
        "CREATE TABLE notes (id int PRIMARY KEY, note text, n int, at date DEFAULT '2026-01-01',"
        " twice int GENERATED ALWAYS AS (n * 2) STORED, seq int GENERATED ALWAYS AS IDENTITY)"
    )
    put(moto_server, s3_bucket, "in/a.csv", b'ID,Note,N\r\n1,a,2\r\n2,,3\r\n3,"",4\r\n')
    staged = plan(pg_db, moto_server, s3_bucket, columns=["id", "note", "n"])
    assert staged.manifest.chunks[0].is_direct
    assert append(pg_db, staged)["verified"]
    assert pg_db.query("SELECT id, note, n, at::text, twice FROM notes ORDER BY id") == [
        (1, "a", 2, "2026-01-01", 4),
        (2, None, 3, "2026-01-01", 6),
        (3, "", 4, "2026-01-01", 8),
    ]


def test_a_partitioned_table_loads_and_reruns_exactly(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: appended two objects (columns in other orders) into a partitioned
    table, then re-ran the same input.

    What should happen (and does): the rows route to their partitions once; the re-run skips.
    """
    pg_db.query(
        "CREATE TABLE notes (id int, note text, n int, PRIMARY KEY (id, n)) PARTITION BY RANGE (n)"
    )
    pg_db.query("CREATE TABLE notes_lo PARTITION OF notes FOR VALUES FROM (0) TO (100)")
    pg_db.query("CREATE TABLE notes_hi PARTITION OF notes FOR VALUES FROM (100) TO (1000)")
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,2\n2,b,300\n")
    put(moto_server, s3_bucket, "in/b.csv", b"n,note,id\n5,c,3\n500,d,4\n")
    expected = [(1, "a", 2), (2, "b", 300), (3, "c", 5), (4, "d", 500)]
    for _ in range(2):
        assert append(pg_db, plan(pg_db, moto_server, s3_bucket))["verified"]
        assert rows(pg_db) == expected
    assert pg_db.query("SELECT count(*) FROM notes_hi")[0][0] == 2


def test_a_dry_run_of_direct_chunks_counts_rows_names_the_line_and_keeps_nothing(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: dry_run=True over direct input, one object with a bad value.

    What should happen (and does): the good object counts its 2 rows, the bad one fails
    naming its object, line 2 and column; nothing is in the table.
    """
    pg_db.query(NOTES)
    put(moto_server, s3_bucket, "in/a.csv", b"id,note,n\n1,a,2\n2,b,3\n")
    put(moto_server, s3_bucket, "in/b.csv", b"id,note,n\n3,a,x\n")
    staged = plan(pg_db, moto_server, s3_bucket)
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    assert hook.try_chunk("notes", staged.manifest.chunks[0]).rows == 2
    with pytest.raises(ChunkLoadError, match=r"b\.csv, line 2, column n"):
        hook.try_chunk("notes", staged.manifest.chunks[1])
    assert rows(pg_db) == []


def test_a_real_dataset_loads_as_python_csv_reads_it(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What the user did: loaded matplotlib's sample ``msft.csv`` (real prices, a header with
    ``Adj. Close*``, no final line end) on the default path.

    What should happen (and does): the table's rows and their checksum equal what Python's
    csv module reads from the file.
    """
    data = (Path(matplotlib.get_data_path()) / "sample_data" / "msft.csv").read_bytes()
    header, *records = list(csv.reader(io.StringIO(data.decode())))
    columns = ", ".join(f'"{c}" text' for c in header)
    pg_db.query(f'CREATE TABLE msft ({columns}, PRIMARY KEY ("Date"))')
    put(moto_server, s3_bucket, "in/msft.csv", data)
    staged = plan(pg_db, moto_server, s3_bucket, table="msft")
    assert staged.manifest.chunks[0].is_direct
    assert append(pg_db, staged, "msft")["verified"]
    loaded = pg_db.query(f"SELECT {', '.join(chr(34) + c + chr(34) for c in header)} FROM msft")

    def digest(found: list[Any]) -> str:
        return hashlib.sha256(repr(sorted(tuple(r) for r in found)).encode()).hexdigest()

    assert len(loaded) == len(records) == 65
    assert digest(loaded) == digest(records)
