"""A bad value is reported at the input file and line the user can open, not the staged chunk's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase


def stage_input(moto: MotoServer, bucket: str, source: str, **options: Any) -> StageResult:
    defaults: dict[str, Any] = {"file_format": FileFormat(header=True), "chunk_size": 2000}
    return stage(
        source,
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="nightly",
        table="counts",
        run="2026-11-21",
        options=StagingOptions(**(defaults | options)),
    )


def load_all(hook: BulkLoadHook, staged: StageResult) -> None:
    hook.reconcile("counts", staged.manifest_uri)
    for chunk in staged.manifest.chunks:
        hook.load_chunk("counts", chunk)


def write_inputs(moto: MotoServer, bucket: str) -> str:
    """Two files, columns in different orders; b.csv line 121 holds a word for a number."""
    s3 = moto.client("s3")
    a = "id,n,label\n" + "".join(f"{i},{i * 2},a {i}\n" for i in range(1, 201))
    lines = ["label,id,n"]
    for i in range(201, 401):
        n = "twelve" if i == 320 else str(i * 2)
        lines.append(f'"b\n{i}",{i},{n}' if i == 250 else f"b {i},{i},{n}")
    s3.put_object(Bucket=bucket, Key="in/a.csv", Body=a.encode())
    s3.put_object(Bucket=bucket, Key="in/b.csv", Body=("\n".join(lines) + "\n").encode())
    return f"s3://{bucket}/in/"


@pytest.mark.parametrize("sort", [False, True], ids=["as-read", "sorted-by-key"])
def test_a_bad_value_names_the_input_file_and_line(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, sort: bool
) -> None:
    text = "text" if any_db.engine == "postgres" else "VARCHAR(100)"
    any_db.query(f"CREATE TABLE counts (id int PRIMARY KEY, n int, label {text})")
    source = write_inputs(moto_server, s3_bucket)
    options: dict[str, Any] = {"sort_key": ["id"], "sort_types": ["INTEGER"]} if sort else {}
    staged = stage_input(moto_server, s3_bucket, source, **options)
    assert len(staged.manifest.chunks) > 2

    with pytest.raises(ChunkLoadError) as failure:
        load_all(BulkLoadHook(conn_id=any_db.conn_id), staged)

    error = failure.value
    # b.csv: header on line 1, ids 201.. from line 2, and id 250's label spans two lines
    assert error.source == f"{source}b.csv"
    assert error.line == 122
    assert "twelve" in str(error) or error.column in ("n", "`n`")
    assert "staged as s3://" in str(error)


def test_a_record_that_cannot_be_traced_keeps_the_chunk_line(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """The input was deleted after staging: the error still names the chunk and its line."""
    pg_db.query("CREATE TABLE counts (id int PRIMARY KEY, n int, label text)")
    source = write_inputs(moto_server, s3_bucket)
    staged = stage_input(moto_server, s3_bucket, source)
    s3 = moto_server.client("s3")
    s3.delete_object(Bucket=s3_bucket, Key="in/b.csv")

    with pytest.raises(ChunkLoadError) as failure:
        load_all(BulkLoadHook(conn_id=pg_db.conn_id), staged)

    assert failure.value.source.startswith(staged.prefix)
    assert failure.value.line is not None


def test_a_local_input_is_traced_too(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    pg_db.query("CREATE TABLE counts (id int PRIMARY KEY, n int, label text)")
    path = tmp_path / "local.csv"
    path.write_text(
        "id,n,label\n" + "".join(f"{i},{'x' if i == 77 else i},l\n" for i in range(1, 300))
    )
    staged = stage_input(moto_server, s3_bucket, str(path))

    with pytest.raises(ChunkLoadError) as failure:
        load_all(BulkLoadHook(conn_id=pg_db.conn_id), staged)

    assert failure.value.source == str(path)
    assert failure.value.line == 78
