"""Rows set aside while staging (``max_errors``): DuckDB's rejects tables, checked and written out.

With ``max_errors`` above 0, staging reads CSV input with DuckDB's ``ignore_errors`` and
``store_rejects``: a record with too few or too many fields, or bytes that are not the input's
encoding, is left out of the chunks and kept in a rejects table with its file, line, column and
reason. Over ``max_errors`` such rows, staging fails before any chunk is written, naming the first
ones. A quote that never closes is never set aside: it would swallow every line after it, so
it fails staging like any other unreadable input. Values are not checked here: a value its
column does not take still fails its chunk's load, as with ``max_errors=0``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: the read_csv options that set bad records aside instead of failing the read
READ_OPTIONS = {
    "ignore_errors": "true",
    "store_rejects": "true",
    "rejects_table": "'bulkload_rejects'",
    "rejects_scan": "'bulkload_reject_scans'",
}
#: errors that are never set aside: the record's end is unknown, so later lines would go too
FATAL_ERRORS = ("UNQUOTED VALUE", "INVALID STATE")
#: the columns of a rejects file
REJECT_COLUMNS = ("source", "line", "column", "error", "message", "record")


class TooManyRejectsError(ValueError):
    """More records than ``max_errors`` do not read as the input's format."""


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _rejects_query(names: Mapping[str, str]) -> str:
    """The rejects, each with the input file as the user named it, in file and line order."""
    mapping = (
        " UNION ALL ".join(
            f"SELECT {_literal(local)} AS local_path, {_literal(source)} AS source"
            for local, source in names.items()
        )
        or "SELECT NULL AS local_path, NULL AS source"
    )
    return (
        'SELECT coalesce(m.source, s.file_path) AS "source", r.line AS "line", '  # noqa: S608
        'r.column_name AS "column", CAST(r.error_type AS VARCHAR) AS "error", '
        'r.error_message AS "message", r.csv_line AS "record" '
        "FROM bulkload_rejects r JOIN bulkload_reject_scans s USING (scan_id, file_id) "
        f'LEFT JOIN ({mapping}) m ON m.local_path = s.file_path ORDER BY "source", "line"'
    )


def _describe(row: tuple[Any, ...]) -> str:
    source, line, column, error, message, _ = row
    where = f"{source}, line {line}" + (f", column {column}" if column else "")
    return f"{where}: {error} ({message})"


def check_and_write(con: Any, names: Mapping[str, str], max_errors: int, out_path: Path) -> int:
    """Count the records set aside; fail over ``max_errors`` or on a fatal one; else write them.

    ``names`` maps local file names to what the user called them. Returns how many were set
    aside (written to ``out_path`` as CSV with a header, only when there are any).
    """
    query = _rejects_query(names)
    [(count,)] = con.execute(f"SELECT count(*) FROM ({query})").fetchall()  # noqa: S608
    fatal = con.execute(
        f'SELECT * FROM ({query}) WHERE "error" IN {FATAL_ERRORS!r} LIMIT 1'  # noqa: S608
    ).fetchall()
    if fatal:
        raise TooManyRejectsError(
            f"{_describe(fatal[0])}: a quoted value that never closes is not set aside (every "
            "line after it would go with it); fix the file"
        )
    if count > max_errors:
        first = con.execute(f"{query} LIMIT 5").fetchall()
        raise TooManyRejectsError(
            f"{count} records do not read as the input's format, more than max_errors "
            f"({max_errors}); nothing was staged. First: "
            + "; ".join(_describe(row) for row in first)
        )
    if count:
        con.execute(f"COPY ({query}) TO {_literal(str(out_path))} (FORMAT csv, HEADER true)")
    return int(count)
