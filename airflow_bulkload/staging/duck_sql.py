"""Quoting for the DuckDB SQL that staging runs: identifiers and literals, checked.

DuckDB is the project's local tool, not a target engine, so its quoting lives with staging
rather than in a dialect module.
"""

from __future__ import annotations

from collections.abc import Sequence

from airflow_bulkload.exceptions import InvalidFileFormatError


def duck_ident(name: str) -> str:
    """A DuckDB identifier; a name that is empty or holds a NUL byte is refused."""
    if not name or "\0" in name:
        raise InvalidFileFormatError(f"column name is not usable: {name!r}")
    return '"' + name.replace('"', '""') + '"'


def duck_literal(value: str) -> str:
    """A DuckDB string literal; a value holding a NUL byte is refused."""
    if "\0" in value:
        raise InvalidFileFormatError(f"value may not hold a NUL byte: {value!r}")
    return "'" + value.replace("'", "''") + "'"


def list_literal(values: Sequence[str]) -> str:
    """A DuckDB list of string literals."""
    return "[" + ", ".join(duck_literal(v) for v in values) + "]"
