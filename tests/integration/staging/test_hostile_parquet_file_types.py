"""Hostile Parquet input: files of one input that type a column differently.

``typed_formats.check_schemas`` compares only the files' column *names*; the read is
``read_parquet([...], union_by_name = true)``, which promotes a column to a type all files fit
(BIGINT + DOUBLE -> DOUBLE, DECIMAL(38,2) + DECIMAL(38,10) -> DECIMAL(38,2)), and
``text_select`` writes each column by the *first* file's type. Values of one file are silently
changed by another file's type -- even by a zero-row part (as Spark writes them), which adds no
row at all. Expected: every value loads as its own file holds it, or staging refuses naming the
files and the column before any row loads.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_bulkload.staging.normalize import InputFormatError
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import load_staged, stage_for_table, upload_inputs


def _parquet(path: Path, select: str) -> Path:
    import duckdb

    duckdb.connect().execute(f"COPY ({select}) TO '{path}' (FORMAT parquet)")
    return path


def _load(db: TestDatabase, moto: MotoServer, bucket: str, files: list[Path]) -> None:
    upload_inputs(moto, bucket, files)
    load_staged(db, stage_for_table(db, moto, bucket, "z", "parquet"), "z")


def _values(db: TestDatabase) -> list[str]:
    cast = "v::text" if db.engine == "postgres" else "CAST(v AS CHAR)"
    return [str(v) for (v,) in db.query(f"SELECT {cast} FROM z ORDER BY id")]


# (first file's value, second file's value, PostgreSQL column, MySQL column, what must load)
CASES = {
    # found: ['9007199254740992.0', '1.5'] on PostgreSQL (MySQL: 9007199254740992.00)
    "bigint-beside-double": (
        "9007199254740993::BIGINT",
        "1.5::DOUBLE",
        "numeric",
        "DECIMAL(30,1)",
        ["9007199254740993", "1.5"],
    ),
    # found: ['1', '1']: the second file's 5 goes through the first file's BOOLEAN CASE
    "boolean-beside-bigint": ("true", "5::BIGINT", "integer", "INT", ["1", "5"]),
    # found: the second file's 1.1234567890 loads as 1.12 (the union is DECIMAL(38,2))
    "decimal-scales": (
        "12345678901234567890123456789.12::DECIMAL(38,2)",
        "1.1234567890::DECIMAL(38,10)",
        "numeric",
        "DECIMAL(65,10)",
        ["12345678901234567890123456789.12", "1.1234567890"],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_files_values_are_not_changed_by_another_files_type(
    case: str, any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    first, second, pg_type, mysql_type, expected = CASES[case]
    column = pg_type if any_db.engine == "postgres" else mysql_type
    any_db.query(f"CREATE TABLE z (id int PRIMARY KEY, v {column})")
    files = [
        _parquet(tmp_path / "part-0.parquet", f"SELECT 1 AS id, {first} AS v"),
        _parquet(tmp_path / "part-1.parquet", f"SELECT 2 AS id, {second} AS v"),
    ]
    try:
        _load(any_db, moto_server, s3_bucket, files)
    except InputFormatError as refused:  # refusing, naming both files and the column, is fine
        assert "part-1.parquet" in str(refused) and "'v'" in str(refused)
        return
    got = _values(any_db)
    if any_db.engine == "mysql" or case == "decimal-scales":
        got = [g.rstrip("0").rstrip(".") if "." in g else g for g in got]
        expected = [e.rstrip("0").rstrip(".") if "." in e else e for e in expected]
    assert got == expected


def test_a_zero_row_part_does_not_change_the_other_parts_values(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A zero-row part typing ``v`` DOUBLE beside the data typing it DECIMAL(38,19).

    Found: 0.1234567890123456789 loads as 0.12345678901234568 (PostgreSQL) /
    0.1234567890123456800 (MySQL): the empty part, which adds no row, made the column a DOUBLE.
    Expected: 0.1234567890123456789 (or a refusal naming the files and the column).
    """
    column = "numeric(38,19)" if any_db.engine == "postgres" else "DECIMAL(38,19)"
    any_db.query(f"CREATE TABLE z (id int PRIMARY KEY, v {column})")
    files = [
        _parquet(
            tmp_path / "part-0.parquet",
            "SELECT 1 AS id, 0.1234567890123456789::DECIMAL(38,19) AS v",
        ),
        _parquet(tmp_path / "part-1.parquet", "SELECT 2 AS id, 1.5::DOUBLE AS v WHERE false"),
    ]
    try:
        _load(any_db, moto_server, s3_bucket, files)
    except InputFormatError as refused:
        assert "part-1.parquet" in str(refused) and "'v'" in str(refused)
        return
    assert _values(any_db) == ["0.1234567890123456789"]
