"""Every file is mapped by its own header; files that name other columns, and a columns= list
that contradicts a header, are refused before anything is staged."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase


def write(folder: Path, name: str, header: str, rows: list[dict[str, Any]]) -> None:
    names = header.split(",")
    lines = [header] + [",".join(str(r[n]) for n in names) for r in rows]
    (folder / name).write_text("\n".join(lines) + "\n")


def people(first_id: int, count: int) -> list[dict[str, Any]]:
    return [
        {"id": i, "first": f"first{i}", "last": f"last{i}"}
        for i in range(first_id, first_id + count)
    ]


def stage_folder(
    moto: MotoServer, bucket: str, folder: Path, columns: list[str] | None = None
) -> StageResult:
    return stage(
        str(folder / "*.csv"),
        s3=moto.client("s3"),
        staging_uri=f"s3://{bucket}/staging",
        dag_id="d",
        table="people",
        run="r",
        options=StagingOptions(file_format=FileFormat(header=True), columns=columns),
    )


def test_files_with_different_header_orders_load_by_name(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    write(tmp_path, "a.csv", "id,first,last", people(1, 1000))
    write(tmp_path, "b.csv", "id,last,first", people(1001, 1000))
    write(tmp_path, "c.csv", "last,id,first", people(2001, 10))
    text = "text" if any_db.engine == "postgres" else "VARCHAR(40)"
    any_db.query(f"CREATE TABLE people (id int PRIMARY KEY, first {text}, last {text})")

    staged = stage_folder(moto_server, s3_bucket, tmp_path)
    assert staged.manifest.columns == ["id", "first", "last"]
    hook = BulkLoadHook(conn_id=any_db.conn_id)
    for chunk in staged.manifest.chunks:
        hook.load_chunk("people", chunk)

    assert any_db.query(
        "SELECT count(*) FROM people WHERE first = CONCAT('first', id) AND last = CONCAT('last', id)"
    ) == [(2010,)]


def test_a_file_naming_other_columns_is_refused_naming_both(
    moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    write(tmp_path, "a.csv", "id,first,last", people(1, 5))
    (tmp_path / "b.csv").write_text("id,first,nickname\n9,x,y\n")
    with pytest.raises(BulkLoadError, match=r"b\.csv has columns.*a\.csv has.*nickname"):
        stage_folder(moto_server, s3_bucket, tmp_path)


def test_columns_contradicting_the_header_are_refused(
    moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    write(tmp_path, "a.csv", "id,first,last", people(1, 5))
    with pytest.raises(BulkLoadError, match=r"contradicts the header.*\['last', 'first'\]"):
        stage_folder(moto_server, s3_bucket, tmp_path, columns=["id", "last", "first"])


def test_columns_may_rename_the_header(
    moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    write(
        tmp_path,
        "a.csv",
        "ID,First,Last",
        people(1, 5) and [{"ID": i, "First": "f", "Last": "l"} for i in range(5)],
    )
    staged = stage_folder(moto_server, s3_bucket, tmp_path, columns=["id", "first", "last"])
    assert staged.manifest.columns == ["id", "first", "last"]
    assert staged.manifest.total_rows == 5


def test_a_nul_byte_is_refused_for_both_engines_naming_the_line(
    moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    (tmp_path / "a.csv").write_bytes(b"id,first,last\n1,a,b\n2,c\x00d,e\n3,f,g\n")
    with pytest.raises(BulkLoadError, match=r"NUL byte \(U\+0000\) in .*a\.csv, line 3:"):
        stage_folder(moto_server, s3_bucket, tmp_path)
    # gzip input (named .csv): found in the file as stored, lines counted once decompressed
    (tmp_path / "a.csv").unlink()
    (tmp_path / "b.csv").write_bytes(gzip.compress(b"id,first,last\n1,a,b\n2,c,e\n3,\x00,g\n"))
    with pytest.raises(BulkLoadError, match=r"NUL byte \(U\+0000\) in .*b\.csv, line 4:"):
        stage_folder(moto_server, s3_bucket, tmp_path)
