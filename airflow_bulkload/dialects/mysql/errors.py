"""MySQL load warnings and errors, translated into ``ChunkLoadError`` naming row and column."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_bulkload.dialects.mysql.load_sql import TOO_FEW_FIELDS_MARKER
from airflow_bulkload.exceptions import BulkLoadError, ChunkLoadError
from airflow_bulkload.staging.manifest import FileFormat

_QUOTED_NAME = r"(?:`(?:[^`]|``)*`|'(?:[^']|'')*')"

_COLUMN_RE = re.compile(rf"for column ((?:{_QUOTED_NAME}\.)*{_QUOTED_NAME})")

_AT_ROW_RE = re.compile(r"at row (\d+)")

_ROW_PREFIX_RE = re.compile(r"^Row (\d+) ")

_CANNOT_BE_NULL_RE = re.compile(rf"^Column ({_QUOTED_NAME}) cannot be null")


@dataclass(frozen=True)
class LoadWarning:
    """One MySQL warning from a load, parsed: ``row`` counts data rows from 1 (header excluded)."""

    code: int
    message: str
    row: int | None = None
    column: str | None = None

    @property
    def reason(self) -> str:
        if TOO_FEW_FIELDS_MARKER in self.message:
            return "the row has fewer fields than the columns loaded"
        if self.code == 1261:
            return "the row has fewer fields than the columns loaded"
        if self.code == 1262:
            return "the row has more fields than the columns loaded"
        return f"{self.message} (MySQL {self.code})"


def _unquote_last(name: str) -> str:
    parts = re.findall(_QUOTED_NAME, name)
    last = parts[-1] if parts else name
    quote = last[0]
    return last[1:-1].replace(quote * 2, quote)


def parse_warning(code: int, message: str) -> LoadWarning:
    """Pull the row and column out of MySQL's and MariaDB's warning texts.

    MySQL 8 writes ``for column 'x' at row 3``; MariaDB ``for column `db`.`t`.`x` at row 3``.
    """
    row: int | None = None
    column: str | None = None
    if (m := _AT_ROW_RE.search(message)) or (m := _ROW_PREFIX_RE.match(message)):
        row = int(m.group(1))
    if (m := _COLUMN_RE.search(message)) or (m := _CANNOT_BE_NULL_RE.match(message)):
        column = _unquote_last(m.group(1))
    return LoadWarning(code, message, row, column)


def warnings_error(
    source: str,
    warnings: Sequence[tuple[Any, ...]],
    total: int,
    *,
    header_lines: int = 0,
    column_types: dict[str, str] | None = None,
) -> ChunkLoadError:
    """The :class:`ChunkLoadError` for the first warning of a load (``SHOW WARNINGS`` rows)."""
    parsed = [parse_warning(int(w[1]), str(w[2])) for w in warnings]
    first = parsed[0] if parsed else LoadWarning(0, f"{total} warnings")
    reason = first.reason
    if total > 1:
        reason += f" (and {total - 1} more warning{'s' if total > 2 else ''})"
    expected = None
    if first.column and column_types and first.column in column_types:
        expected = f"a value that fits {first.column} {column_types[first.column]}"
    return ChunkLoadError(
        source,
        reason,
        line=first.row + header_lines if first.row is not None else None,
        column=first.column,
        expected=expected,
    )


#: server and client errors that say nothing about the rows: a lock wait that timed out, a
#: deadlock, a lost, timed-out or killed connection or query, a server shutting down. The
#: chunk's transaction is gone either way; a retry of the task loads it (a ChunkLoadError would
#: fail the task at once)
TRANSIENT_ERRORS = frozenset({1053, 1159, 1161, 1205, 1213, 1317, 1927, 2006, 2013, 2055, 4031})


def is_transient(exc: BaseException) -> bool:
    """Whether a driver error is one of :data:`TRANSIENT_ERRORS` (say nothing of the rows)."""
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    return bool(args) and isinstance(args[0], int) and args[0] in TRANSIENT_ERRORS


def _driver_error(source: str, exc: Exception, fmt: FileFormat) -> BulkLoadError:
    """A :class:`ChunkLoadError` for what the rows caused, a retryable error for the rest."""
    if isinstance(exc, ChunkLoadError):
        return exc
    args: tuple[Any, ...] = tuple(getattr(exc, "args", ()))
    if is_transient(exc):
        return BulkLoadError(
            f"{source}: the load was interrupted, not refused: {args[-1]} (MySQL {args[0]}); "
            "nothing of this chunk was loaded, and a retry loads it"
        )
    if len(args) >= 2 and isinstance(args[0], int):
        warning = parse_warning(args[0], str(args[1]))
        return ChunkLoadError(
            source,
            f"the server refused the load: {warning.reason}",
            line=None if warning.row is None else warning.row + (1 if fmt.header else 0),
            column=warning.column,
        )
    return ChunkLoadError(source, f"the load failed: {exc}")
