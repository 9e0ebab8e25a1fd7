"""The PostgreSQL chunk ledger and load records (the Ledger role).

Claims under advisory locks, entries bound to the table's rows by a key probe and the table's
generation, and withdrawing chunks.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from psycopg import sql

from airflow_bulkload.catalog import LedgerEntry, LoadRecord, TableRef
from airflow_bulkload.dialects.checks import check_unchanged, key_params
from airflow_bulkload.dialects.postgres.migrations import _S
from airflow_bulkload.dialects.postgres.session import PostgresSession, table_identifier
from airflow_bulkload.dialects.requests import Withdrawal, WithdrawScratch
from airflow_bulkload.staging.manifest import ChunkSpec

log = logging.getLogger(__name__)

_LEDGER_COLUMNS = sql.SQL(
    "table_name, chunk_key, checksum, rows, bytes, load_id, probe, generation"
)
#: what a read of an entry selects: its columns and when it was written
_LEDGER_READ = sql.SQL("{}, loaded_at").format(_LEDGER_COLUMNS)


def _row_text(alias: str, columns: Sequence[str]) -> sql.Composed:
    """The row's values as one text, NULL-safe and for every type (``json`` has no ``=``).

    Equal exactly when each value's text is; byte-wise (``"C"``), so a hash join can use it.
    """
    return sql.SQL('ROW({})::text COLLATE "C"').format(
        sql.SQL(", ").join(
            sql.SQL("{}.{}").format(sql.Identifier(alias), sql.Identifier(c)) for c in columns
        )
    )


def chunk_lock_key(table: str, chunk_key: str) -> int:
    """A stable signed 64-bit advisory-lock key for one (table, chunk key)."""
    digest = hashlib.sha256(f"bulkload-chunk\0{table}\0{chunk_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class PostgresLedger(PostgresSession):
    """The chunk ledger (``bulkload.chunk_ledger``) and load records (``bulkload.loads``)."""

    def claim_chunk(self, conn: Any, table: TableRef, chunk: ChunkSpec) -> LedgerEntry | None:
        """Take a transaction-scoped advisory lock on (table, chunk key), then read the ledger.

        A second loader of the same chunk blocks here until the first commits or rolls back,
        then sees its ledger row (READ COMMITTED) or loads the chunk itself.
        """
        table_name = str(table)
        with conn.cursor() as cur:
            cur.execute(
                "SELECT pg_catalog.pg_advisory_xact_lock(%s)",
                (chunk_lock_key(table_name, chunk.key),),
            )
            cur.execute(
                sql.SQL(
                    "SELECT {} FROM {}.chunk_ledger"
                    " WHERE table_name = %s AND chunk_key = %s"
                    " ORDER BY checksum = %s DESC, loaded_at DESC LIMIT 1"
                ).format(_LEDGER_READ, _S),
                (table_name, chunk.key, chunk.checksum),
            )
            row = cur.fetchone()
        return LedgerEntry.from_row(row) if row is not None else None

    def record_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.chunk_ledger ({}) VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s)"
            ).format(_S, _LEDGER_COLUMNS),
            entry.to_row(),
        )

    def ledger_entries(self, conn: Any, table: TableRef, key_prefix: str) -> list[LedgerEntry]:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT {} FROM {}.chunk_ledger WHERE table_name = %s"
                    " AND left(chunk_key, length(%s)) = %s ORDER BY chunk_key, loaded_at"
                ).format(_LEDGER_READ, _S),
                (str(table), key_prefix, key_prefix),
            )
            rows = cur.fetchall()
        return [LedgerEntry.from_row(r) for r in rows]

    def forget_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        conn.execute(
            sql.SQL(
                "DELETE FROM {}.chunk_ledger"
                " WHERE table_name = %s AND chunk_key = %s AND checksum = %s"
            ).format(_S),
            (entry.table, entry.chunk_key, entry.checksum),
        )

    def set_chunk_generation(self, conn: Any, entry: LedgerEntry, generation: str) -> None:
        conn.execute(
            sql.SQL(
                "UPDATE {}.chunk_ledger SET generation = %s"
                " WHERE table_name = %s AND chunk_key = %s AND checksum = %s"
            ).format(_S),
            (generation, entry.table, entry.chunk_key, entry.checksum),
        )

    def table_generation(self, conn: Any, table: TableRef) -> str | None:
        """``oid:filenode``; a partitioned table's leaves' filenodes, in oid order."""
        with self._read(conn) as cur:
            cur.execute(
                "SELECT c.oid::text || ':' || CASE WHEN c.relkind = 'p' THEN coalesce(("
                "  SELECT string_agg(pg_catalog.pg_relation_filenode(t.relid)::text, ','"
                "   ORDER BY t.relid) FROM pg_catalog.pg_partition_tree(c.oid) t"
                "  WHERE t.isleaf), '')"
                " ELSE coalesce(pg_catalog.pg_relation_filenode(c.oid)::text, '') END"
                " FROM pg_catalog.pg_class c WHERE c.oid = pg_catalog.to_regclass(%s)",
                (table_identifier(table).as_string(conn),),
            )
            row = cur.fetchone()
        return str(row[0]) if row and row[0] is not None else None

    def keys_present(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[bool]:
        if not keys:
            return []
        match = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(c)) for c in columns)
        probe = sql.SQL("EXISTS (SELECT 1 FROM {} WHERE {})").format(table_identifier(table), match)
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL("SELECT {}").format(sql.SQL(", ").join([probe] * len(keys))),
                key_params(keys),
            )
            row = cur.fetchone()
        return [bool(v) for v in (row or [])]

    def stored_key_values(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[list[Any]]:
        """Each value cast to its column's type with its typmod, read back as text.

        The type comes from ``format_type``, so the cast converts as COPY's input conversion does.
        """
        if not keys:
            return []
        with self._read(conn) as cur:
            cur.execute(
                "SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)"
                " FROM pg_catalog.pg_attribute a WHERE a.attrelid = pg_catalog.to_regclass(%s)"
                " AND a.attnum > 0 AND NOT a.attisdropped",
                (table_identifier(table).as_string(conn),),
            )
            types = {str(name): str(type_) for name, type_ in cur.fetchall()}
            casts = [
                sql.SQL("CAST(%s AS {})::text").format(sql.SQL(types.get(c, "text")))
                for _ in keys
                for c in columns
            ]
            cur.execute(
                sql.SQL("SELECT {}").format(sql.SQL(", ").join(casts)),
                [None if v is None else str(v) for key in keys for v in key],
            )
            row = list(cur.fetchone() or [])
        width = len(columns)
        return [row[i * width : (i + 1) * width] for i in range(len(keys))]

    def ledger_rows(self, conn: Any, table: TableRef) -> int:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT coalesce(sum(rows), 0) FROM {}.chunk_ledger WHERE table_name = %s"
                ).format(_S),
                (str(table),),
            )
            row = cur.fetchone()
        return int(row[0]) if row else 0

    def read_load_record(
        self, conn: Any, table: TableRef, staging_prefix: str
    ) -> LoadRecord | None:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT load_id, empty_before, verified FROM {}.loads"
                    " WHERE table_name = %s AND staging_prefix = %s"
                ).format(_S),
                (str(table), staging_prefix),
            )
            row = cur.fetchone()
        return None if row is None else LoadRecord.from_row(table, staging_prefix, row)

    def write_load_record(self, conn: Any, record: LoadRecord) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.loads (table_name, staging_prefix, load_id, empty_before, verified)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (table_name, staging_prefix) DO UPDATE"
                " SET load_id = EXCLUDED.load_id, empty_before = EXCLUDED.empty_before,"
                " verified = EXCLUDED.verified, updated_at = now()"
            ).format(_S),
            (
                record.table,
                record.staging_prefix,
                record.load_id,
                record.empty_before,
                record.verified,
            ),
        )

    def delete_load_records(self, conn: Any, table: TableRef, prefix: str) -> None:
        conn.execute(
            sql.SQL(
                "DELETE FROM {}.loads WHERE table_name = %s"
                " AND left(staging_prefix, length(%s)) = %s"
            ).format(_S),
            (str(table), prefix, prefix),
        )

    @contextmanager
    def withdraw_scratch(
        self, conn: Any, table: TableRef, columns: list[str] | None, *, keyless: bool, tag: str
    ) -> Iterator[WithdrawScratch]:
        """A temporary table (the session's own), made and dropped in transactions of their own.

        A killed session's temporary tables go with it; ``keyless`` and ``tag`` change nothing
        (a hash join matches whole rows).
        """
        if columns is None:
            info = self.describe_table(conn, table)
            generated = set(info.extra.get("generated_columns", []))
            columns = [c.name for c in info.columns if c.name not in generated]
        digest = hashlib.sha256("\0".join(columns).encode()).hexdigest()[:12]
        scratch = TableRef(name=f"bulkload_withdrawn_rows_{digest}", schema="pg_temp")
        with self.transaction(conn):
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table_identifier(scratch)))
            conn.execute(
                sql.SQL("CREATE TEMP TABLE {} AS SELECT {} FROM {} WITH NO DATA").format(
                    sql.Identifier(scratch.name),
                    sql.SQL(", ").join(sql.Identifier(c) for c in columns),
                    table_identifier(table),
                )
            )
        try:
            yield WithdrawScratch(scratch, columns)
        finally:
            try:
                with self.transaction(conn):
                    conn.execute(
                        sql.SQL("DROP TABLE IF EXISTS {}").format(table_identifier(scratch))
                    )
            except Exception:  # a broken session drops its temporary tables when it ends
                log.warning("could not drop %s; it goes when the session ends", scratch)

    def withdraw_rows(
        self, conn: Any, withdrawals: Sequence[Withdrawal], scratch: WithdrawScratch
    ) -> int:
        """``DELETE … USING`` the scratch table, then truncate it.

        Without ``key_columns``, a row matches on every column the chunks carry, NULL-safely (as
        ``ROW(...)::text``, which a hash join can use).
        """
        first = withdrawals[0]
        table, key_columns, columns = first.table, first.key_columns, scratch.columns
        if key_columns:
            match = sql.SQL(" AND ").join(
                sql.SQL("t.{c} = w.{c}").format(c=sql.Identifier(c)) for c in key_columns
            )
        else:
            match = sql.SQL("{} = {}").format(_row_text("t", columns), _row_text("w", columns))
        others = [c for c in columns if c not in key_columns]
        if key_columns and others:
            changed = conn.execute(
                sql.SQL("SELECT {} FROM {} AS t JOIN {} AS w ON {} WHERE {} <> {} LIMIT 1").format(
                    sql.SQL(", ").join(
                        sql.SQL("w.{}::text").format(sql.Identifier(c)) for c in key_columns
                    ),
                    table_identifier(table),
                    table_identifier(scratch.table),
                    match,
                    _row_text("t", others),
                    _row_text("w", others),
                )
            ).fetchone()
            check_unchanged(first.entry, first.chunk.uri, table, key_columns, changed)
        deleted = conn.execute(
            sql.SQL("DELETE FROM {} AS t USING {} AS w WHERE {}").format(
                table_identifier(table), table_identifier(scratch.table), match
            )
        ).rowcount
        conn.execute(sql.SQL("TRUNCATE {}").format(table_identifier(scratch.table)))
        return int(deleted)
