"""BulkLoadHook on a real MariaDB with chunks in the moto S3 server: exactly once, bad input, safety."""

from __future__ import annotations

import pytest

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.mysql import MySqlDialect
from airflow_bulkload.dialects.mysql.load_sql import local_infile_sql
from airflow_bulkload.exceptions import (
    ChunkConflictError,
    ChunkLoadError,
    InvalidIdentifierError,
    RowCountMismatchError,
)
from airflow_bulkload.hooks.bulk_load import BulkLoadHook
from airflow_bulkload.staging.manifest import FileFormat
from tests.harness import MotoServer, TestDatabase, put_chunk

TABLE_DDL = (
    "CREATE TABLE people (id INT PRIMARY KEY, name VARCHAR(8) NOT NULL, age INT NULL) ENGINE=InnoDB"
)
GOOD = b"1,ann,31\n2,bob,\n3,cy,45\n"


@pytest.fixture
def people(mysql_db: TestDatabase) -> TestDatabase:
    mysql_db.query(TABLE_DDL)
    return mysql_db


def ledger(db: TestDatabase) -> list[tuple]:
    return db.query("SELECT table_name, chunk_key, row_count, load_id FROM bulkload_chunk_ledger")


def test_same_chunk_twice_loads_rows_once_and_skips_the_second(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "run/people/00000.csv.gz", GOOD, rows=3)
    hook = BulkLoadHook(conn_id=people.conn_id)

    first = hook.load_chunk("people", chunk, load_id="run-1")
    second = hook.load_chunk("people", chunk, load_id="run-2")

    assert (first.rows, first.skipped) == (3, False)
    assert (second.rows, second.skipped) == (3, True)
    assert people.query("SELECT id, name, age FROM people ORDER BY id") == [
        (1, "ann", 31),
        (2, "bob", None),
        (3, "cy", 45),
    ]
    assert ledger(people) == [(f"{people.name}.people", "run/people/00000.csv.gz", 3, "run-1")]


def test_changed_content_under_a_loaded_key_is_a_conflict(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    hook = BulkLoadHook(conn_id=people.conn_id)
    hook.load_chunk("people", put_chunk(moto_server, s3_bucket, "k.csv.gz", GOOD, rows=3))
    changed = put_chunk(moto_server, s3_bucket, "k.csv.gz", b"9,zed,1\n", rows=1)
    with pytest.raises(ChunkConflictError, match="checksum"):
        hook.load_chunk("people", changed)
    assert people.query("SELECT COUNT(*) FROM people") == [(3,)]


def test_header_text_format_and_null_markers(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    mysql_db.query("CREATE TABLE t (id INT PRIMARY KEY, note VARCHAR(20) NULL, n INT NULL)")
    hook = BulkLoadHook(conn_id=mysql_db.conn_id)
    csv = put_chunk(
        moto_server,
        s3_bucket,
        "a.csv.gz",
        b'id,note,n\n1,"a, ""quoted"" note",\n2,,7\n3,"",8\n',
        rows=3,
        file_format={"header": True},
    )
    text = put_chunk(
        moto_server,
        s3_bucket,
        "b.tsv.gz",
        b"4\ttab\\there\t\\N\n5\t\\N\t9\n",
        rows=2,
        file_format={"format": "text", "delimiter": "\t"},
    )
    custom = put_chunk(
        moto_server,
        s3_bucket,
        "c.csv.gz",
        b"6,NA,NA\n",
        rows=1,
        file_format={"null": "NA"},
        columns=["id", "note", "n"],
    )
    for chunk in (csv, text, custom):
        hook.load_chunk(f"{mysql_db.name}.t", chunk)
    assert mysql_db.query("SELECT id, note, n FROM t ORDER BY id") == [
        (1, 'a, "quoted" note', None),
        (2, None, 7),
        (3, None, 8),  # MySQL cannot tell "" from an empty field: both are the csv NULL marker
        (4, "tab\there", None),
        (5, None, 9),
        (6, None, None),
    ]


BAD_INPUTS = [
    # MySQL reports no row for a short row read into user variables (see load_columns_sql)
    pytest.param(b"1,ann,31\n2,bob\n", None, None, "fewer fields", id="too-few-fields"),
    pytest.param(b"1,ann,31\n2,bob,3,4\n", 2, None, "more fields", id="too-many-fields"),
    pytest.param(b"1,ann,31\n2,bob,old\n", 2, "age", "Incorrect integer value", id="string-in-int"),
    pytest.param(b"1,ann,31\n2,bartholomew,3\n", 2, "name", "Data truncated", id="long-varchar"),
    pytest.param(b"1,ann,31\n2,b\xffb,3\n", 2, "name", "Incorrect string value", id="bad-utf8"),
    pytest.param(b"1,ann,31\n1,bob,3\n", None, None, "Duplicate entry", id="duplicate-pk"),
]


@pytest.mark.parametrize(("data", "line", "column", "reason"), BAD_INPUTS)
def test_bad_input_fails_clearly_and_leaves_nothing(
    people: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    data: bytes,
    line: int | None,
    column: str | None,
    reason: str,
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "bad/00001.csv.gz", data, rows=2)
    with pytest.raises(ChunkLoadError) as info:
        BulkLoadHook(conn_id=people.conn_id).load_chunk("people", chunk)
    err = info.value
    assert err.source == chunk["uri"]
    assert reason in err.reason
    assert (err.line, err.column) == (line, column)
    assert chunk["uri"] in str(err)
    assert people.query("SELECT COUNT(*) FROM people") == [(0,)]
    assert ledger(people) == []


def test_line_numbers_count_the_header(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    chunk = put_chunk(
        moto_server,
        s3_bucket,
        "h.csv.gz",
        b"id,name,age\n1,ann,31\n2,bob,3\n3,cy,x\n",
        rows=3,
        file_format={"header": True},
    )
    with pytest.raises(ChunkLoadError) as info:
        BulkLoadHook(conn_id=people.conn_id).load_chunk("people", chunk)
    assert (info.value.line, info.value.column) == (4, "age")
    assert "int" in (info.value.expected or "")


def test_truncated_gzip_fails_and_rolls_back(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    data = b"".join(b"%d,n%d,%d\n" % (i, i, i) for i in range(1, 200_001))
    chunk = put_chunk(moto_server, s3_bucket, "cut.csv.gz", data, rows=200_000)
    chunk = put_chunk(
        moto_server, s3_bucket, "cut.csv.gz", data, rows=200_000, truncate_to=chunk["bytes"] // 2
    )
    with pytest.raises(ChunkLoadError, match="gzip"):
        BulkLoadHook(conn_id=people.conn_id).load_chunk("people", chunk)
    assert people.query("SELECT COUNT(*) FROM people") == [(0,)]
    assert ledger(people) == []


def test_missing_object_names_the_uri(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "there.csv.gz", GOOD, rows=3)
    chunk["uri"] = f"s3://{s3_bucket}/not-there.csv.gz"
    with pytest.raises(ChunkLoadError, match="does not exist") as info:
        BulkLoadHook(conn_id=people.conn_id).load_chunk("people", chunk)
    assert info.value.source == chunk["uri"]
    assert people.query("SELECT COUNT(*) FROM people") == [(0,)]


def test_row_count_must_match_the_manifest(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    chunk = put_chunk(moto_server, s3_bucket, "n.csv.gz", GOOD, rows=4)
    with pytest.raises(RowCountMismatchError, match="3 rows"):
        BulkLoadHook(conn_id=people.conn_id).load_chunk("people", chunk)
    assert people.query("SELECT COUNT(*) FROM people") == [(0,)]


def test_without_the_warnings_check_mariadb_keeps_converted_and_truncated_values(
    people: TestDatabase, tmp_path
) -> None:
    """The reason for the check: the very statement we send, run and committed without it."""
    data = tmp_path / "bad.csv"
    data.write_bytes(b"1,bartholomew,old\n2,bob\n")
    sql = local_infile_sql(
        str(data), TableRef("people", people.name), ["id", "name", "age"], FileFormat()
    )
    conn = people.connect(local_infile=1)
    try:
        cur = conn.cursor()
        cur.execute("SET SESSION sql_mode = 'STRICT_ALL_TABLES'")
        assert cur.execute(sql) == 2  # "succeeds"
        cur.execute("SHOW COUNT(*) WARNINGS")
        assert cur.fetchone()[0] > 0
    finally:
        conn.close()
    assert people.query("SELECT id, name, age FROM people ORDER BY id") == [
        (1, "bartholo", 0),  # truncated name, 'old' became 0
        (2, "bob", 0),  # a missing field became 0 (CAST of our guard's marker)
    ]


def test_a_secondary_unique_key_keeps_unique_checks_on(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    mysql_db.query(
        "CREATE TABLE u (id INT PRIMARY KEY, email VARCHAR(40) NOT NULL, UNIQUE KEY uq (email))"
    )
    chunk = put_chunk(moto_server, s3_bucket, "u.csv.gz", b"1,a@x\n2,b@x\n3,a@x\n", rows=3)
    with pytest.raises(ChunkLoadError, match="Duplicate entry"):
        BulkLoadHook(conn_id=mysql_db.conn_id).load_chunk("u", chunk)
    assert mysql_db.query("SELECT COUNT(*) FROM u") == [(0,)]


HOSTILE_TABLES = [
    "people`; DROP TABLE victim; -- ",
    "people`; DROP TABLE victim; --",
    "x\0y",
    "a" * 65,
]


@pytest.mark.parametrize("table", HOSTILE_TABLES)
def test_hostile_table_names_are_refused_or_quoted(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str, table: str
) -> None:
    people.query("CREATE TABLE victim (id INT)")
    chunk = put_chunk(moto_server, s3_bucket, "h/1.csv.gz", GOOD, rows=3)
    with pytest.raises((InvalidIdentifierError, ChunkLoadError, Exception)) as info:
        BulkLoadHook(conn_id=people.conn_id).load_chunk(f"`{table.replace('`', '``')}`", chunk)
    assert not isinstance(info.value, AssertionError)
    assert ("victim",) in people.query("SHOW TABLES")
    assert people.query("SELECT COUNT(*) FROM people") == [(0,)]


def test_hostile_but_legal_names_are_quoted_and_load(
    mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    mysql_db.query("CREATE TABLE victim (id INT)")
    mysql_db.query(
        "CREATE TABLE `t``; DROP TABLE victim; --` (`c``); DROP TABLE victim; --` INT, "
        "`na'me` VARCHAR(5))"
    )
    chunk = put_chunk(
        moto_server,
        s3_bucket,
        "q.csv.gz",
        b"1,a\n2,b\n",
        rows=2,
        columns=["c`); DROP TABLE victim; --", "na'me"],
        file_format={"null": "'); DROP TABLE victim; --"},
    )
    result = BulkLoadHook(conn_id=mysql_db.conn_id).load_chunk(
        "`t``; DROP TABLE victim; --`", chunk
    )
    assert result.rows == 2
    assert ("victim",) in mysql_db.query("SHOW TABLES")
    assert mysql_db.query("SELECT * FROM `t``; DROP TABLE victim; --` ORDER BY 1") == [
        (1, "a"),
        (2, "b"),
    ]


def test_state_tables_in_a_configured_database(
    people: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    import os

    from tests.harness import unique_name

    state_db = unique_name("bl_state")
    conn_var = f"AIRFLOW_CONN_{people.conn_id.upper()}"
    saved = os.environ[conn_var]
    people.extra["bulkload_state_schema"] = state_db
    os.environ[conn_var] = people.airflow_conn
    try:
        hook = BulkLoadHook(conn_id=people.conn_id)
        assert isinstance(hook.dialect, MySqlDialect)
        hook.load_chunk("people", put_chunk(moto_server, s3_bucket, "s.csv.gz", GOOD, rows=3))
        assert people.query(f"SELECT COUNT(*) FROM `{state_db}`.bulkload_chunk_ledger") == [(1,)]
        assert people.query("SHOW TABLES LIKE 'bulkload%%'") == []
    finally:
        os.environ[conn_var] = saved
        people.query(f"DROP DATABASE IF EXISTS `{state_db}`")
