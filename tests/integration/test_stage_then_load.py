"""Staging's chunk format, read back by both engines' loaders: every value survives exactly."""

from __future__ import annotations

from pathlib import Path

from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StagingOptions, stage
from tests.harness import MotoServer, TestDatabase

# id, value: NULL, empty string, the word NULL, \N, backslashes, quotes, delimiters, newlines, UTF-8
INPUT = (
    "id,note\r\n"
    "1,\r\n"
    '2,""\r\n'
    '3,"NULL"\r\n'
    "4,\\N\r\n"
    '5,"back\\slash\\"\r\n'
    '6,"say ""hi"", then go"\r\n'
    '7,"two\nlines"\r\n'
    "8,Grüße 東京 😀\r\n"
    "9,NULL\r\n"
)
EXPECTED = {
    1: None,
    2: "",
    3: "NULL",
    4: "\\N",
    5: "back\\slash\\",
    6: 'say "hi", then go',
    7: "two\nlines",
    8: "Grüße 東京 😀",
    9: "NULL",
}


def test_every_value_survives_staging_and_loading(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    source = tmp_path / "input.csv"
    source.write_bytes(INPUT.encode("utf-8"))
    if any_db.engine == "postgres":
        any_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text)")
    else:
        any_db.query("CREATE TABLE notes (id INT PRIMARY KEY, note TEXT) CHARACTER SET utf8mb4")
    # The input says: an empty unquoted field is NULL ("" stays an empty string), like PostgreSQL.
    result = stage(
        str(source),
        s3=moto_server.client("s3"),
        staging_uri=f"s3://{s3_bucket}/staging",
        dag_id="roundtrip",
        table="notes",
        run="r1",
        options=StagingOptions(
            file_format=FileFormat(header=True), sort_key=["id"], sort_types=["integer"]
        ),
    )
    assert result.manifest.total_rows == len(EXPECTED)
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    for chunk in result.manifest.chunks:
        hook.load_chunk("notes", chunk)
    assert dict(any_db.query("SELECT id, note FROM notes ORDER BY id")) == EXPECTED
