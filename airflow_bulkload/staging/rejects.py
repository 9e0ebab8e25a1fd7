"""Rows set aside while staging (``max_errors``): DuckDB's rejects tables, checked and written out.

With ``max_errors`` above 0, staging reads CSV input with DuckDB's ``ignore_errors`` and
``store_rejects``: a record with too few or too many fields, or bytes that are not the input's
encoding, is left out of the chunks and kept in a rejects table with its file, line, column and
reason. Over ``max_errors`` such rows, staging fails before any chunk is written, naming the first
ones. A quote that never closes is never set aside: it would swallow every line after it, so
it fails staging like any other unreadable input.

Values are checked where every engine agrees on what a column takes (:func:`check_type`): a value
of an integer column that is not an integer, or of a numeric column that is not a number, sets its
record aside too (a first read with those columns typed fills the rejects tables; the staged read
keeps the text as written and leaves out the same records). Other values (dates, booleans, text
too long) are the server's to judge: such a value still fails its chunk's load, as with
``max_errors=0``.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
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


_INTEGER = re.compile(r"^(tiny|small|medium|big)?int(eger)?[248]?\b|^(small|big)?serial\b")
_NUMBER = re.compile(r"^(numeric|decimal|dec|fixed|real|float[48]?|double)\b")


def check_type(engine_type: str) -> str | None:
    """The DuckDB type a value of ``engine_type`` must convert to; ``None``: not checked.

    Loose on purpose: only a value the server would refuse too is set aside (``1.5`` passes an
    integer check and fails its load; ``abc`` and a quoted empty string are set aside).
    """
    text = engine_type.strip().lower()
    if _INTEGER.match(text):
        return "HUGEINT"
    if _NUMBER.match(text):
        return "DOUBLE"
    return None


def type_checks(columns: Sequence[str], table_types: Mapping[str, str]) -> dict[str, str]:
    """The input's columns whose values are checked, with the DuckDB type each must convert to."""
    checks = {c: check_type(table_types[c]) for c in columns if c in table_types}
    return {c: t for c, t in checks.items() if t is not None}


class TooManyRejectsError(ValueError):
    """More records than ``max_errors`` do not read as the input's format."""


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _rejects_query(names: Mapping[str, str]) -> str:
    """One row per record set aside (DuckDB keeps one per error), in file and line order.

    Each names the input file as the user named it.
    """
    mapping = (
        " UNION ALL ".join(
            f"SELECT {_literal(local)} AS local_path, {_literal(source)} AS source"
            for local, source in names.items()
        )
        or "SELECT NULL AS local_path, NULL AS source"
    )
    return (
        'SELECT coalesce(m.source, s.file_path) AS "source", r.line AS "line", '  # noqa: S608
        "string_agg(DISTINCT r.column_name, ', ') AS \"column\", "
        "string_agg(DISTINCT CAST(r.error_type AS VARCHAR), ', ') AS \"error\", "
        "string_agg(DISTINCT r.error_message, '; ') AS \"message\", "
        # DuckDB's copy of the record: a line end before it is the previous record's
        'ltrim(first(r.csv_line), chr(13) || chr(10)) AS "record", '
        's.file_path AS "local_path", min(r.line_byte_position) AS "line_start" '
        "FROM bulkload_rejects r JOIN bulkload_reject_scans s USING (scan_id, file_id) "
        f"LEFT JOIN ({mapping}) m ON m.local_path = s.file_path "
        'GROUP BY r.scan_id, r.file_id, r.line, m.source, s.file_path ORDER BY "source", "line"'
    )


def _describe(row: tuple[Any, ...]) -> str:
    source, line, column, error, message = row[:5]
    where = f"{source}, line {line}" + (f", column {column}" if column else "")
    return f"{where}: {error} ({message})"


def check_and_write(
    con: Any, names: Mapping[str, str], max_errors: int, out_path: Path, encoding: str = "utf-8"
) -> int:
    """Count the records set aside; fail over ``max_errors`` or on a fatal one; else write them.

    ``names`` maps local file names to what the user called them. Returns how many were set
    aside (written to ``out_path`` as CSV with a header, only when there are any).
    """
    query = _rejects_query(names)
    [(count,)] = con.execute(f"SELECT count(*) FROM ({query})").fetchall()  # noqa: S608
    fatal_errors = list(FATAL_ERRORS)
    fatal = con.execute(
        f"SELECT * FROM ({query}) "  # noqa: S608
        f"WHERE list_has_any(string_split(\"error\", ', '), {fatal_errors!r}) LIMIT 1"
    ).fetchall()
    if fatal:
        fatal = _as_in_the_file(fatal, encoding)
        raise TooManyRejectsError(
            f"{_describe(fatal[0])}: a quoted value that never closes is not set aside (every "
            "line after it would go with it); fix the file"
        )
    if count > max_errors:
        first = _as_in_the_file(con.execute(f"{query} LIMIT 5").fetchall(), encoding)
        raise TooManyRejectsError(
            f"{count} records do not read as the input's format (or hold a value their column "
            f"cannot take), more than max_errors "
            f"({max_errors}); nothing was staged. First: "
            + "; ".join(_describe(row) for row in first)
        )
    if count:
        rows = con.execute(query).fetchall()
        with out_path.open("w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(REJECT_COLUMNS)
            writer.writerows(row[:6] for row in _as_in_the_file(rows, encoding))
    return int(count)


def _as_in_the_file(rows: list[tuple[Any, ...]], encoding: str) -> list[tuple[Any, ...]]:
    """Each reject's line number and record text read from its file at the byte DuckDB names.

    DuckDB's own ``line`` counts records (a quoted value over two lines counts one) and its copy
    of the record loses bytes; its byte position is exact. UTF-8 files only (the default): other
    encodings keep DuckDB's values.
    """
    if encoding != "utf-8":
        return rows
    by_file: dict[str, list[int]] = {}
    for row in rows:
        by_file.setdefault(row[6], []).append(row[7])
    places = {path: _places(Path(path), sorted(set(starts))) for path, starts in by_file.items()}
    fixed = []
    for row in rows:
        line, text = places[row[6]].get(row[7], (row[1], row[5]))
        fixed.append((row[0], line, row[2], row[3], row[4], text, *row[6:]))
    return fixed


def _places(path: Path, starts: list[int]) -> dict[int, tuple[int, str]]:
    """(line number, the line's text) of the line holding each byte offset in ``starts``."""
    from airflow_bulkload.compression import decompressed

    found: dict[int, tuple[int, str]] = {}
    pending = iter(starts)
    target = next(pending, None)
    waiting: list[int] = []  # offsets in blank lines: DuckDB's record starts at the blank lines
    offset = 0
    with path.open("rb") as raw, decompressed(raw) as text:
        for number, line in enumerate(iter(text.readline, b""), start=1):
            end = offset + len(line)
            while target is not None and target < end:
                waiting.append(target)
                target = next(pending, None)
            content = line.rstrip(b"\r\n")
            if content and waiting:
                for start in waiting:
                    found[start] = (number, content.decode("utf-8", "replace"))
                waiting = []
            if target is None and not waiting:
                break
            offset = end
    return found


def check_header_decodes(path: Path, fmt: Any, where: str) -> None:
    """Refuse a UTF-8 header line that is not UTF-8.

    Set aside, the header would be replaced by the first record, whose values would name the
    columns. (Latin-1 decodes any byte; UTF-16 lines do not split at a byte.)
    """
    from airflow_bulkload.compression import decompressed

    if fmt.python_encoding != "utf-8":
        return
    with path.open("rb") as raw:
        first = decompressed(raw).readline(8 * 1024 * 1024)
    try:
        first.decode(fmt.python_encoding)
    except UnicodeDecodeError as exc:
        raise TooManyRejectsError(
            f"{where}, line 1: the header is not {fmt.encoding} ({exc.reason} at byte {exc.start}); "
            "a header is never set aside"
        ) from exc
