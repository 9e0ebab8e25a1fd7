"""Hostile regression tests: where the header line is, and where a bad value's error points.

Each test says what the user did, what happened before the fix and what should happen.
"""

from __future__ import annotations

import gzip
from dataclasses import replace
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.normalize import InputFormatError
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import stage_checked

LOAD_ID = "nightly/notes/2026-11-26"

EMPTY_FIRST_LINES = {
    "LF": b"\nid,note\n1,a\n2,b\n",
    "CRLF": b"\r\nid,note\r\n1,a\r\n2,b\r\n",
    "two": b"\n\nid,note\n1,a\n2,b\n",
    "BOM": b"\xef\xbb\xbf\nid,note\n1,a\n2,b\n",
    "gzip": gzip.compress(b"\nid,note\n1,a\n2,b\n"),
    # white space alone on the first line was refused too, but as DuckDB's "Error when sniffing"
    "spaces": b"   \nid,note\n1,a\n2,b\n",
    "tab": b"\t\r\nid,note\r\n1,a\r\n2,b\r\n",
}


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def load(db: TestDatabase, staged: StageResult, table: str = "notes") -> dict[str, Any]:
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile(table, staged.manifest_uri, load_id=LOAD_ID)
    for chunk in staged.manifest.chunks:
        hook.load_chunk(table, chunk, load_id=LOAD_ID)
    return hook.verify_load(table, staged.manifest_uri, load_id=LOAD_ID)


def load_error(
    db: TestDatabase, moto: MotoServer, bucket: str, key: str, body: bytes, **options: Any
) -> ChunkLoadError:
    """The error of loading ``body`` (staged with ``options``) into ``notes (id int, note text)``.

    ``chunks``: how many chunks staging must have made at least. A failed chunk leaves nothing
    behind: loaded as one chunk, the table stays empty.
    """
    chunks = options.pop("chunks", 1)
    db.query("CREATE TABLE notes (id int, note text)")
    put(moto, bucket, key, body)
    staged = stage_checked(db, moto, bucket, "notes", **options)
    assert len(staged.manifest.chunks) >= chunks
    with pytest.raises(ChunkLoadError) as raised:
        load(db, staged)
    if len(staged.manifest.chunks) == 1:
        assert db.query("SELECT count(*) FROM notes") == [(0,)]
    return raised.value


@pytest.mark.parametrize("direct", [True, False], ids=["as-stored", "staged"])
@pytest.mark.parametrize("body", list(EMPTY_FIRST_LINES.values()), ids=list(EMPTY_FIRST_LINES))
def test_an_empty_line_before_the_header_is_refused_not_loaded_as_a_row(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, direct: bool, body: bytes
) -> None:
    """What the user did: loaded an export that starts with an empty line, then its header.

    What happened: both paths took the empty line for the header and loaded the header line
    as a row: ``('id', 'note')`` stood in a text table beside the data, and the run was green.

    What should happen: staging refuses it before anything loads, naming the file and line 1.
    """
    pg_db.query("CREATE TABLE notes (id text, note text)")
    put(moto_server, s3_bucket, "in/a.csv", b"id,note\n7,fine\n")
    put(moto_server, s3_bucket, "in/b.csv", body)
    with pytest.raises(InputFormatError) as raised:
        stage_checked(pg_db, moto_server, s3_bucket, "notes", direct=direct)
    message = str(raised.value)
    assert f"s3://{s3_bucket}/in/b.csv, line 1" in message
    assert "empty (or white space) where the header is expected" in message
    assert pg_db.query("SELECT count(*) FROM notes") == [(0,)]


def test_mysql_refuses_an_empty_line_before_the_header_too(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """MySQL input is always staged: the same file is refused the same way."""
    mysql_db.query("CREATE TABLE notes (id varchar(10), note varchar(10))")
    put(moto_server, s3_bucket, "in/a.csv", EMPTY_FIRST_LINES["LF"])
    with pytest.raises(
        InputFormatError, match=r"in/a\.csv, line 1: the line is empty \(or white space\)"
    ):
        stage_checked(mysql_db, moto_server, s3_bucket, "notes")


@pytest.mark.parametrize("direct", [True, False], ids=["as-stored", "staged"])
def test_headerless_input_may_still_start_with_an_empty_line(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, direct: bool
) -> None:
    """Without a header an empty line is only an empty line between records: dropped."""
    pg_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text)")
    put(moto_server, s3_bucket, "in/a.csv", b"\n1,a\n2,b\n")
    staged = stage_checked(
        pg_db, moto_server, s3_bucket, "notes", direct=direct, file_format=FileFormat()
    )
    assert load(pg_db, staged)["verified"] is True
    assert sorted(pg_db.query("SELECT id, note FROM notes")) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize("header", [True, False], ids=["header", "headerless"])
@pytest.mark.parametrize("direct", [True, False], ids=["as-stored", "staged"])
def test_a_bad_value_is_named_at_its_input_line_and_only_a_staged_copy_is_named_beside_it(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, direct: bool, header: bool
) -> None:
    """What the user did: loaded a file whose third record holds ``x`` for an integer.

    What happened: loaded as stored, the error named the right line of the input, then added
    ``[staged as <the same input>, line 3]``: a staged copy that does not exist, at the line
    before. Staged without a header, the error named only the staged chunk (the trace to the
    input failed on the headerless file).

    What should happen: the input file and its line; the staged chunk beside it only when
    there is one.
    """
    pg_db.query("CREATE TABLE notes (id int, note text)")
    body = (b"id,note\n" if header else b"") + b"1,a\n2,b\nx,c\n4,d\n"
    put(moto_server, s3_bucket, "in/a.csv", body)
    staged = stage_checked(
        pg_db, moto_server, s3_bucket, "notes", direct=direct, file_format=FileFormat(header=header)
    )
    with pytest.raises(ChunkLoadError) as raised:
        load(pg_db, staged)
    error = raised.value
    assert error.source == f"s3://{s3_bucket}/in/a.csv"
    assert error.line == (4 if header else 3)
    assert error.column == "id"
    if direct:
        assert "staged as" not in str(error)
    else:
        assert "[staged as s3://" in str(error)
        assert "/chunk-00000.csv.gz, line 3]" in str(error)
    assert pg_db.query("SELECT count(*) FROM notes") == [(0,)]


# ---------------------------------------------------------------------------------------------
# From a second hostile round: where the error points when records span lines or do not fit
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("line_end", ["\n", "\r\n"], ids=["LF", "CRLF"])
@pytest.mark.parametrize("direct", [True, False], ids=["as-stored", "staged"])
def test_a_quoted_line_end_in_the_first_record_does_not_shift_the_named_line(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, direct: bool, line_end: str
) -> None:
    """What the user did: the first record's note holds a line end; a later id is ``z``.

    What happened: the error named line 4 (the good record ``2,b``) instead of line 5. COPY
    counts a line feed inside a quoted value only once it knows the stream ends its lines with
    line feeds, which it learns where the first record ends: the first record's own line feed
    was not counted, and the trace took COPY's line for a physical one.

    What should happen: the line ``z,bad`` is on (5), whatever the line ends.
    """
    body = line_end.join(["id,note", '1,"multi', 'line"', "2,b", "z,bad", "5,e", ""])
    error = load_error(pg_db, moto_server, s3_bucket, "in/a.csv", body.encode(), direct=direct)
    assert (error.source, error.line) == (f"s3://{s3_bucket}/in/a.csv", 5)
    assert '"z"' in str(error)


@pytest.mark.parametrize(
    "body",
    [b"id,note\n1,a\n2,b\n3,c,extra\n4,d\n", b"id,note\n1,a\n2,b\n3\n4,d\n"],
    ids=["a field too many", "a field too few"],
)
def test_a_record_of_another_width_is_named_at_its_line_of_the_object(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, body: bytes
) -> None:
    """What the user did: loaded as stored a file whose fourth line has one field too many/few.

    What happened: the trace compared the record by the header's columns and gave up on its
    width; the error then named the object with COPY's own line (3: the header not counted).

    What should happen: the object's line 4.
    """
    error = load_error(pg_db, moto_server, s3_bucket, "in/a.csv", body, direct=True)
    assert (error.source, error.line) == (f"s3://{s3_bucket}/in/a.csv", 4)


def test_a_bad_record_in_a_later_byte_range_is_named_at_its_line_of_the_object(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Loaded in byte ranges, the error named line 493 (of its range) for the object's 15002."""
    rows = [f"{i},note-{i:06d}".encode() for i in range(1, 20001)]
    rows[15000] = b"15001,note,extra"
    body = b"id,note\n" + b"\n".join(rows) + b"\n"
    ranged = {"direct": True, "quoted_newlines": False, "chunk_size": 50_000, "chunks": 2}
    error = load_error(pg_db, moto_server, s3_bucket, "in/big.csv", body, **ranged)
    assert (error.source, error.line) == (f"s3://{s3_bucket}/in/big.csv", 15002)


def test_an_error_that_cannot_be_traced_says_its_line_is_the_loaders(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """When the input cannot be searched (here: the manifest that lists it is gone), a direct
    chunk's error must not pass COPY's line (header not counted) off as a line of the object."""
    pg_db.query("CREATE TABLE notes (id int, note text)")
    put(moto_server, s3_bucket, "in/a.csv", b"id,note\n1,a\n2,b\nx,c\n")
    staged = stage_checked(pg_db, moto_server, s3_bucket, "notes", direct=True)
    chunk = staged.manifest.chunks[0]
    moved = replace(chunk, manifest_uri=f"s3://{s3_bucket}/nowhere/manifest.json")
    copy_error = ChunkLoadError(chunk.uri, 'invalid input syntax for type integer: "x"', line=3)
    error = BulkLoadHook(conn_id=pg_db.conn_id)._at_source("notes", moved, copy_error)
    assert error.line is None
    assert "[line 3 of the object as loaded, its header not counted]" in str(error)


def test_a_gzip_object_of_nothing_among_full_ones_loads_as_stored(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """A gzip object holding no bytes at all was refused ("has columns []"); staging reads it as
    empty, and so must the direct path."""
    pg_db.query("CREATE TABLE notes (id text, note text)")
    put(moto_server, s3_bucket, "in/a.csv", b"id,note\n1,a\n")
    put(moto_server, s3_bucket, "in/b.csv.gz", gzip.compress(b""))
    staged = stage_checked(pg_db, moto_server, s3_bucket, "notes", direct=True)
    assert load(pg_db, staged)["verified"] is True
    assert pg_db.query("SELECT id, note FROM notes") == [("1", "a")]
