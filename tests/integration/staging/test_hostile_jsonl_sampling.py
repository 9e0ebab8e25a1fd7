"""Hostile JSON Lines: what DuckDB's schema guess (its first 20,480 records) decides.

``typed_formats.describe`` takes each file's columns and types from ``read_json``'s sample; the
read then names those columns explicitly (``columns = {...: 'VARCHAR'}``), which silently ignores
any other key, and casts a key sampled as BOOLEAN with ``CAST(v AS BOOLEAN)``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.normalize import InputFormatError
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import load_staged, stage_for_table, upload_inputs

SAMPLED = 25_000  # more records than DuckDB samples (20,480)


def _load(db: TestDatabase, moto: MotoServer, bucket: str, paths: list[Path]) -> None:
    upload_inputs(moto, bucket, paths)
    load_staged(db, stage_for_table(db, moto, bucket, "z", "jsonl", chunk_size=200_000), "z")


def test_a_key_first_seen_after_the_sample_is_not_dropped(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """25,000 records ``{"id": i}``, then ``{"id": 25001, "note": "only here"}``.

    Found: the load succeeds, 25,001 rows, and row 25001's note is NULL -- the key was never
    described, so the read ignores it (the manifest's columns are ['id']). Expected: the note
    loads, or staging refuses naming the file and the key 'note'.
    """
    any_db.query("CREATE TABLE z (id int PRIMARY KEY, note text)")
    path = tmp_path / "events.jsonl"
    with path.open("w") as out:
        for i in range(1, SAMPLED + 1):
            out.write(json.dumps({"id": i}) + "\n")
        out.write(json.dumps({"id": SAMPLED + 1, "note": "only here"}) + "\n")

    try:
        _load(any_db, moto_server, s3_bucket, [path])
    except InputFormatError as refused:
        assert "events.jsonl" in str(refused) and "note" in str(refused)
        return
    assert any_db.query(f"SELECT note FROM z WHERE id = {SAMPLED + 1}") == [("only here",)]


def test_a_string_after_a_boolean_sample_is_not_turned_into_a_number(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """``v`` is true/false in the sample, then the *string* ``"yes"``, into an integer column.

    Found: "yes" loads as 1 (CAST('yes' AS BOOLEAN) is true, written '1'); the same string in a
    file whose sample is not boolean fails its chunk ('invalid input syntax for type integer' /
    'Incorrect integer value'). Expected: the string is refused naming the column, not a 1.
    """
    any_db.query("CREATE TABLE z (id int PRIMARY KEY, v int)")
    path = tmp_path / "flags.jsonl"
    with path.open("w") as out:
        for i in range(1, SAMPLED + 1):
            out.write(json.dumps({"id": i, "v": i % 2 == 0}) + "\n")
        out.write(json.dumps({"id": SAMPLED + 1, "v": "yes"}) + "\n")

    try:
        _load(any_db, moto_server, s3_bucket, [path])
    except BulkLoadError as refused:
        assert "v" in str(refused)
        return
    [(loaded,)] = any_db.query(f"SELECT v FROM z WHERE id = {SAMPLED + 1}")
    pytest.fail(f'the string "yes" loaded silently as {loaded!r}')


def test_a_file_of_blank_lines_adds_no_rows(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """An exporter's empty partition written as one newline, beside a file with a record.

    Found: InputFormatError "empty.jsonl: column 'json' is not a column of the table (its
    columns: ['id', 'v'])" -- a column no file names -- and nothing loads (a 0-byte file or a
    zero-row Parquet part adds no rows). Expected: the blank file adds no rows; the record loads.
    """
    pg_db.query("CREATE TABLE z (id int PRIMARY KEY, v text)")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    data = tmp_path / "part.jsonl"
    data.write_text('{"id": 7, "v": "x"}\n')

    _load(pg_db, moto_server, s3_bucket, [empty, data])

    assert pg_db.query("SELECT id, v FROM z") == [(7, "x")]


@pytest.mark.xfail(
    strict=True,
    reason="DuckDB renames a key that differs from another only by case (V_1); left as found",
)
def test_keys_differing_only_by_case_map_onto_their_columns(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """Table (id, v, "V"); record ``{"id": 1, "v": "lower", "V": "upper"}`` (Parquet alike).

    Found: InputFormatError "a.jsonl: column 'V_1' is not a column of the table (its columns:
    ['V', 'id', 'v'])" -- DuckDB renamed "V", and the error names a key the file does not have.
    Expected: both load (lower, upper), or a refusal naming the real key "V".
    """
    pg_db.query('CREATE TABLE z (id int PRIMARY KEY, v text, "V" text)')
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1, "v": "lower", "V": "upper"}\n')

    try:
        _load(pg_db, moto_server, s3_bucket, [path])
    except InputFormatError as refused:
        assert "V_1" not in str(refused), str(refused)
        return
    assert pg_db.query('SELECT v, "V" FROM z') == [("lower", "upper")]


def test_a_key_an_exporter_left_out_of_a_whole_file_loads_as_null(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """JSON Lines as exporters write them, nulls left out: in b.jsonl every ``note`` is null.

    Within one file a key missing from some lines loads NULL. Found: InputFormatError
    "b.jsonl has columns ['id'], but a.jsonl has ['id', 'note'] ...: every file of one input must
    name the same columns" -- the whole input is refused because one partition had no notes.
    Expected: rows 3 and 4 load with a NULL note, as row 2 does.
    """
    any_db.query("CREATE TABLE z (id int PRIMARY KEY, note text)")
    first = tmp_path / "a.jsonl"
    first.write_text('{"id": 1, "note": "x"}\n{"id": 2}\n')
    second = tmp_path / "b.jsonl"
    second.write_text('{"id": 3}\n{"id": 4}\n')

    _load(any_db, moto_server, s3_bucket, [first, second])

    assert any_db.query("SELECT id, note FROM z ORDER BY id") == [
        (1, "x"),
        (2, None),
        (3, None),
        (4, None),
    ]


def test_a_json_object_loads_into_a_json_column_wherever_it_stands(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """``{"id": 1, "doc": {"a": 1, "b": [1, 2]}}`` into PostgreSQL jsonb / MySQL JSON.

    Found: InputFormatError "a.jsonl: column 'doc' is STRUCT(a BIGINT, b BIGINT[]), which no
    table column loads as text; flatten it" -- yet the same object after DuckDB's 20,480-record
    sample is read as text and loads (into text or JSON alike). Expected: the object loads as
    JSON (the column takes JSON text), whichever line it is on.
    """
    column = "jsonb" if any_db.engine == "postgres" else "JSON"
    any_db.query(f"CREATE TABLE z (id int PRIMARY KEY, doc {column})")
    path = tmp_path / "a.jsonl"
    path.write_text('{"id": 1, "doc": {"a": 1, "b": [1, 2]}}\n')

    _load(any_db, moto_server, s3_bucket, [path])

    [(doc,)] = any_db.query("SELECT doc FROM z")
    assert (json.loads(doc) if isinstance(doc, str) else doc) == {"a": 1, "b": [1, 2]}
