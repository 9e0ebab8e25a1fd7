"""MySQL dialect pure logic: quoting, literals, LOAD DATA text (incl. Aurora golden SQL), warnings."""

from __future__ import annotations

import io
import json
import os
import re
import time
import types

import pytest
from MySQLdb import OperationalError

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects import LoadInto, dialect_for
from airflow_bulkload.dialects.mysql import MySqlDialect
from airflow_bulkload.dialects.mysql.ddl import parse_key_lines
from airflow_bulkload.dialects.mysql.errors import _driver_error, parse_warning, warnings_error
from airflow_bulkload.dialects.mysql.ledger import chunk_lock_name
from airflow_bulkload.dialects.mysql.load_sql import (
    aurora_load_sql,
    aurora_manifest_json,
    local_infile_sql,
)
from airflow_bulkload.dialects.mysql.quoting import (
    bytes_literal,
    mysql_charset,
    quote_identifier,
    string_literal,
)
from airflow_bulkload.exceptions import (
    BulkLoadError,
    ChunkLoadError,
    InvalidFileFormatError,
    InvalidIdentifierError,
)
from airflow_bulkload.s3io import ChunkStream
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

T = TableRef("events", "shop")


@pytest.mark.parametrize(
    ("name", "quoted"),
    [
        ("events", "`events`"),
        ("odd`name", "`odd``name`"),
        ("a; DROP TABLE x; --", "`a; DROP TABLE x; --`"),
        ("naïve é", "`naïve é`"),
        ("x" * 64, "`" + "x" * 64 + "`"),
    ],
)
def test_quote_identifier(name: str, quoted: str) -> None:
    assert quote_identifier(name) == quoted


@pytest.mark.parametrize(
    "name", ["", "a\0b", "x" * 65, "trailing ", "tab\tname", "line\nbreak", "emoji😀", None]
)
def test_quote_identifier_refuses_what_mysql_cannot_hold(name: str) -> None:
    with pytest.raises(InvalidIdentifierError):
        quote_identifier(name)


def test_dialect_table_ref_applies_mysql_rules() -> None:
    dialect = MySqlDialect()
    assert dialect.table_ref("`a b`.`c``d`") == TableRef("c`d", "a b")
    with pytest.raises(InvalidIdentifierError):
        dialect.table_ref("`db`.`ends with space `")


def test_string_literal_doubles_quotes_and_refuses_mode_dependent_characters() -> None:
    assert string_literal("/tmp/x/chunk.fifo") == "'/tmp/x/chunk.fifo'"
    assert string_literal("s3://b/it's.csv") == "'s3://b/it''s.csv'"
    for bad in ("a\\b", "a\nb", "a\0b"):
        with pytest.raises(InvalidFileFormatError):
            string_literal(bad)


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (",", "','"),
        ('"', "'\"'"),
        ("\t", "X'09'"),
        ("\\", "X'5C'"),
        ("'", "X'27'"),
        ("", "''"),
        ("\\N", "X'5C4E'"),
        ("'); DROP TABLE x; --", "X'27293B2044524F50205441424C4520783B202D2D'"),
        ("§", "X'C2A7'"),
    ],
)
def test_bytes_literal(value: str, literal: str) -> None:
    assert bytes_literal(value) == literal


def test_charset_names() -> None:
    assert mysql_charset("UTF8") == "utf8mb4"
    assert mysql_charset("utf-8") == "utf8mb4"
    assert mysql_charset("LATIN1") == "latin1"


def test_local_infile_sql_for_csv_maps_the_null_marker_and_guards_short_rows() -> None:
    sql = local_infile_sql(
        "/tmp/d/chunk.fifo", T, ["id", "note"], FileFormat(header=True, null="NA")
    )
    assert sql == (
        "LOAD DATA LOCAL INFILE '/tmp/d/chunk.fifo' INTO TABLE `shop`.`events` "
        "CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' "
        "ESCAPED BY '' LINES TERMINATED BY X'0A' IGNORE 1 LINES (@bl1, @bl2) "
        "SET `id` = NULLIF(@bl1, 'NA'), `note` = IF(@bl2 IS NULL, "
        "CAST('bulkload: row has too few fields' AS SIGNED), NULLIF(@bl2, 'NA'))"
    )


def test_local_infile_sql_for_text_uses_native_null() -> None:
    sql = local_infile_sql("/f", T, ["id", "note"], FileFormat(format="text", delimiter="\t"))
    assert sql == (
        "LOAD DATA LOCAL INFILE '/f' INTO TABLE `shop`.`events` CHARACTER SET utf8mb4 "
        "FIELDS TERMINATED BY X'09' ESCAPED BY X'5C' LINES TERMINATED BY X'0A' (`id`, `note`)"
    )


def test_aurora_file_golden_sql() -> None:
    fmt = FileFormat(header=True)
    assert aurora_load_sql(
        "FILE", "s3://bucket/run/events/00001.csv", T, ["id", "note"], fmt, region="eu-west-1"
    ) == (
        "LOAD DATA FROM S3 FILE 's3-eu-west-1://bucket/run/events/00001.csv' "
        "INTO TABLE `shop`.`events` CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' "
        "OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' LINES TERMINATED BY X'0A' IGNORE 1 LINES "
        "(@bl1, @bl2) SET `id` = NULLIF(@bl1, ''), `note` = IF(@bl2 IS NULL, "
        "CAST('bulkload: row has too few fields' AS SIGNED), NULLIF(@bl2, ''))"
    )


def test_aurora_prefix_and_manifest_golden_sql() -> None:
    fmt = FileFormat(format="text", delimiter="\t")
    assert aurora_load_sql("PREFIX", "s3://bucket/run/events/", T, ["id"], fmt) == (
        "LOAD DATA FROM S3 PREFIX 's3://bucket/run/events/' INTO TABLE `shop`.`events` "
        "CHARACTER SET utf8mb4 FIELDS TERMINATED BY X'09' ESCAPED BY X'5C' "
        "LINES TERMINATED BY X'0A' (`id`)"
    )
    assert aurora_load_sql(
        "MANIFEST", "s3://bucket/run/events/aurora.manifest", T, ["id"], fmt, region="us-east-1"
    ) == (
        "LOAD DATA FROM S3 MANIFEST 's3-us-east-1://bucket/run/events/aurora.manifest' "
        "INTO TABLE `shop`.`events` CHARACTER SET utf8mb4 FIELDS TERMINATED BY X'09' "
        "ESCAPED BY X'5C' LINES TERMINATED BY X'0A' (`id`)"
    )
    body = json.loads(aurora_manifest_json(["s3://b/1.csv", "s3://b/2.csv"]))
    assert body == {
        "entries": [
            {"url": "s3://b/1.csv", "mandatory": True},
            {"url": "s3://b/2.csv", "mandatory": True},
        ]
    }


def test_aurora_refuses_gzip_and_hostile_uris() -> None:
    with pytest.raises(ChunkLoadError, match="cannot read gzip"):
        aurora_load_sql("FILE", "s3://b/k.csv.gz", T, ["id"], FileFormat())
    with pytest.raises(InvalidFileFormatError):
        aurora_load_sql("FILE", "s3://b/k\\'; DROP TABLE x; --", T, ["id"], FileFormat())
    with pytest.raises(InvalidFileFormatError):
        aurora_load_sql("FILE", "s3://b/k", T, ["id"], FileFormat(), region="x'; DROP")
    quoted = aurora_load_sql("FILE", "s3://b/it's", T, ["id"], FileFormat())
    assert "'s3://b/it''s'" in quoted


def test_load_server_side_refuses_gzip_chunks_before_any_sql() -> None:
    chunk = ChunkSpec(uri="s3://b/k.csv", checksum="x", compression="gzip")
    into = LoadInto(T, ["id"], chunk.format)
    with pytest.raises(ChunkLoadError, match="cannot read gzip"):
        MySqlDialect().load_server_side(None, "aurora_s3", into, chunk, "us-east-1")
    with pytest.raises(NotImplementedError):
        MySqlDialect().load_server_side(None, "rds_s3", into, chunk, "us-east-1")


@pytest.mark.parametrize(
    ("code", "message", "row", "column"),
    [
        (1366, "Incorrect integer value: 'x' for column `db`.`t`.`age` at row 3", 3, "age"),
        (1366, "Incorrect integer value: 'x' for column 'age' at row 3", 3, "age"),
        (1265, "Data truncated for column 'name' at row 2", 2, "name"),
        (1406, "Data too long for column 'na''me' at row 9", 9, "na'me"),
        (
            1366,
            "Incorrect string value: '\\xFF' for column `d`.`t`.`we``ird` at row 1",
            1,
            "we`ird",
        ),
        (1261, "Row 4 doesn't contain data for all columns", 4, None),
        (
            1262,
            "Row 5 was truncated; it contained more data than there were input columns",
            5,
            None,
        ),
        (1048, "Column 'name' cannot be null", None, "name"),
        (1062, "Duplicate entry '1' for key 'PRIMARY'", None, None),
    ],
)
def test_parse_warning(code: int, message: str, row: int | None, column: str | None) -> None:
    warning = parse_warning(code, message)
    assert (warning.row, warning.column) == (row, column)


def test_warnings_error_names_source_line_column_and_type() -> None:
    err = warnings_error(
        "s3://b/k.csv.gz",
        [("Warning", 1366, "Incorrect integer value: 'x' for column `d`.`t`.`age` at row 3")],
        4,
        header_lines=1,
        column_types={"age": "int(11)"},
    )
    assert (err.source, err.line, err.column) == ("s3://b/k.csv.gz", 4, "age")
    assert "and 3 more warnings" in err.reason
    assert str(err).startswith("s3://b/k.csv.gz, line 4, column age: Incorrect integer value")
    assert "expected a value that fits age int(11)" in str(err)
    short = warnings_error(
        "s3://b/k",
        [
            (
                "Warning",
                1292,
                "Truncated incorrect INTEGER value: 'bulkload: row has too few fields'",
            )
        ],
        1,
    )
    assert short.reason == "the row has fewer fields than the columns loaded"


def test_parse_key_lines_keeps_the_servers_exact_text() -> None:
    create = (
        "CREATE TABLE `t` (\n"
        "  `id` int(11) NOT NULL,\n"
        "  `name` varchar(50) DEFAULT NULL,\n"
        "  PRIMARY KEY (`id`),\n"
        "  UNIQUE KEY `uq``x` (`name`),\n"
        "  KEY `ix_prefix` (`name`(10),`id`) COMMENT 'it''s, here',\n"
        "  KEY `ix_inv` (`id`) /*!80000 INVISIBLE */,\n"
        "  FULLTEXT KEY `ft` (`name`),\n"
        "  CONSTRAINT `fk` FOREIGN KEY (`id`) REFERENCES `p` (`id`)\n"
        ") ENGINE=InnoDB"
    )
    assert parse_key_lines(create) == {
        "PRIMARY": "PRIMARY KEY (`id`)",
        "uq`x": "UNIQUE KEY `uq``x` (`name`)",
        "ix_prefix": "KEY `ix_prefix` (`name`(10),`id`) COMMENT 'it''s, here'",
        "ix_inv": "KEY `ix_inv` (`id`) /*!80000 INVISIBLE */",
        "ft": "FULLTEXT KEY `ft` (`name`)",
    }


def test_lock_names_fit_mysql_and_differ_per_table_and_chunk() -> None:
    a = chunk_lock_name("db.t", "run/00001.csv.gz")
    assert len(a) <= 64
    assert a != chunk_lock_name("db.t", "run/00002.csv.gz")
    assert a != chunk_lock_name("db.u", "run/00001.csv.gz")


def test_dialect_for_mysql_takes_a_state_database() -> None:
    dialect = dialect_for("mysql", state_schema="ops")
    assert isinstance(dialect, MySqlDialect)
    assert dialect.state_database == "ops"
    assert dialect.server_side_methods == ("aurora_s3",)
    with pytest.raises(InvalidIdentifierError):
        MySqlDialect(state_database="bad\0name")


def test_staged_null_marker_loads_straight_into_columns() -> None:
    from airflow_bulkload.dialects.mysql.load_sql import load_columns_sql
    from airflow_bulkload.staging import STAGED_FORMAT

    cols = load_columns_sql(["id", "note"], FileFormat.from_dict(STAGED_FORMAT))
    assert cols.column_list == "(`id`, `note`)"
    assert cols.set_clause == ""


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (1205, "Lock wait timeout exceeded; try restarting transaction"),
        (1213, "Deadlock found when trying to get lock; try restarting transaction"),
        (2013, "Lost connection to server during query"),
        (2006, "Server has gone away"),
    ],
)
def test_an_interrupted_load_is_retried_not_failed_as_bad_input(code: int, message: str) -> None:
    """A ChunkLoadError fails the task at once; a lock wait or a lost connection is no bad row."""
    error = _driver_error("s3://b/c.csv.gz", OperationalError(code, message), FileFormat())
    assert not isinstance(error, ChunkLoadError)
    assert isinstance(error, BulkLoadError)
    assert "s3://b/c.csv.gz" in str(error) and f"MySQL {code}" in str(error)


def test_a_refused_row_is_still_bad_input() -> None:
    exc = OperationalError(1366, "Incorrect integer value: 'x' for column `t`.`a` at row 3")
    error = _driver_error("s3://b/c.csv.gz", exc, FileFormat(header=True))
    assert isinstance(error, ChunkLoadError)
    assert (error.line, error.column) == (4, "a")


def test_an_error_with_odd_arguments_is_still_named_not_a_crash() -> None:
    assert isinstance(_driver_error("s", Exception(["x"]), FileFormat()), ChunkLoadError)
    assert isinstance(_driver_error("s", Exception("1205"), FileFormat()), ChunkLoadError)


def test_a_connection_lost_while_the_chunk_streams_is_retryable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The client closes the FIFO when the connection dies, so the writer's broken pipe comes
    too: the lost connection (retry) must win over the writer's "stopped reading" (bad input)."""
    monkeypatch.setattr(MySqlDialect, "load_columns", lambda self, conn, table: [("id", "int")])
    monkeypatch.setattr(
        MySqlDialect, "_keep_foreign_key_checks_if_needed", lambda self, conn, table: None
    )

    class LosingCursor:
        def execute(self, sql: str, params: object = None) -> None:
            match = re.search(r"INFILE '([^']+)'", sql)
            assert match is not None
            fd = os.open(match.group(1), os.O_RDONLY)
            os.read(fd, 10)
            os.close(fd)
            time.sleep(0.3)
            raise OperationalError(2013, "Lost connection to server during query")

        def close(self) -> None:
            pass

        def __enter__(self) -> LosingCursor:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

    conn = types.SimpleNamespace(cursor=LosingCursor)
    body = b"".join(b"%d\n" % i for i in range(300_000))
    stream = ChunkStream(io.BytesIO(body), "s3://b/k")
    into = LoadInto(TableRef("t", "db"), None, FileFormat())
    with pytest.raises(BulkLoadError) as info:
        MySqlDialect().load_stream(conn, into, stream, "s3://b/k")
    assert not isinstance(info.value, ChunkLoadError), str(info.value)
    assert "MySQL 2013" in str(info.value)
