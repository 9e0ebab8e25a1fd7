"""PostgreSQL loading (the ChunkLoader role): COPY, ``aws_s3``, session tuning, load slots.

Load methods
------------
``client``
    The worker streams the S3 object (gunzipped on the fly) into ``COPY ... FROM STDIN`` through
    psycopg's ``cursor.copy()``. Memory stays bounded by the read buffer whatever the chunk size.

``rds_s3``
    The server pulls the object itself with ``aws_s3.table_import_from_s3`` (RDS for PostgreSQL
    and Aurora PostgreSQL). One-time setup on the instance/cluster:

    1. ``CREATE EXTENSION aws_s3 CASCADE;`` in the target database (installs ``aws_commons``);
       the loading user needs ``USAGE`` on schema ``aws_s3`` and ``EXECUTE`` on its functions.
    2. An IAM role whose policy allows ``s3:GetObject`` (and ``s3:ListBucket``) on the staging
       bucket/prefix (plus ``kms:Decrypt`` for SSE-KMS objects), associated with the DB instance
       or cluster for the **s3Import** feature:
       ``aws rds add-role-to-db-instance --feature-name s3Import --role-arn ...``
       (``add-role-to-db-cluster`` on Aurora).
    3. Network: the instance must reach S3 (a VPC gateway endpoint for S3, or a NAT).
    4. Compressed chunks are decompressed by the server only when the object carries
       ``Content-Encoding: gzip`` metadata; a ``.gz`` object without it is read as raw bytes
       and fails. Staging sets that header on the chunks it writes.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any, ClassVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql

from airflow_bulkload.catalog import POSTGRES_TRAITS, TableRef
from airflow_bulkload.dialects.postgres.errors import chunk_error
from airflow_bulkload.dialects.postgres.session import PostgresSession, table_identifier
from airflow_bulkload.dialects.requests import LoadInto
from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.s3io import ChunkStream
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

#: bytes per COPY write: psycopg's largest single libpq write, so blocks pass through uncut, and
#: small enough that the allocator reuses them rather than growing the heap with the chunk
COPY_BLOCK_BYTES = 128 * 1024

_FORMAT_KEYWORDS = {"csv": sql.SQL("csv"), "text": sql.SQL("text")}


def copy_options(file_format: FileFormat) -> sql.Composed:
    """The parenthesised ``COPY ... WITH (...)`` option list for ``file_format``.

    Every value is a :class:`psycopg.sql.Literal`; the format keyword comes from a fixed table.
    QUOTE/ESCAPE exist only in CSV mode, so text format leaves them out.
    """
    fmt = file_format
    options: list[sql.Composable] = [
        sql.SQL("FORMAT {}").format(_FORMAT_KEYWORDS[fmt.format]),
        sql.SQL("DELIMITER {}").format(sql.Literal(fmt.delimiter)),
        sql.SQL("NULL {}").format(sql.Literal(fmt.effective_null)),
    ]
    if fmt.format == "csv":
        options.append(sql.SQL("QUOTE {}").format(sql.Literal(fmt.quote)))
        options.append(sql.SQL("ESCAPE {}").format(sql.Literal(fmt.effective_escape)))
    options.append(sql.SQL("HEADER {}").format(sql.SQL("true" if fmt.header else "false")))
    options.append(sql.SQL("ENCODING {}").format(sql.Literal(fmt.encoding)))
    return sql.SQL("({})").format(sql.SQL(", ").join(options))


def column_list(columns: Sequence[str] | None) -> sql.Composable:
    """``(a, b)`` for COPY, or nothing when every column is loaded in table order."""
    if not columns:
        return sql.SQL("")
    return sql.SQL(" ({})").format(sql.SQL(", ").join(sql.Identifier(c) for c in columns))


def copy_from_stdin(
    table: TableRef, columns: Sequence[str] | None, file_format: FileFormat
) -> sql.Composed:
    return sql.SQL("COPY {table}{columns} FROM STDIN WITH {options}").format(
        table=table_identifier(table),
        columns=column_list(columns),
        options=copy_options(file_format),
    )


def load_slot_key(table: str) -> int:
    """A stable signed 32-bit advisory-lock key naming one table's load slots."""
    digest = hashlib.sha256(f"bulkload-slots\0{table}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


_IMPORTED_ROWS = re.compile(r"^\s*(\d+) rows? imported into relation", re.IGNORECASE)


def parse_imported_rows(result: str | None) -> int:
    """The row count from ``aws_s3.table_import_from_s3``'s result text."""
    match = _IMPORTED_ROWS.match(result or "")
    if not match:
        raise BulkLoadError(
            f"aws_s3.table_import_from_s3 returned {result!r}; expected "
            "'<N> rows imported into relation ...'"
        )
    return int(match.group(1))


class PostgresLoader(PostgresSession):
    """COPY from the worker's stream, ``aws_s3.table_import_from_s3``, and load slots."""

    server_side_methods: ClassVar[tuple[str, ...]] = POSTGRES_TRAITS.server_side_methods
    load_errors_count_lines: ClassVar[bool] = True

    # Two-int4 advisory keys: a key space apart from the single-bigint chunk claims.
    def try_acquire_load_slot(self, conn: Any, table: TableRef, slot: int) -> bool:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_catalog.pg_try_advisory_lock(%s::int4, %s::int4)",
                (load_slot_key(str(table)), slot),
            )
            row = cur.fetchone()
        return bool(row and row[0])

    def release_load_slot(self, conn: Any, table: TableRef, slot: int) -> None:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_catalog.pg_advisory_unlock(%s::int4, %s::int4)",
                (load_slot_key(str(table)), slot),
            )

    def tune_load_session(self, conn: Any) -> None:
        """Don't wait for the WAL flush at commit.

        A crash can lose the last commits, and with them their ledger rows, so a re-run loads those
        chunks again — never twice.
        """
        conn.execute("SET LOCAL synchronous_commit = off")

    def load_stream(self, conn: Any, into: LoadInto, stream: ChunkStream, source: str) -> int:
        """``COPY ... FROM STDIN`` fed block by block from ``stream`` (bounded memory).

        A bad row raises :class:`ChunkLoadError` with PostgreSQL's line (header counted) and
        column; an error from the stream (corrupt gzip) aborts the COPY and propagates as is.
        """
        table, columns, file_format = into.table, into.columns, into.file_format
        statement = copy_from_stdin(table, columns, file_format)
        try:
            with conn.cursor() as cur:
                with cur.copy(statement) as copy:
                    while block := stream.read(COPY_BLOCK_BYTES):
                        copy.write(block)
                return int(cur.rowcount)
        except psycopg.Error as exc:
            translated = chunk_error(source, exc)
            if translated is None:
                raise
            raise translated from exc

    def import_from_s3_call(
        self,
        conn: Any,
        table: TableRef,
        columns: Sequence[str] | None,
        file_format: FileFormat,
        bucket: str,
        key: str,
        region: str,
    ) -> tuple[sql.Composed, tuple[str, ...]]:
        """The ``aws_s3.table_import_from_s3`` call and its parameters.

        The function pastes ``table_name``, ``column_list`` and ``options`` into a COPY
        statement on the server, so each is rendered as SQL text here with psycopg's quoting for
        this connection (identifiers double-quoted, option values as string literals); the call
        itself passes all six as bind parameters.
        """
        columns_text = ", ".join(sql.Identifier(c).as_string(conn) for c in columns or ())
        params = (
            table_identifier(table).as_string(conn),
            columns_text,
            copy_options(file_format).as_string(conn),
            bucket,
            key,
            region,
        )
        statement = sql.SQL(
            "SELECT aws_s3.table_import_from_s3("
            "%s::text, %s::text, %s::text, %s::text, %s::text, %s::text)"
        )
        return statement.format(), params

    def scratch_copy(self, conn: Any, table: TableRef) -> TableRef:
        """``CREATE TEMP TABLE ... (LIKE ...)``: columns, NOT NULL, defaults, CHECKs, generated.

        No index: a key the input holds twice is not seen (the load sees it).
        """
        scratch = TableRef(name="bulkload_dry_run", schema="pg_temp")
        conn.execute(
            sql.SQL(
                "CREATE TEMP TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING CONSTRAINTS "
                "INCLUDING GENERATED) ON COMMIT DROP"
            ).format(sql.Identifier(scratch.name), table_identifier(table))
        )
        return scratch

    def load_from_s3(self, conn: Any, into: LoadInto, chunk: ChunkSpec, region: str) -> int:
        """RDS PostgreSQL ``aws_s3.table_import_from_s3`` (``rds_s3``)."""
        table, columns = into.table, into.columns
        statement, params = self.import_from_s3_call(
            conn, table, columns, chunk.format, chunk.bucket, chunk.object_key, region
        )
        try:
            with conn.cursor() as cur:
                cur.execute(statement, params)
                row = cur.fetchone()
        except pg_errors.UndefinedFunction as exc:
            raise BulkLoadError(
                "aws_s3.table_import_from_s3 is not available in this database: run "
                "CREATE EXTENSION aws_s3 CASCADE (RDS/Aurora PostgreSQL only) or use method "
                f"'client' ({exc.diag.message_primary})"
            ) from exc
        except psycopg.Error as exc:
            translated = chunk_error(chunk.uri, exc)
            if translated is None:
                raise
            raise translated from exc
        return parse_imported_rows(row[0] if row else None)
