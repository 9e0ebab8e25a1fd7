"""Parquet and JSON Lines input, staged by DuckDB and loaded into both engines, exact.

Checked against the table before any row loads: nested values, columns the table lacks, files
that disagree and a timestamp with a zone into a column without one are refused, naming the file
and the column.
"""

from __future__ import annotations

import gzip
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.catalog import loadable_column_types
from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.normalize import InputFormatError
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.support.staging import stage_input

ROWS = 3000
#: the rows every test input holds, as DuckDB SQL over i = 1..ROWS
SELECT = (
    "SELECT i::BIGINT AS id, (i * 1.25)::DECIMAL(30, 2) AS amount, "
    "CASE WHEN i % 7 = 0 THEN NULL ELSE 'note ' || i || ', \"quoted\"' END AS note, "
    "i % 2 = 0 AS active, DATE '2026-01-01' + (i % 30)::INT AS day, "
    '{at} + to_seconds(i) AS "at", i / 4 AS score{extra} FROM range(1, {rows}) r(i)'
)
NAIVE = "TIMESTAMP '2026-01-01 00:00:00'"
ZONED = "TIMESTAMPTZ '2026-01-01 00:00:00+02'"


def create_events(db: TestDatabase, *, zone: bool = False) -> None:
    if db.engine == "postgres":
        at = "timestamptz" if zone else "timestamp"
        db.query(
            "CREATE TABLE events (id bigint PRIMARY KEY, amount numeric(30, 2), note text, "
            f"active boolean, day date, at {at}, score double precision)"
        )
    else:
        db.query(
            "CREATE TABLE events (id BIGINT PRIMARY KEY, amount DECIMAL(30, 2), note TEXT, "
            "active BOOLEAN, day DATE, at DATETIME(6), score DOUBLE)"
        )


def write_parquet(tmp: Path, *, at: str = NAIVE, extra: str = "") -> list[Path]:
    """Two Parquet files, their columns in other orders (as two writers may order them)."""
    import duckdb

    rows = SELECT.format(at=at, extra=extra, rows=ROWS + 1)
    first, second = tmp / "part-0.parquet", tmp / "part-1.parquet"
    con = duckdb.connect()
    con.execute(f"COPY (SELECT * FROM ({rows}) WHERE id <= 1500) TO '{first}' (FORMAT parquet)")
    con.execute(
        'COPY (SELECT note, id, "at", amount, active, day, score'
        + (", extra_column" if extra else "")
        + f" FROM ({rows}) WHERE id > 1500) TO '{second}' (FORMAT parquet)"
    )
    return [first, second]


def write_jsonl_gz(tmp: Path) -> list[Path]:
    """JSON Lines as an exporter writes them: gzip, keys in any order, nulls left out."""
    path = tmp / "events.jsonl.gz"
    with gzip.open(path, "wt") as out:
        for i in range(1, ROWS + 1):
            record: dict[str, Any] = {
                "id": i,
                "amount": f"{Decimal(i) * Decimal('1.25'):.2f}",
                "active": i % 2 == 0,
                "day": f"2026-01-{i % 30 + 1:02d}",
                "at": f"2026-01-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d}",
                "score": i / 4,
            }
            if i % 7:
                record["note"] = f'note {i}, "quoted"'
            out.write(json.dumps(dict(reversed(record.items()))) + "\n")
    return [path]


def upload(moto: MotoServer, bucket: str, files: list[Path]) -> None:
    for path in files:
        moto.client("s3").upload_file(str(path), bucket, f"in/{path.name}")


def plan(db: TestDatabase, moto: MotoServer, bucket: str, fmt: str) -> StageResult:
    """Stage ``s3://bucket/in/`` as the stage operator does: checked against the table."""
    hook = BulkLoadHook(conn_id=db.conn_id)
    types = loadable_column_types(hook.describe_table("events"))
    return stage_input(
        moto,
        bucket,
        table="events",
        file_format=FileFormat(format=fmt),
        chunk_size=40_000,
        probe_key=["id"],
        table_columns=list(types),
        table_types=types,
        direct=True,  # refused for these formats: they are staged
    )


def load(db: TestDatabase, moto: MotoServer, bucket: str, fmt: str) -> StageResult:
    staged = plan(db, moto, bucket, fmt)
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile("events", staged.manifest_uri, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("events", chunk, load_id="t")
    hook.verify_load("events", staged.manifest_uri, load_id="t")
    return staged


def summary(db: TestDatabase) -> tuple[Any, ...]:
    active = "sum(CASE WHEN active THEN 1 ELSE 0 END)"
    row = db.query(
        f"SELECT count(*), sum(id), sum(amount), count(note), {active}, min(day), max(day), "
        "min(at), max(at), sum(score) FROM events"
    )[0]
    return tuple(str(v) for v in row)


EXPECTED_DAYS = ("2026-01-01", "2026-01-30")
EXPECTED = (
    str(ROWS),
    str(ROWS * (ROWS + 1) // 2),
    f"{Decimal(ROWS * (ROWS + 1) // 2) * Decimal('1.25'):.2f}",
    str(ROWS - ROWS // 7),
    str(ROWS // 2),
)


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_parquet_and_json_lines_load_every_row_and_value(
    fmt: str, any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_events(any_db)
    upload(
        moto_server,
        s3_bucket,
        write_parquet(tmp_path) if fmt == "parquet" else write_jsonl_gz(tmp_path),
    )

    staged = load(any_db, moto_server, s3_bucket, fmt)

    assert not any(c.uri.startswith(f"s3://{s3_bucket}/in/") for c in staged.manifest.chunks)
    assert len(staged.manifest.chunks) > 1
    got = summary(any_db)
    assert got[:5] == EXPECTED, got
    assert tuple(v[:10] for v in got[5:7]) == EXPECTED_DAYS
    assert got[7].startswith("2026-01-01 00:00:01"), got
    assert float(got[9]) == ROWS * (ROWS + 1) / 2 / 4, got  # quarters: exact in a double


def test_a_zoned_timestamp_loads_as_its_instant_into_a_zoned_column(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_events(pg_db, zone=True)
    upload(moto_server, s3_bucket, write_parquet(tmp_path, at=ZONED))

    load(pg_db, moto_server, s3_bucket, "parquet")

    [(first,)] = pg_db.query("SELECT min(at) AT TIME ZONE 'UTC' FROM events")
    assert str(first) == "2025-12-31 22:00:01"  # 00:00:01+02 is 22:00:01 UTC


def test_a_zoned_timestamp_into_a_column_without_a_zone_is_refused(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_events(any_db)  # timestamp / DATETIME: the zone would be dropped
    upload(moto_server, s3_bucket, write_parquet(tmp_path, at=ZONED))

    with pytest.raises(InputFormatError, match=r"part-0\.parquet: column 'at' is TIMESTAMP WITH"):
        plan(any_db, moto_server, s3_bucket, "parquet")
    assert summary(any_db)[0] == "0"


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (", {'a': i} AS extra_column", r"column 'extra_column' is STRUCT\(a BIGINT\)"),
        (", [i] AS extra_column", r"column 'extra_column' is BIGINT\[\]"),
        (", 'x' AS extra_column", r"column 'extra_column' is not a column of the table"),
    ],
    ids=["struct", "list", "unknown"],
)
def test_nested_values_and_columns_the_table_lacks_are_refused_naming_both(
    extra: str,
    says: str,
    pg_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    tmp_path: Path,
) -> None:
    create_events(pg_db)
    upload(moto_server, s3_bucket, write_parquet(tmp_path, extra=extra))

    with pytest.raises(InputFormatError, match=rf"part-0\.parquet: {says}"):
        plan(pg_db, moto_server, s3_bucket, "parquet")


def test_files_naming_other_columns_are_refused_naming_both(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    create_events(pg_db)
    files = write_parquet(tmp_path)
    import duckdb

    duckdb.connect().execute(
        f"COPY (SELECT id, note FROM '{files[1]}') TO '{tmp_path / 'part-2.parquet'}' "
        "(FORMAT parquet)"
    )
    upload(moto_server, s3_bucket, [*files, tmp_path / "part-2.parquet"])

    with pytest.raises(InputFormatError, match=r"part-2\.parquet has columns \['id', 'note'\]"):
        plan(pg_db, moto_server, s3_bucket, "parquet")


def test_a_value_the_column_does_not_take_fails_its_chunk_naming_it(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """A JSON string where the table has a number: MySQL's strict load refuses it, never a 0."""
    create_events(mysql_db)
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": 1, "score": 2.5}\n{"id": 2, "score": "two and a half"}\n')
    upload(moto_server, s3_bucket, [path])

    with pytest.raises(ChunkLoadError, match="score"):
        load(mysql_db, moto_server, s3_bucket, "jsonl")
    assert summary(mysql_db)[0] == "0"
