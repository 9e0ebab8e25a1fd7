"""Parquet and JSON Lines input: read by DuckDB, checked against the table, written as text.

These files name their own columns (and Parquet types them), so staging maps them onto the table
by name and checks them before any row loads, naming the file and the column:

- every file names the same columns (in any order);
- a column the table does not have, a type no load can take as text (BLOB), or a nested value
  (STRUCT / LIST / MAP) headed for a column that is not JSON or text, is refused (into a JSON or
  text column it loads as JSON);
- a timestamp with a time zone into a column without one (MySQL's DATETIME and TIMESTAMP,
  PostgreSQL's ``timestamp``) is refused: the load would drop the zone, not convert it.

Values are written in the staged CSV as the engines read them: numbers and JSON strings as
written (JSON Lines is read as text, so no number loses digits to a float), timestamps with a
zone in UTC with their offset, booleans as ``1``/``0`` unless the column is a boolean or text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_bulkload.staging.manifest import FileFormat

#: DuckDB types no engine's text load takes (by the start of the type's name)
_REFUSED_TYPES = ("STRUCT", "MAP", "UNION", "BLOB", "BIT")
#: integer types whose files may mix: the wider holds every value of the narrower exactly
_INTEGER_TYPES = frozenset(
    {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"}
)
_TEXTUAL_TARGETS = ("char", "text", "string", "enum", "set", "json", "bool")


class TypedInputError(ValueError):
    """A Parquet / JSON Lines file that cannot load into the table as it is."""


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _files(paths: Sequence[Path]) -> str:
    return "[" + ", ".join(_literal(str(p)) for p in paths) + "]"


def read_sql(paths: Sequence[Path], fmt: FileFormat, text_columns: Sequence[str] = ()) -> str:
    """The DuckDB table function over ``paths``; JSON Lines with ``text_columns`` read as text."""
    if fmt.format == "parquet":
        return f"read_parquet({_files(paths)}, union_by_name = true)"
    # every record typed, not a sample's: a key first seen late, or a type that changes, counts
    options = (
        "format = 'newline_delimited', compression = 'auto', maximum_object_size = 16777216, "
        "sample_size = -1"
    )
    if text_columns:
        typed = ", ".join(f"{_literal(c)}: 'VARCHAR'" for c in text_columns)
        options += ", columns = {" + typed + "}"
    else:
        options += ", union_by_name = true"
    return f"read_json({_files(paths)}, {options})"


def _is_nested(duck_type: str) -> bool:
    upper = duck_type.upper()
    return upper.startswith(_REFUSED_TYPES) or upper.endswith("]")


def _has_zone(duck_type: str) -> bool:
    upper = duck_type.upper()
    return "WITH TIME ZONE" in upper or upper.startswith(("TIMESTAMPTZ", "TIMETZ"))


def _is_timestamp(duck_type: str) -> bool:
    return duck_type.upper().startswith("TIMESTAMP")


#: columns a nested value loads into, as JSON text (MariaDB's JSON is a LONGTEXT)
_TAKES_JSON = ("json", "text", "char")
#: the type DuckDB gives a JSON key whose values are all null: it fits any other
_ALL_NULL = '"NULL"'


def _holds_zone(target_type: str) -> bool:
    """Whether a table column's declared type keeps a time zone (PostgreSQL's timestamptz)."""
    lowered = target_type.lower()
    return "with time zone" in lowered or lowered.startswith(("timestamptz", "timetz"))


def check_schemas(
    schemas: Mapping[str, Sequence[tuple[str, str]]],
    table_types: Mapping[str, str],
    *,
    same_columns: bool = True,
) -> list[tuple[str, str]]:
    """The input's (column, DuckDB type) in the first file's order, once every file is checked.

    ``schemas`` maps each file (as the user named it) to its columns; ``table_types`` the table's
    loadable columns to their declared types (empty: the table is not known, names go unchecked).
    Without ``same_columns`` (JSON Lines, whose exporters leave null keys out) a file may name
    fewer columns: the input's are all files' columns, a missing one is NULL.
    """
    first_file, first = next(iter(schemas.items()))
    first_names = [name for name, _ in first]
    first_types: dict[str, str] = {}
    seen_in: dict[str, str] = {}
    for where, columns in schemas.items():
        for name, duck_type in columns:
            if first_types.get(name, _ALL_NULL) == _ALL_NULL:
                first_types[name], seen_in[name] = duck_type, where
    for where, columns in schemas.items():
        names = [name for name, _ in columns]
        if same_columns and sorted(names) != sorted(first_names):
            only_here = sorted(set(names) - set(first_names))
            only_first = sorted(set(first_names) - set(names))
            raise TypedInputError(
                f"{where} has columns {names}, but {first_file} has {first_names} (only in "
                f"{where}: {only_here or '-'}; only in {first_file}: {only_first or '-'}): every "
                "file of one input must name the same columns"
            )
        for name, duck_type in columns:
            other = first_types[name]
            if (
                duck_type != other
                and _ALL_NULL not in (duck_type, other)
                and not (duck_type.upper() in _INTEGER_TYPES and other.upper() in _INTEGER_TYPES)
            ):
                raise TypedInputError(
                    f"{where}: column {name!r} is {duck_type}, but {seen_in[name]} has it as "
                    f"{other}: one file's values would be read as the other's type; write the "
                    "files with one schema"
                )
            target = table_types.get(name)
            if _is_nested(duck_type) and not any(t in (target or "").lower() for t in _TAKES_JSON):
                raise TypedInputError(
                    f"{where}: column {name!r} is {duck_type}, which no table column loads as "
                    "a JSON or text column; flatten it (or cast it to a string) before the load"
                )
            if table_types and target is None:
                raise TypedInputError(
                    f"{where}: column {name!r} is not a column of the table "
                    f"(its columns: {sorted(table_types)})"
                )
            if target is not None and _has_zone(duck_type) and not _holds_zone(target):
                raise TypedInputError(
                    f"{where}: column {name!r} is {duck_type} and the table's {name!r} is "
                    f"{target}, which holds no time zone: the load would drop the zone; convert "
                    "the values to the zone you mean (or use a column with a time zone)"
                )
    return list(first_types.items())


def text_select(
    columns: Sequence[tuple[str, str]], table_types: Mapping[str, str], *, read_as_text: bool
) -> str:
    """The SELECT list that writes each value as its table column reads it from text.

    ``read_as_text``: the values are read as VARCHAR already (JSON Lines), as written in the file.
    """
    parts = []
    for name, duck_type in columns:
        column = _ident(name)
        upper = duck_type.upper()
        target = (table_types.get(name) or "").lower()
        if upper == "BOOLEAN" and not any(t in target for t in _TEXTUAL_TARGETS):
            # MySQL's BOOLEAN is TINYINT(1); a number column reads 1/0, not true/false
            value = f"CAST({column} AS BOOLEAN)" if read_as_text else column
            parts.append(f"CASE WHEN {value} THEN '1' WHEN NOT {value} THEN '0' END AS {column}")
        elif _has_zone(duck_type) and _is_timestamp(duck_type) and not read_as_text:
            parts.append(f"strftime({column}, '%Y-%m-%d %H:%M:%S.%f+00') AS {column}")
        elif _is_nested(duck_type) and not read_as_text:  # into a JSON or text column: as JSON
            parts.append(f"CAST(to_json({column}) AS VARCHAR) AS {column}")
        else:
            parts.append(f"CAST({column} AS VARCHAR) AS {column}")
    return ", ".join(parts)


def describe(con: Any, path: Path, fmt: FileFormat) -> list[tuple[str, str]]:
    """One file's columns and DuckDB types (Parquet: its schema; JSON Lines: DuckDB's guess)."""
    rows = con.execute(f"DESCRIBE SELECT * FROM {read_sql([path], fmt)}").fetchall()  # noqa: S608
    return [(str(row[0]), str(row[1])) for row in rows]


def holds_records(path: Path, fmt: FileFormat) -> bool:
    """Whether a file has anything to read: JSON Lines of blank lines only has not."""
    if not path.stat().st_size:
        return False
    if fmt.format != "jsonl":
        return True
    from airflow_bulkload.compression import decompressed

    with path.open("rb") as raw, decompressed(raw) as text:
        return any(block.strip() for block in iter(lambda: text.read(1024 * 1024), b""))
