"""The staged format, proven against the real servers: NULL, empty string and the text NULL
stay distinct through PostgreSQL ``COPY ... (FORMAT csv)`` and MariaDB ``LOAD DATA``."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
from psycopg import sql

from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.stager import StageResult, StagingOptions, stage
from tests.harness import MotoServer, TestDatabase
from tests.staged_csv import Row, write_csv

ROWS: list[Row] = [
    ("1", None),
    ("2", ""),
    ("3", "NULL"),
    ("4", "\\N"),
    ("5", 'comma, "quote"'),
    ("6", "new\nline and crlf\r\n"),
    ("7", "été 🚀 back\\slash"),
    ("8", "  spaces  "),
]


def _staged_chunk(
    moto_server: MotoServer, bucket: str, tmp_path: Path
) -> tuple[StageResult, bytes]:
    s3 = moto_server.client("s3")
    source = write_csv(tmp_path / "in.csv", ROWS, header=["id", "v"])
    result = stage(
        str(source),
        s3=s3,
        staging_uri=f"s3://{bucket}/staging",
        dag_id="dag",
        table="t",
        run="r",
        options=StagingOptions(file_format=FileFormat(header=True)),
    )
    [chunk] = result.manifest.chunks
    stored = s3.get_object(Bucket=bucket, Key=chunk.key)["Body"].read()
    return result, gzip.decompress(stored)


def test_a_staged_chunk_copies_into_postgresql_with_the_manifest_format(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    result, data = _staged_chunk(moto_server, s3_bucket, tmp_path)
    fmt = FileFormat.from_dict(result.manifest.file_format)
    pg_db.query("CREATE TABLE t (id int PRIMARY KEY, v text)")
    copy = sql.SQL(
        "COPY t ({}) FROM STDIN WITH (FORMAT {}, DELIMITER {}, NULL {}, QUOTE {}, ESCAPE {}, "
        "HEADER {}, ENCODING {})"
    ).format(
        sql.SQL(", ").join(sql.Identifier(c) for c in result.manifest.columns or []),
        sql.SQL(fmt.format),
        sql.Literal(fmt.delimiter),
        sql.Literal(fmt.effective_null),
        sql.Literal(fmt.quote),
        sql.Literal(fmt.effective_escape),
        sql.SQL("true" if fmt.header else "false"),
        sql.Literal(fmt.encoding),
    )
    with pg_db.connect() as conn, conn.cursor().copy(copy) as pipe:
        pipe.write(data)
    loaded = pg_db.query("SELECT id::text, v FROM t ORDER BY id")
    assert loaded == [tuple(r) for r in ROWS]


def test_a_staged_chunk_loads_into_mariadb_with_load_data(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    result, data = _staged_chunk(moto_server, s3_bucket, tmp_path)
    fmt = FileFormat.from_dict(result.manifest.file_format)
    assert (fmt.null, fmt.quote, fmt.effective_escape) == ("NULL", '"', '"')
    chunk_file = tmp_path / "chunk.csv"
    chunk_file.write_bytes(data)
    mysql_db.query("CREATE TABLE t (id INT PRIMARY KEY, v TEXT) CHARACTER SET utf8mb4")
    conn: Any = mysql_db.connect(local_infile=1)
    try:
        # the unquoted word NULL is NULL only with ENCLOSED BY set; ESCAPED BY '' keeps
        # backslashes literal, as in PostgreSQL's CSV format
        conn.cursor().execute(
            "LOAD DATA LOCAL INFILE %s INTO TABLE t CHARACTER SET utf8mb4 "
            "FIELDS TERMINATED BY %s OPTIONALLY ENCLOSED BY %s ESCAPED BY '' "
            "LINES TERMINATED BY '\\n' (id, v)",
            (str(chunk_file), fmt.delimiter, fmt.quote),
        )
    finally:
        conn.close()
    loaded = mysql_db.query("SELECT CAST(id AS CHAR), v FROM t ORDER BY id")
    assert loaded == [tuple(r) for r in ROWS]


@pytest.mark.parametrize("value", ["", "NULL", None])
def test_format_keeps_null_empty_and_text_null_apart(value: str | None) -> None:
    # documentation test: what each value looks like in a staged file
    from tests.staged_csv import parse_staged

    written = {None: "1,NULL\n", "": "1,\n", "NULL": '1,"NULL"\n'}[value]
    assert parse_staged(written) == [("1", value)]
