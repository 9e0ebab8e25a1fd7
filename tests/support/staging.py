"""Stage ``s3://<bucket>/in/`` as a test's input, the way every staging test does."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from airflow_bulkload.catalog import loadable_column_types, probe_key_of
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.normalize import MAX_RECORD_BYTES
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase


def stage_input(
    moto: MotoServer,
    bucket: str,
    *,
    table: str = "notes",
    group_bytes: int | None = None,
    **options: Any,
) -> StageResult:
    """Stage the objects under ``in/`` for ``table`` (a nightly run of 2026-11-21) with
    ``options`` over a CSV-with-header default."""
    return stage(
        f"s3://{bucket}/in/",
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table=table,
        run="2026-11-21",
        options=StagingOptions(**({"file_format": FileFormat(header=True)} | options)),
        group_bytes=group_bytes,
    )


def stage_for_table(
    db: TestDatabase, moto: MotoServer, bucket: str, table: str, fmt: str, **options: Any
) -> StageResult:
    """Stage ``in/`` for ``table`` in format ``fmt``, checked against the table as the stage
    operator checks it (its key, its loadable columns and their types)."""
    return stage_checked(db, moto, bucket, table, file_format=FileFormat(format=fmt), **options)


def stage_checked(
    db: TestDatabase, moto: MotoServer, bucket: str, table: str, **options: Any
) -> StageResult:
    """Stage ``in/`` (CSV with a header unless ``options`` say otherwise) for ``table``, checked
    against the table as the stage operator checks it (its key, loadable columns and types)."""
    info = BulkLoadHook(conn_id=db.conn_id).describe_table(table)
    types = loadable_column_types(info)
    return stage_input(
        moto,
        bucket,
        table=table,
        probe_key=probe_key_of(info),
        table_columns=list(types),
        table_types=types,
        **options,
    )


def load_staged(db: TestDatabase, staged: StageResult, table: str) -> dict[str, Any]:
    """Load every chunk of ``staged`` into ``table`` as the pipeline does; the verification."""
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile(table, staged.manifest_uri, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk(table, chunk, load_id="t")
    return hook.verify_load(table, staged.manifest_uri, load_id="t")


def create_and_load(
    db: TestDatabase,
    moto: MotoServer,
    bucket: str,
    table: str,
    ddl: str,
    *,
    direct: bool,
    expect_direct: bool | None = None,
    **options: Any,
) -> StageResult:
    """Create ``table (ddl)``, stage ``in/`` for it (``direct`` asked or not) and load it.

    ``expect_direct``: whether planning must have taken the input as stored (``None``: either).
    """
    db.query(f"CREATE TABLE {table} ({ddl})")
    staged = stage_checked(db, moto, bucket, table, direct=direct, **options)
    assert staged.manifest is not None
    if expect_direct is not None:
        assert all(c.is_direct == expect_direct for c in staged.manifest.chunks)
    load_staged(db, staged, table)
    return staged


def upload_inputs(moto: MotoServer, bucket: str, paths: list[Path]) -> None:
    for path in paths:
        moto.client("s3").upload_file(str(path), bucket, f"in/{path.name}")


def long_quoted_value_csv() -> tuple[list[list[str]], bytes]:
    """1000 rows ``id,v`` with a header, row 500 holding a quoted value just under the record
    limit whose lines look like records (``1,abc``): DuckDB's parallel CSV reader refuses it
    (a thread's share of the file starts inside it). The rows, and the CSV."""
    rows = [[str(i), f"row {i}"] for i in range(1000)]
    rows[500][1] = ("1,abc\n" * (MAX_RECORD_BYTES // 6 + 1))[: MAX_RECORD_BYTES - 100]
    body = io.StringIO()
    csv.writer(body, lineterminator="\n").writerows([["id", "v"], *rows])
    return rows, body.getvalue().encode()
