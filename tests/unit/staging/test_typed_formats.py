"""Parquet / JSON Lines schemas checked against the table, and how each value is written."""

from __future__ import annotations

import pytest

from airflow_bulkload.staging.typed_formats import TypedInputError, check_schemas, text_select

PG = {"id": "bigint", "at": "timestamp without time zone", "ok": "boolean", "t": "text"}
MYSQL = {"id": "bigint(20)", "at": "datetime(6)", "ok": "tinyint(1)", "t": "varchar(40)"}


def test_files_may_order_the_same_columns_differently() -> None:
    schemas = {"a": [("id", "BIGINT"), ("t", "VARCHAR")], "b": [("t", "VARCHAR"), ("id", "BIGINT")]}
    assert check_schemas(schemas, PG) == [("id", "BIGINT"), ("t", "VARCHAR")]
    assert check_schemas(schemas, {}) == [("id", "BIGINT"), ("t", "VARCHAR")]  # table unknown


@pytest.mark.parametrize(
    ("columns", "table", "says"),
    [
        ([("id", "STRUCT(a INTEGER)")], PG, "a: column 'id' is STRUCT"),
        ([("id", "INTEGER[]")], PG, r"INTEGER\[\]"),
        ([("id", "MAP(VARCHAR, INTEGER)")], PG, "is MAP"),
        ([("id", "BLOB")], PG, "is BLOB"),
        ([("nope", "BIGINT")], PG, "'nope' is not a column of the table"),
        ([("at", "TIMESTAMP WITH TIME ZONE")], PG, "holds no time zone"),
        ([("at", "TIMESTAMP WITH TIME ZONE")], MYSQL, "datetime"),
    ],
)
def test_what_no_load_takes_is_refused_naming_file_and_column(
    columns: list[tuple[str, str]], table: dict[str, str], says: str
) -> None:
    with pytest.raises(TypedInputError, match=says):
        check_schemas({"a": columns}, table)


def test_a_zoned_timestamp_goes_into_a_zoned_column() -> None:
    zoned = {"at": "timestamp with time zone"}
    assert check_schemas({"a": [("at", "TIMESTAMP WITH TIME ZONE")]}, zoned)


def test_booleans_are_one_and_zero_except_for_boolean_and_text_columns() -> None:
    columns = [("ok", "BOOLEAN"), ("t", "BOOLEAN")]
    assert text_select(columns, PG, read_as_text=False) == (
        'CAST("ok" AS VARCHAR) AS "ok", CAST("t" AS VARCHAR) AS "t"'
    )
    mysql = text_select(columns, MYSQL, read_as_text=False)
    assert mysql.startswith("""CASE WHEN "ok" THEN '1' WHEN NOT "ok" THEN '0' END AS "ok", """)
    assert mysql.endswith('CAST("t" AS VARCHAR) AS "t"')
