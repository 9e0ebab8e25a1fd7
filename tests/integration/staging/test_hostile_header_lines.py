"""Hostile regression tests: where the header line is, and where a bad value's error points.

Each test says what the user did, what happened before the fix and what should happen.
"""

from __future__ import annotations

import gzip
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
}


def put(moto: MotoServer, bucket: str, key: str, body: bytes) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def load(db: TestDatabase, staged: StageResult, table: str = "notes") -> dict[str, Any]:
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile(table, staged.manifest_uri, load_id=LOAD_ID)
    for chunk in staged.manifest.chunks:
        hook.load_chunk(table, chunk, load_id=LOAD_ID)
    return hook.verify_load(table, staged.manifest_uri, load_id=LOAD_ID)


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
    assert "empty where the header is expected" in message
    assert pg_db.query("SELECT count(*) FROM notes") == [(0,)]


def test_mysql_refuses_an_empty_line_before_the_header_too(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """MySQL input is always staged: the same file is refused the same way."""
    mysql_db.query("CREATE TABLE notes (id varchar(10), note varchar(10))")
    put(moto_server, s3_bucket, "in/a.csv", EMPTY_FIRST_LINES["LF"])
    with pytest.raises(InputFormatError, match=r"in/a\.csv, line 1: the line is empty"):
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
