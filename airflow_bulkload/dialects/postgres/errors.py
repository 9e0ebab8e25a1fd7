"""PostgreSQL load errors, translated into ``ChunkLoadError`` naming the line and column."""

from __future__ import annotations

import re

import psycopg
from psycopg import errors as pg_errors

from airflow_bulkload.exceptions import ChunkLoadError

# "COPY events, line 3, column amount: "abc"" / "COPY events, line 7" / "..., line 2: "1,2,3""
_COPY_CONTEXT = re.compile(r"^COPY .*?, line (?P<line>\d+)(?:, column (?P<column>.*?))?(?::|$)")

#: errors raised while loading that mean "this input is bad", not "the setup is wrong"
_BAD_INPUT_ERRORS: tuple[type[psycopg.Error], ...] = (
    pg_errors.DataError,  # class 22: bad copy format, bad type, bad encoding, out of range
    pg_errors.IntegrityError,  # class 23: NOT NULL, unique, FK, CHECK violated by a row
    pg_errors.ExternalRoutineException,  # class 38: the server-side fetch failed
    # the input names a column the table lacks: every chunk fails alike, a retry cannot help
    pg_errors.UndefinedColumn,
    pg_errors.DuplicateColumn,
)

# "missing data for column "price"": the context names no column for this one
_MISSING_COLUMN = re.compile(r'^missing data for column "(?P<column>.*)"$')


def parse_copy_context(context: str | None) -> tuple[int | None, str | None]:
    """Line and column from PostgreSQL's COPY error context (``None`` where it does not say).

    The line counts the file's lines from 1, header included, as PostgreSQL reports them.
    """
    for text in (context or "").splitlines():
        match = _COPY_CONTEXT.match(text.strip())
        if match:
            return int(match["line"]), match["column"]
    return None, None


def chunk_error(source: str, exc: psycopg.Error) -> ChunkLoadError | None:
    """Turn a psycopg error raised by a load into a :class:`ChunkLoadError`.

    ``None`` when it is not about the input (a missing table, a lost connection: those propagate as
    they are).
    """
    diag = exc.diag
    line, column = parse_copy_context(diag.context)
    if line is None and not isinstance(exc, _BAD_INPUT_ERRORS):
        return None
    if column is None:
        missing = _MISSING_COLUMN.match(diag.message_primary or "")
        column = missing["column"] if missing else diag.column_name
    reason = diag.message_primary or str(exc).strip().splitlines()[0]
    if diag.message_detail:
        reason += f" ({diag.message_detail})"
    if reason.startswith("unterminated CSV quoted field"):
        reason += (
            "; a quote opened at or before this line is never closed, so the field ran to the"
            " end of the chunk"
        )
    if diag.sqlstate:
        reason += f" [SQLSTATE {diag.sqlstate}]"
    return ChunkLoadError(source, reason, line=line, column=column)
