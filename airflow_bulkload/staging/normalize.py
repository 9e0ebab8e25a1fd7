"""DuckDB turns the input files into one file in the staged format, optionally sorted by a key.

Every column is read as text (``all_varchar``), so no value is changed by type inference; only
the sort expression casts the key columns to their type. DuckDB sorts larger-than-memory input by
spilling to ``temp_directory`` within ``memory_limit``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from airflow_bulkload.exceptions import BulkLoadError, InvalidFileFormatError
from airflow_bulkload.staging import rejects, typed_formats
from airflow_bulkload.staging.duck_sql import duck_ident, duck_literal, list_literal
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.origin import empty_header_line, first_line_is_empty, header_of
from airflow_bulkload.staging.planning import STAGED_FORMAT

#: DuckDB's CSV reader refuses longer records (its default is 2 MB). Its read buffer must hold a
#: record and defaults to 16x this, per file being read, so the buffer is set explicitly.
MAX_RECORD_BYTES = 8 * 1024 * 1024
READ_BUFFER_BYTES = 2 * MAX_RECORD_BYTES
_DUCKDB_ENCODINGS = {"utf-8": "utf-8", "utf8": "utf-8", "latin-1": "latin-1", "utf-16": "utf-16"}


class InputFormatError(BulkLoadError):
    """The input does not parse with the given format options, or a key value is not its type."""


@dataclass(frozen=True)
class NormalizeResult:
    columns: list[str]
    rows: int
    seconds: float
    #: records set aside (``max_errors``), written to the rejects file
    rejected: int = 0


def check_input_format(fmt: FileFormat) -> None:
    if fmt.self_describing:
        return
    if fmt.format != "csv":
        raise InvalidFileFormatError(
            f"staging reads csv (TSV is csv with delimiter '\\t'), parquet or jsonl input, not "
            f"format {fmt.format!r}"
        )
    if fmt.python_encoding not in _DUCKDB_ENCODINGS:
        raise InvalidFileFormatError(
            f"input encoding {fmt.encoding!r} is not supported for staging "
            f"(supported: {sorted(set(_DUCKDB_ENCODINGS.values()))})"
        )


def read_csv_sql(
    paths: Sequence[Path],
    fmt: FileFormat,
    columns: Sequence[str] | None,
    *,
    column_count: int | None = None,
    sniff: bool = False,
    with_filename: bool = False,
    set_aside: bool = False,
    skip_bad: bool = False,
    types: Mapping[str, str] | None = None,
) -> str:
    """The ``read_csv(...)`` table function for the inputs, every column as VARCHAR.

    ``set_aside``: records that do not read as ``fmt`` go to DuckDB's rejects tables
    (:mod:`~airflow_bulkload.staging.rejects`) instead of failing the read. ``types``: these
    columns are read as these DuckDB types instead (a value that does not convert is an error).
    """
    types = types or {}
    options = {
        "delim": duck_literal(fmt.delimiter),
        "quote": duck_literal(fmt.quote),
        "escape": duck_literal(fmt.effective_escape),
        "header": "true" if fmt.header else "false",
        "nullstr": duck_literal(fmt.effective_null),
        # a quoted value equal to the null string is text, as in PostgreSQL's CSV format
        "allow_quoted_nulls": "false",
        "all_varchar": "true",
        "encoding": duck_literal(_DUCKDB_ENCODINGS[fmt.python_encoding]),
        "compression": "'auto'",
        "skip": "0",
        "strict_mode": "true",
        "null_padding": "false",
        "ignore_errors": "false",
        "max_line_size": str(MAX_RECORD_BYTES),
        "buffer_size": str(READ_BUFFER_BYTES),
        "auto_detect": "true" if sniff else "false",
    }
    if not sniff:
        names = list(columns) if columns else [f"column{i}" for i in range(column_count or 0)]
        options["columns"] = (
            "{"
            + ", ".join(
                f"{duck_literal(n)}: {duck_literal(types.get(n, 'VARCHAR'))}" for n in names
            )
            + "}"
        )
        if types:
            options["all_varchar"] = "false"
    elif columns:
        options["names"] = list_literal(columns)
    if with_filename:
        options["filename"] = "true"
    # a sniff only reads names (and a second read only looks): a bad record must not stop them
    if skip_bad or (set_aside and sniff):
        options["ignore_errors"] = "true"
    elif set_aside:
        options |= rejects.READ_OPTIONS
    files = list_literal([str(p) for p in paths])
    return f"read_csv({files}, " + ", ".join(f"{k} = {v}" for k, v in options.items()) + ")"


def _unconvertible(column: str, duck_type: str) -> str:
    """True for a value of ``column`` that does not convert to ``duck_type`` (NULL converts)."""
    return f"({duck_ident(column)} IS NOT NULL AND TRY_CAST({duck_ident(column)} AS {duck_type}) IS NULL)"


def _count_readable(con: Any, typed_source: str, checks: Mapping[str, str]) -> int:
    """Read ``typed_source`` (checked columns typed) to its end; how many records convert.

    Records that do not go to the rejects tables. The checked columns are read, so DuckDB cannot
    skip their casts (a bare ``count(*)`` would not convert anything).
    """
    touched = ", ".join(f"count({duck_ident(c)})" for c in checks)
    # fetchall: the scan must finish for DuckDB to write its rejects tables
    rows = con.execute(f"SELECT count(*), {touched} FROM {typed_source}").fetchall()  # noqa: S608
    return int(rows[0][0]) if rows else 0


def _explain(exc: Exception, path_names: Mapping[str, str]) -> str:
    text = str(exc)
    for local, original in path_names.items():
        text = text.replace(local, original)
    return text


def normalize(
    paths: Sequence[Path],
    out_path: Path,
    fmt: FileFormat,
    *,
    columns: Sequence[str] | None = None,
    sort_key: Sequence[str] = (),
    sort_types: Sequence[str] = (),
    keep_order: bool = False,
    memory_limit: str = "1GB",
    threads: int | None = None,
    temp_dir: Path,
    path_names: Mapping[str, str] | None = None,
    table_types: Mapping[str, str] | None = None,
    max_errors: int = 0,
    rejects_path: Path | None = None,
) -> NormalizeResult:
    """Write the rows of ``paths`` to ``out_path`` in :data:`STAGED_FORMAT`, sorted when asked.

    ``keep_order`` writes the rows in the input's order (the files in the order given), for an
    input declared in key order; otherwise, unsorted, DuckDB may reorder them across threads.
    ``path_names`` maps local file names to what the user called them, for error messages;
    ``table_types`` the table's loadable columns to their types (Parquet / JSON Lines input is
    checked against them, see :mod:`~airflow_bulkload.staging.typed_formats`); ``max_errors``
    how many CSV records that do not read as ``fmt`` are set aside, written to ``rejects_path``
    (see :mod:`~airflow_bulkload.staging.rejects`).
    """
    import duckdb  # here, not at the top: DAG files and load tasks import this module, not DuckDB

    check_input_format(fmt)
    names = dict(path_names or {})
    started = time.monotonic()
    if not any(p.stat().st_size for p in paths):
        # nothing to read, not even a header: DuckDB would invent a column; say zero rows instead
        out_path.write_bytes(b"")
        return NormalizeResult(list(columns or []), 0, time.monotonic() - started)
    # no asynchronous I/O threads: with them DuckDB 2.0 can deadlock aborting a failed COPY ...
    # TO (AsyncFileWriter::AbortWrite); local files stage as fast without
    config: dict[str, str | bool | int | float | list[str]] = {
        "memory_limit": memory_limit,
        "temp_directory": str(temp_dir),
        "async_threads": 0,
    }
    con = duckdb.connect(config=config)
    try:
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        # order matters only when sorting or keeping a declared order; without it DuckDB streams
        # with less memory
        ordered = bool(sort_key) or keep_order
        con.execute(f"SET preserve_insertion_order = {'true' if ordered else 'false'}")
        checks: dict[str, str] = {}
        readable = 0
        if fmt.self_describing:
            if max_errors:
                raise InputFormatError(
                    f"max_errors sets aside CSV records that do not parse; {fmt.format} input is "
                    "read whole or refused"
                )
            detected, source = _typed_source(con, paths, fmt, columns, table_types or {}, names)
        else:
            if fmt.header:
                _refuse_empty_header_lines(paths, fmt, names)
            if max_errors and fmt.header:
                try:
                    for path in paths:
                        rejects.check_header_decodes(path, fmt, names.get(str(path), str(path)))
                except rejects.TooManyRejectsError as exc:
                    raise InputFormatError(str(exc)) from exc
            if max_errors and columns and not fmt.header:
                # the columns are known: a bad first record must not set the width (a sniff would)
                detected = list(columns)
            else:
                try:
                    sniffed = read_csv_sql(
                        paths, fmt, columns, sniff=True, set_aside=max_errors > 0
                    )
                    described = con.execute("DESCRIBE SELECT * FROM " + sniffed).fetchall()  # noqa: S608
                except duckdb.Error as exc:
                    raise InputFormatError(
                        f"cannot read the input: {_explain(exc, names)}"
                    ) from exc
                detected = [str(row[0]) for row in described]
            if columns and len(columns) != len(detected):
                raise InputFormatError(
                    f"columns names {len(columns)} columns but the input has {len(detected)}"
                )
            checks = rejects.type_checks(detected, table_types or {}) if max_errors else {}
            if checks:
                # a first read with the checked columns typed sets their bad values aside (with
                # line and column); the staged read keeps the text and leaves the same records out
                typed = _source_by_header(
                    con, paths, fmt, columns, detected, names, set_aside=True, types=checks
                )
                try:
                    readable = _count_readable(con, typed, checks)
                except duckdb.Error as exc:
                    raise InputFormatError(
                        f"cannot read the input: {_explain(exc, names)}"
                    ) from exc
                source = _source_by_header(con, paths, fmt, columns, detected, names, skip_bad=True)
                keep = " AND ".join(f"NOT {_unconvertible(c, t)}" for c, t in checks.items())
                source = f"(SELECT * FROM {source} WHERE {keep})"  # noqa: S608
            else:
                source = _source_by_header(
                    con, paths, fmt, columns, detected, names, set_aside=max_errors > 0
                )
        missing = [k for k in sort_key if k not in detected]
        if missing:
            raise InputFormatError(
                f"sort key column(s) {missing} are not in the input's columns {detected}"
            )
        order = ""
        if sort_key:
            order = " ORDER BY " + ", ".join(
                f"CAST({duck_ident(k)} AS {t}) ASC NULLS LAST"
                for k, t in zip(sort_key, sort_types, strict=True)
            )
        out = STAGED_FORMAT
        # one column: a value \. would be a line alone, PostgreSQL's COPY's end of data
        # (quoted, it is text; a NULL stays the bare word)
        force_quote = ", FORCE_QUOTE *" if len(detected) == 1 else ""
        copy = (
            f"COPY (SELECT * FROM {source}{order}) TO {duck_literal(str(out_path))} "  # noqa: S608
            f"(FORMAT csv, HEADER false, DELIMITER {duck_literal(out.delimiter)}, "
            f"QUOTE {duck_literal(out.quote)}, ESCAPE {duck_literal(out.effective_escape)}, "
            f"NULLSTR {duck_literal(out.effective_null)}{force_quote})"
        )
        try:
            result = con.execute(copy).fetchone()
        except duckdb.ConversionException as exc:
            if fmt.self_describing:
                raise InputFormatError(f"cannot read the input: {_explain(exc, names)}") from exc
            raise _bad_key_error(
                con, paths, fmt, detected, sort_key, sort_types, names, skip_bad=max_errors > 0
            ) from exc
        except duckdb.Error as exc:
            raise InputFormatError(f"cannot read the input: {_explain(exc, names)}") from exc
        rows = int(result[0]) if result else 0
        if checks and rows != readable:
            raise InputFormatError(
                f"staging's value checks kept {rows} records where DuckDB's typed read of the "
                f"same input kept {readable}: nothing was staged; load with max_errors=0 (every "
                "value then goes to the server as written)"
            )
        rejected = 0
        if max_errors > 0:
            try:
                rejected = rejects.check_and_write(
                    con,
                    names,
                    max_errors,
                    rejects_path or out_path.with_suffix(".rejects.csv"),
                    fmt.python_encoding,
                )
            except rejects.TooManyRejectsError as exc:
                raise InputFormatError(str(exc)) from exc
        return NormalizeResult(detected, rows, time.monotonic() - started, rejected)
    finally:
        con.close()


def _typed_source(
    con: Any,
    paths: Sequence[Path],
    fmt: FileFormat,
    columns: Sequence[str] | None,
    table_types: Mapping[str, str],
    names: Mapping[str, str],
) -> tuple[list[str], str]:
    """Parquet / JSON Lines: the input's columns and the query writing them as text, checked."""
    import duckdb

    if columns:
        raise InputFormatError(
            f"{fmt.format} files name their own columns: leave columns= out (it renames CSV "
            "columns by position)"
        )
    if fmt.format == "jsonl" and fmt.python_encoding != "utf-8":
        raise InputFormatError(
            f"JSON Lines input is UTF-8 (RFC 8259): encoding {fmt.encoding!r} does not apply"
        )
    con.execute("SET TimeZone = 'UTC'")  # timestamps with a zone are written in UTC
    readable = [p for p in paths if typed_formats.holds_records(p, fmt)]
    schemas = {}
    for path in readable:
        where = names.get(str(path), str(path))
        try:
            schemas[where] = typed_formats.describe(con, path, fmt)
        except duckdb.Error as exc:
            raise InputFormatError(f"{where}: cannot read it as {fmt.format}: {exc}") from exc
    if not schemas:
        return [], "(SELECT 1 WHERE false)"
    try:
        typed = typed_formats.check_schemas(
            schemas, table_types, same_columns=fmt.format == "parquet"
        )
    except typed_formats.TypedInputError as exc:
        raise InputFormatError(str(exc)) from exc
    detected = [name for name, _ in typed]
    read_as_text = fmt.format == "jsonl"
    read = typed_formats.read_sql(readable, fmt, detected if read_as_text else ())
    select = typed_formats.text_select(typed, table_types, read_as_text=read_as_text)
    return detected, f"(SELECT {select} FROM {read})"  # noqa: S608


def _file_header(
    con: Any, path: Path, fmt: FileFormat, names: Mapping[str, str], set_aside: bool = False
) -> list[str]:
    import duckdb

    try:
        sniffed = read_csv_sql([path], fmt, None, sniff=True, set_aside=set_aside)
        described = con.execute("DESCRIBE SELECT * FROM " + sniffed).fetchall()  # noqa: S608
    except duckdb.Error as exc:
        raise InputFormatError(f"cannot read the input: {_explain(exc, names)}") from exc
    return [str(row[0]) for row in described]


def _refuse_empty_header_lines(
    paths: Sequence[Path], fmt: FileFormat, names: Mapping[str, str]
) -> None:
    for path in paths:
        with path.open("rb") as raw:
            if first_line_is_empty(raw, fmt):
                raise InputFormatError(empty_header_line(names.get(str(path), str(path))))


def _refuse_repeated_names(path: Path, fmt: FileFormat, names: Mapping[str, str]) -> None:
    """A header naming a column twice cannot be mapped by name (DuckDB would invent a name)."""
    with path.open("rb") as raw:
        header = header_of(raw, fmt)
    check_header(names.get(str(path), str(path)), header, None)


def check_header(where: str, header: Sequence[str], columns: Sequence[str] | None) -> None:
    """Refuse a header that cannot be mapped by name.

    That is a name given twice, or a ``columns`` list that names one of its columns at another
    position (``columns`` renames by position).
    """
    repeated = sorted({name for name in header if list(header).count(name) > 1})
    if repeated:
        raise InputFormatError(
            f"{where}: the header names column(s) {repeated} more than once ({list(header)}): "
            "columns are mapped by name, so each name must be unique; rename them in the file"
        )
    swapped = [
        c
        for c in columns or ()
        if c in header and list(columns or ()).index(c) != list(header).index(c)
    ]
    if swapped:
        raise InputFormatError(
            f"columns={list(columns or ())} contradicts the header of {where} ({list(header)}): "
            f"{swapped} stand at other positions there. columns renames the header's columns by "
            "position; leave it out to map the header by name"
        )


def _source_by_header(
    con: Any,
    paths: Sequence[Path],
    fmt: FileFormat,
    columns: Sequence[str] | None,
    detected: Sequence[str],
    names: Mapping[str, str],
    *,
    set_aside: bool = False,
    skip_bad: bool = False,
    types: Mapping[str, str] | None = None,
) -> str:
    """The rows of every file, each mapped by its own header onto the first file's column order.

    Files whose headers name other columns are refused, naming both files; ``columns`` renames
    the header's columns by position, so a ``columns`` list that names a header column at another
    position (a swap) is refused rather than silently exchanging the two.
    """
    how: dict[str, Any] = {"set_aside": set_aside, "skip_bad": skip_bad, "types": types}
    if not fmt.header:
        return read_csv_sql(paths, fmt, columns or detected, **how)
    for path in paths:
        _refuse_repeated_names(path, fmt, names)
    headers = {
        path: _file_header(con, path, fmt, names, set_aside or skip_bad)
        for path in paths
        if path.stat().st_size
    }
    if not headers:
        return read_csv_sql(paths, fmt, columns or detected, **how)
    first_path, first = next(iter(headers.items()))

    def where(path: Path) -> str:
        return names.get(str(path), str(path))

    for path, header in headers.items():
        if set(header) != set(first) or len(header) != len(first):
            only_here = sorted(set(header) - set(first))
            only_first = sorted(set(first) - set(header))
            raise InputFormatError(
                f"{where(path)} has columns {header}, but {where(first_path)} has {first} "
                f"(only in {where(path)}: {only_here or '-'}; only in {where(first_path)}: "
                f"{only_first or '-'}): every file of one input must name the same columns"
            )
        check_header(where(path), header, columns)
    groups: dict[tuple[str, ...], list[Path]] = {}
    for path, header in headers.items():
        groups.setdefault(tuple(header), []).append(path)
    if len(groups) == 1:
        return read_csv_sql(paths, fmt, columns or detected, **how)
    if columns:
        raise InputFormatError(
            f"the input's files order their columns differently ({sorted(groups)[:2]} ...), and "
            "columns= renames by position: leave columns out to map each file by its header"
        )
    parts = " UNION ALL BY NAME ".join(
        f"SELECT * FROM {read_csv_sql(group, fmt, list(header), **how)}"  # noqa: S608
        for header, group in groups.items()
    )
    selected = ", ".join(duck_ident(c) for c in first)
    return f"(SELECT {selected} FROM ({parts}))"  # noqa: S608


def _bad_key_error(
    con: Any,
    paths: Sequence[Path],
    fmt: FileFormat,
    columns: Sequence[str],
    sort_key: Sequence[str],
    sort_types: Sequence[str],
    names: Mapping[str, str],
    *,
    skip_bad: bool = False,
) -> InputFormatError:
    """Find the first key value that is not of its type and say where it is."""
    source = read_csv_sql(paths, fmt, columns, with_filename=True, skip_bad=skip_bad)
    for key, duck_type in zip(sort_key, sort_types, strict=True):
        row = con.execute(
            f"SELECT filename, {duck_ident(key)} FROM {source} "  # noqa: S608
            f"WHERE {_unconvertible(key, duck_type)} LIMIT 1"
        ).fetchone()
        if row:
            where = names.get(str(row[0]), str(row[0]))
            return InputFormatError(
                f"{where}: sort key column {key!r} holds {row[1]!r} "
                f"(expected a value of type {duck_type})"
            )
    return InputFormatError("a sort key value could not be converted to its type")
