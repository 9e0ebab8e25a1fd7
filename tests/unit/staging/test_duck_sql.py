"""Quoting of the DuckDB SQL staging runs: names and values from the input are never pasted."""

from __future__ import annotations

import duckdb
import pytest

from airflow_bulkload.exceptions import InvalidFileFormatError
from airflow_bulkload.staging.duck_sql import duck_ident, duck_literal, list_literal


@pytest.mark.parametrize("name", ["id", 'a"b', 'x"; DROP TABLE t; --', "naïve", " "])
def test_an_identifier_names_exactly_its_column(name: str) -> None:
    con = duckdb.connect()
    [(value,)] = con.execute(f"SELECT 1 AS {duck_ident(name)}").fetchall()
    assert value == 1
    assert con.execute(f"SELECT 1 AS {duck_ident(name)}").description[0][0] == name


@pytest.mark.parametrize("value", ["", "it's", "a'); SELECT 1; --", "\\N", "tab\there"])
def test_a_literal_and_a_list_are_exactly_their_values(value: str) -> None:
    con = duckdb.connect()
    assert con.execute(f"SELECT {duck_literal(value)}").fetchall() == [(value,)]
    assert con.execute(f"SELECT {list_literal([value, 'b'])}").fetchall() == [([value, "b"],)]


@pytest.mark.parametrize("bad", ["", "a\0b"])
def test_an_unusable_name_or_a_nul_byte_is_refused(bad: str) -> None:
    with pytest.raises(InvalidFileFormatError):
        duck_ident(bad)
    if bad:
        with pytest.raises(InvalidFileFormatError):
            duck_literal(bad)
