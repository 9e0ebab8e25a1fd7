"""MySQL ``LOAD DATA`` statements, built from a table, its columns and a file format (pure)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.mysql.quoting import (
    bytes_literal,
    mysql_charset,
    quote_identifier,
    quote_table,
    string_literal,
)
from airflow_bulkload.exceptions import ChunkLoadError, InvalidFileFormatError
from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.manifest import FileFormat

#: the marker the too-few-fields guard puts into MySQL's warning text (see load_data_sql)
TOO_FEW_FIELDS_MARKER = "bulkload: row has too few fields"


@dataclass(frozen=True)
class LoadColumns:
    """The column list and SET clause of a ``LOAD DATA`` statement."""

    column_list: str
    set_clause: str


def load_columns_sql(columns: Sequence[str], fmt: FileFormat) -> LoadColumns:
    r"""Column list (and SET clause when NULL markers need mapping) for ``columns`` in file order.

    MySQL reads ``\N`` as NULL when ``ESCAPED BY '\'``; any other NULL marker (the csv default is
    the empty field) is read into a user variable and mapped with ``NULLIF``. MySQL silently sets
    a *missing* user variable to NULL (no "too few fields" warning as for real columns), so the
    last variable is guarded: if it is NULL the row was short, and the guard raises a warning whose
    text carries :data:`TOO_FEW_FIELDS_MARKER` (that warning has no row number, so the error
    names the chunk but no line). With ``null="NULL"`` (staging's marker) csv loads need no
    variables: MySQL reads an unquoted NULL field as SQL NULL itself.
    """
    if not columns:
        raise InvalidFileFormatError("no columns to load")
    escape = _escape_char(fmt)
    null = fmt.effective_null
    # Two markers MySQL reads as SQL NULL by itself: \\N when backslash escapes, and an unquoted
    # NULL when fields may be enclosed (a quoted "NULL" stays text) -- staging's marker. Loading
    # straight into the columns keeps MySQL's own "doesn't contain data for all columns" warning,
    # with its row number, for short rows.
    native_null = (escape == "\\" and null == "\\N") or (fmt.format == "csv" and null == "NULL")
    if native_null:
        return LoadColumns(
            "(" + ", ".join(quote_identifier(c, "column name") for c in columns) + ")", ""
        )
    variables = [f"@bl{i}" for i in range(1, len(columns) + 1)]
    null_sql = bytes_literal(null, fmt.python_encoding)
    assignments = []
    for position, (column, variable) in enumerate(zip(columns, variables, strict=True)):
        value = f"NULLIF({variable}, {null_sql})"
        if position == len(columns) - 1:
            value = f"IF({variable} IS NULL, CAST('{TOO_FEW_FIELDS_MARKER}' AS SIGNED), {value})"
        assignments.append(f"{quote_identifier(column, 'column name')} = {value}")
    return LoadColumns("(" + ", ".join(variables) + ")", "SET " + ", ".join(assignments))


def _escape_char(fmt: FileFormat) -> str:
    if fmt.format == "csv":
        # csv doubles the quote inside quoted fields; MySQL reads "" that way when ESCAPED BY ''.
        return fmt.escape if fmt.escape is not None and fmt.escape != fmt.quote else ""
    return fmt.escape if fmt.escape is not None else "\\"


def format_clauses_sql(fmt: FileFormat) -> str:
    """``CHARACTER SET ... FIELDS ... LINES ... [IGNORE 1 LINES]`` for a :class:`FileFormat`.

    Lines end in LF (staging writes LF). ``IGNORE 1 LINES`` counts physical lines, so a header
    must not hold a quoted newline.
    """
    enc = fmt.python_encoding
    parts = [
        f"CHARACTER SET {mysql_charset(fmt.encoding)}",
        f"FIELDS TERMINATED BY {bytes_literal(fmt.delimiter, enc)}",
    ]
    if fmt.format == "csv":
        parts.append(f"OPTIONALLY ENCLOSED BY {bytes_literal(fmt.quote, enc)}")
    parts.append(f"ESCAPED BY {bytes_literal(_escape_char(fmt), enc)}")
    parts.append("LINES TERMINATED BY X'0A'")
    if fmt.header:
        parts.append("IGNORE 1 LINES")
    return " ".join(parts)


def load_data_sql(head: str, table: TableRef, columns: Sequence[str], fmt: FileFormat) -> str:
    """A complete ``LOAD DATA`` statement after ``head``.

    ``head`` is ``LOAD DATA LOCAL INFILE '...'`` or ``LOAD DATA FROM S3 FILE '...'``.
    """
    cols = load_columns_sql(columns, fmt)
    sql = f"{head} INTO TABLE {quote_table(table)} {format_clauses_sql(fmt)} {cols.column_list}"
    return f"{sql} {cols.set_clause}" if cols.set_clause else sql


def local_infile_sql(path: str, table: TableRef, columns: Sequence[str], fmt: FileFormat) -> str:
    """``LOAD DATA LOCAL INFILE`` from a client-side path (our FIFO)."""
    return load_data_sql(
        f"LOAD DATA LOCAL INFILE {string_literal(path, 'file name')}", table, columns, fmt
    )


AuroraSource = Literal["FILE", "PREFIX", "MANIFEST"]


def aurora_s3_uri(uri: str, region: str | None = None) -> str:
    """``s3://bucket/key`` in Aurora's form.

    ``s3-<region>://bucket/key`` when the region is given (Aurora then reads a bucket in another
    region too).
    """
    bucket, key = parse_s3_uri(uri)
    if region:
        if not re.fullmatch(r"[a-z]{2}(-[a-z0-9]+)+-\d+", region):
            raise InvalidFileFormatError(f"not an AWS region name: {region!r}")
        return f"s3-{region}://{bucket}/{key}"
    return f"s3://{bucket}/{key}"


def aurora_load_sql(
    source: AuroraSource,
    uri: str,
    table: TableRef,
    columns: Sequence[str],
    fmt: FileFormat,
    *,
    region: str | None = None,
) -> str:
    """Aurora MySQL ``LOAD DATA FROM S3 {FILE | PREFIX | MANIFEST} 's3-region://...'``.

    ``FILE`` loads one object, ``PREFIX`` every object under a key prefix, ``MANIFEST`` the
    objects listed in an Aurora manifest (see :func:`aurora_manifest_json`). Aurora cannot read
    gzip: a ``.gz`` key is refused here. Does not run on MariaDB or community MySQL.
    """
    if source not in ("FILE", "PREFIX", "MANIFEST"):
        raise ValueError(f"source must be FILE, PREFIX or MANIFEST, got {source!r}")
    if source != "PREFIX" and parse_s3_uri(uri)[1].lower().endswith(".gz"):
        raise ChunkLoadError(
            uri,
            "Aurora MySQL LOAD DATA FROM S3 cannot read gzip objects",
            expected="an uncompressed chunk: stage with compression='none' for method aurora_s3",
        )
    target = string_literal(aurora_s3_uri(uri, region), "S3 URI")
    return load_data_sql(f"LOAD DATA FROM S3 {source} {target}", table, columns, fmt)


def aurora_manifest_json(uris: Sequence[str], *, mandatory: bool = True) -> str:
    """The body of an Aurora ``LOAD DATA FROM S3 MANIFEST`` file for these objects."""
    return json.dumps({"entries": [{"url": u, "mandatory": mandatory} for u in uris]}, indent=1)
