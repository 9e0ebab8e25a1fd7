"""PostgreSQL SQL generation and error parsing, without a server."""

from __future__ import annotations

import pytest

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.postgres import PostgresDialect
from airflow_bulkload.dialects.postgres.errors import parse_copy_context
from airflow_bulkload.dialects.postgres.ledger import chunk_lock_key
from airflow_bulkload.dialects.postgres.load import (
    copy_from_stdin,
    copy_options,
    parse_imported_rows,
)
from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.manifest import FileFormat


def test_csv_copy_options_spell_out_every_setting() -> None:
    text = copy_options(FileFormat()).as_string(None)
    assert text == (
        "(FORMAT csv, DELIMITER ',', NULL '', QUOTE '\"', ESCAPE '\"', HEADER false,"
        " ENCODING 'UTF8')"
    )


def test_text_format_leaves_out_csv_only_options() -> None:
    # without a connection psycopg writes backslashes as E'' strings (with a leading space)
    options = FileFormat(format="text", delimiter="\t", header=True)
    text = copy_options(options).as_string(None).replace("  E'", " E'")
    assert text.startswith("(FORMAT text, DELIMITER '\t', NULL E'\\\\N', HEADER true")
    assert "QUOTE" not in text and "ESCAPE" not in text


def test_option_values_are_quoted_literals() -> None:
    options = FileFormat(quote="'", null="it's NULL", escape="\\")
    text = copy_options(options).as_string(None).replace("  E'", " E'")
    assert "QUOTE ''''" in text
    assert "NULL 'it''s NULL'" in text
    assert "ESCAPE E'\\\\'" in text


def test_copy_statement_quotes_hostile_names() -> None:
    table = TableRef('x"; DROP TABLE victim; --', "public")
    text = copy_from_stdin(table, ["a,b", 'c"'], FileFormat()).as_string(None)
    assert text.startswith(
        'COPY "public"."x""; DROP TABLE victim; --" ("a,b", "c""") FROM STDIN WITH (FORMAT csv'
    )


def test_import_call_passes_everything_as_parameters() -> None:
    statement, params = PostgresDialect().import_from_s3_call(
        None, TableRef("we'ird", "s"), ["id", "Name"], FileFormat(), "bkt", "k/0.gz", "eu-west-1"
    )
    assert statement.as_string(None) == (
        "SELECT aws_s3.table_import_from_s3("
        "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text)"
    )
    assert params[:2] == ('"s"."we\'ird"', '"id", "Name"')
    assert params[2].startswith("(FORMAT csv, DELIMITER ','")
    assert params[3:] == ("bkt", "k/0.gz", "eu-west-1")


@pytest.mark.parametrize(
    ("context", "line", "column"),
    [
        ('COPY items, line 3, column price: "cheap"', 3, "price"),
        ('COPY items, line 2: "2,b,2,extra"', 2, None),
        ("COPY items, line 4", 4, None),
        ('COPY "odd, line 9", line 5, column x: "1"', 5, "x"),
        (
            'COPY t, line 7, column n: "z"\nSQL statement "COPY t FROM PROGRAM ..."\n'
            "PL/pgSQL function aws_s3.table_import_from_s3(text,text,text,text,text,text)",
            7,
            "n",
        ),
        ("PL/pgSQL function f() line 3 at EXECUTE", None, None),
        (None, None, None),
    ],
)
def test_copy_context_gives_line_and_column(
    context: str | None, line: int | None, column: str | None
) -> None:
    assert parse_copy_context(context) == (line, column)


def test_imported_rows_are_read_from_the_aws_s3_result() -> None:
    assert parse_imported_rows('3 rows imported into relation "t" from file k of 24 bytes') == 3
    assert parse_imported_rows("1 row imported into relation t") == 1
    with pytest.raises(BulkLoadError, match="expected"):
        parse_imported_rows("something else")


def test_chunk_lock_key_is_stable_and_fits_a_bigint() -> None:
    key = chunk_lock_key("public.t", "run/0.gz")
    assert key == chunk_lock_key("public.t", "run/0.gz")
    assert key != chunk_lock_key("public.t", "run/1.gz")
    assert -(2**63) <= key < 2**63


def test_dialect_identity() -> None:
    dialect = PostgresDialect()
    assert (dialect.name, dialect.max_identifier_length, dialect.server_side_methods) == (
        "postgres",
        63,
        ("rds_s3",),
    )
