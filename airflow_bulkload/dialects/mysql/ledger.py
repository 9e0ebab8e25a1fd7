"""The MySQL chunk ledger and load records (the Ledger role).

Claims under named locks (``GET_LOCK``), entries bound to the table's rows by a key probe and
InnoDB's table id, and withdrawing chunks through a scratch table.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from airflow_bulkload.catalog import LedgerEntry, LoadRecord, TableRef
from airflow_bulkload.dialects.checks import check_unchanged, key_params
from airflow_bulkload.dialects.requests import Withdrawal, WithdrawScratch
from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.manifest import ChunkSpec

if TYPE_CHECKING:
    pass

from airflow_bulkload.dialects.mysql.load import MySqlLoader
from airflow_bulkload.dialects.mysql.quoting import quote_identifier, quote_table, with_parameters
from airflow_bulkload.dialects.mysql.session import (
    _cursor,
    _execute,
    _fetch_all,
    _fetch_one,
    _scalar,
)

log = logging.getLogger(__name__)

_LEDGER_COLUMNS = (
    "`table_name`, `chunk_key`, `checksum`, `row_count`, `byte_count`, `load_id`, `probe`, "
    "`generation`"
)
#: what a read of an entry selects: its columns and when it was written
_LEDGER_READ = _LEDGER_COLUMNS + ", `loaded_at`"


def innodb_table_name(table: TableRef) -> str:
    """``db/table`` as InnoDB's dictionary names it (MySQL's filename encoding).

    Letters, digits and ``_`` stay as they are, any other character becomes ``@`` and its code point
    in four hex digits.
    """

    def encode(name: str) -> str:
        return "".join(
            c if c.isascii() and (c.isalnum() or c == "_") else f"@{ord(c):04x}" for c in name
        )

    return f"{encode(table.schema or '')}/{encode(table.name)}"


def _row_bytes(
    alias: str | None, columns: Sequence[str], floats: Collection[str] = frozenset()
) -> str:
    """The row's values as one byte string, NULL-safe and exact.

    Each value is quoted and NULL is the bare word, so rows compare byte for byte whatever the
    columns' collations. ``floats``: the ``FLOAT`` columns (in lower case), which render with 6
    significant digits (0.1234567 and 0.1234568 alike); as a ``DOUBLE`` (exact) they differ.
    """
    prefix = f"{alias}." if alias else ""

    def value(column: str) -> str:
        quoted = f"{prefix}{quote_identifier(column, 'column')}"
        return f"({quoted} + 0e0)" if column.lower() in floats else quoted

    return (
        "CONCAT_WS(',', " + ", ".join(f"QUOTE(CAST({value(c)} AS BINARY))" for c in columns) + ")"
    )


def float_columns(conn: Any, table: TableRef) -> set[str]:
    """The ``FLOAT`` columns of ``table``, in lower case, for :func:`_row_bytes`."""
    rows = _fetch_all(
        conn,
        "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = %s "
        "AND TABLE_NAME = %s AND DATA_TYPE = 'float'",
        (table.schema, table.name),
    )
    return {str(row[0]).lower() for row in rows}


def _crc_column(columns: Sequence[str]) -> str:
    """The quoted name of a keyless scratch table's row checksum: none of the chunk's columns."""
    taken = {c.lower() for c in columns}  # MySQL's column names ignore case
    name = "bulkload_row_crc"
    while name in taken:
        name += "_"
    return quote_identifier(name, "column")


def chunk_id(table: str, chunk_key: str) -> bytes:
    """The ledger's key for (table, chunk key): fixed size whatever the lengths."""
    return hashlib.sha256(table.encode("utf-8") + b"\0" + chunk_key.encode("utf-8")).digest()


def chunk_lock_name(table: str, chunk_key: str) -> str:
    """A GET_LOCK name (MySQL allows 64 characters) for loaders of one (table, chunk key)."""
    return "bulkload_chunk_" + chunk_id(table, chunk_key).hex()[:40]


class MySqlLedger(MySqlLoader):
    """The chunk ledger (``bulkload_chunk_ledger``) and load records (``bulkload_loads``).

    Built on the loader: withdrawing a chunk loads it into a scratch table first.
    """

    def claim_chunk(self, conn: Any, table: TableRef, chunk: ChunkSpec) -> LedgerEntry | None:
        """Take the chunk's named lock (``GET_LOCK``), then read the ledger.

        ``GET_LOCK`` is session-scoped: :meth:`transaction` releases it after the commit or
        rollback, and the server releases it when a killed worker's session ends. Row locks on
        the ledger would not do: a missing row can only be gap-locked, and two loaders of
        different chunks then deadlock on their inserts. Call this first in the transaction:
        the ledger read is a consistent read whose snapshot starts here, after the lock, so it
        sees the entry of a loader that committed before releasing. The ledger's primary key
        backs this up.
        """
        table_name = str(table)
        lock = chunk_lock_name(table_name, chunk.key)
        got = _scalar(conn, "SELECT GET_LOCK(%s, %s)", (lock, self.chunk_lock_timeout))
        if got != 1:
            raise BulkLoadError(
                f"{chunk.uri}: another task has been loading this chunk into {table_name} for "
                f"over {self.chunk_lock_timeout} s (lock {lock}); try again later"
            )
        self._session(conn).locks.append(lock)
        row = _fetch_one(
            conn,
            f"SELECT {_LEDGER_READ} "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "
            "WHERE `chunk_id` = %s ORDER BY `loaded_at` LIMIT 1",
            (chunk_id(table_name, chunk.key),),
        )
        return LedgerEntry.from_row(row) if row is not None else None

    def record_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        _execute(
            conn,
            f"INSERT INTO {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
            f"(`chunk_id`, {_LEDGER_COLUMNS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (chunk_id(entry.table, entry.chunk_key), *entry.to_row()),
        )

    def ledger_entries(self, conn: Any, table: TableRef, key_prefix: str) -> list[LedgerEntry]:
        rows = _fetch_all(
            conn,
            f"SELECT {_LEDGER_READ} "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "
            "WHERE `table_name` = %s AND LEFT(`chunk_key`, CHAR_LENGTH(%s)) = %s "
            "ORDER BY `chunk_key`, `loaded_at`",
            (str(table), key_prefix, key_prefix),
        )
        conn.commit()  # end the read's snapshot
        return [LedgerEntry.from_row(r) for r in rows]

    def forget_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        _execute(
            conn,
            f"DELETE FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
            "WHERE `chunk_id` = %s AND `checksum` = %s",
            (chunk_id(entry.table, entry.chunk_key), entry.checksum),
        )

    def set_chunk_generation(self, conn: Any, entry: LedgerEntry, generation: str) -> None:
        _execute(
            conn,
            f"UPDATE {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
            "SET `generation` = %s WHERE `chunk_id` = %s AND `checksum` = %s",
            (generation, chunk_id(entry.table, entry.chunk_key), entry.checksum),
        )

    def table_generation(self, conn: Any, table: TableRef) -> str | None:
        """InnoDB's table id; ``None`` without the PROCESS privilege its views need.

        A new id on DROP/CREATE, TRUNCATE and any rebuild (OPTIMIZE TABLE, ALTER ... FORCE), read
        from MariaDB's ``INNODB_SYS_TABLES`` or MySQL 8's ``INNODB_TABLES``.
        """
        name = innodb_table_name(table)
        for view in ("INNODB_SYS_TABLES", "INNODB_TABLES"):
            try:
                value = _scalar(
                    conn,
                    f"SELECT `TABLE_ID` FROM information_schema.`{view}` WHERE `NAME` = %s",  # noqa: S608 (constant)
                    (name,),
                )
            except Exception as exc:  # the view does not exist here, or no PROCESS privilege
                log.debug("information_schema.%s: %s", view, exc)
                continue
            return None if value is None else str(value)
        return None

    def keys_present(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[bool]:
        if not keys:
            return []
        match = " AND ".join(
            f"{with_parameters(quote_identifier(c, 'column'))} = %s" for c in columns
        )
        where = with_parameters(quote_table(table))
        probe = f"EXISTS (SELECT 1 FROM {where} WHERE {match})"  # noqa: S608 (quoted)
        row = _fetch_one(conn, "SELECT " + ", ".join([probe] * len(keys)), key_params(keys))
        return [bool(v) for v in (row or [])]

    def stored_key_values(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[list[Any]]:
        """Each key inserted into a temporary table typed like the key columns, read back.

        That is the conversion a load applies (a ``DATETIME`` drops its fraction). Temporary
        tables do not end the transaction. Where the server refuses one (no CREATE TEMPORARY
        TABLES privilege, GTID consistency), the keys are kept as given, as before.
        """
        import MySQLdb

        if not keys:
            return []
        scratch = quote_identifier("bulkload_stored_keys", "table")
        quoted = [quote_identifier(c, "column") for c in columns]
        rows: list[list[Any]] = []
        try:
            with _cursor(conn) as cur:
                cur.execute(f"DROP TEMPORARY TABLE IF EXISTS {scratch}")
                cur.execute(
                    f"CREATE TEMPORARY TABLE {scratch} "  # noqa: S608 (quoted)
                    f"SELECT 0 AS `bulkload_position`, {', '.join(quoted)} "
                    f"FROM {quote_table(table)} LIMIT 0"
                )
                values = ", ".join(["%s"] * (len(columns) + 1))
                cur.executemany(
                    f"INSERT INTO {scratch} VALUES ({values})",  # noqa: S608 (quoted)
                    [
                        [position] + [None if v is None else str(v) for v in key]
                        for position, key in enumerate(keys)
                    ],
                )
                cur.execute(
                    f"SELECT {', '.join(f'CAST({c} AS CHAR)' for c in quoted)} "  # noqa: S608 (quoted)
                    f"FROM {scratch} ORDER BY `bulkload_position`"
                )
                rows = [list(r) for r in cur.fetchall()]
                cur.execute(f"DROP TEMPORARY TABLE IF EXISTS {scratch}")
        except MySQLdb.Error as exc:
            log.warning(
                "could not read back the keys of %s as the table stores them (%s): the chunk's "
                "first and last key are kept as the input has them",
                table,
                exc,
            )
            return [list(key) for key in keys]
        return rows

    def ledger_rows(self, conn: Any, table: TableRef) -> int:
        total = _scalar(
            conn,
            f"SELECT COALESCE(SUM(`row_count`), 0) FROM {self._state_table(conn, 'bulkload_chunk_ledger')} "  # noqa: S608 (quoted)
            "WHERE `table_name` = %s",
            (str(table),),
        )
        conn.commit()  # end the read's snapshot
        return int(total or 0)

    def read_load_record(
        self, conn: Any, table: TableRef, staging_prefix: str
    ) -> LoadRecord | None:
        row = _fetch_one(
            conn,
            "SELECT `load_id`, `empty_before`, `verified` "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_loads')} WHERE `load_key` = %s",
            (chunk_id(str(table), staging_prefix),),
        )
        return None if row is None else LoadRecord.from_row(table, staging_prefix, row)

    def write_load_record(self, conn: Any, record: LoadRecord) -> None:
        _execute(
            conn,
            f"INSERT INTO {self._state_table(conn, 'bulkload_loads')} "  # noqa: S608 (quoted)
            "(`load_key`, `table_name`, `staging_prefix`, `load_id`, `empty_before`, "
            "`verified`) VALUES (%s, %s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE "
            "`load_id` = VALUES(`load_id`), `empty_before` = VALUES(`empty_before`), "
            "`verified` = VALUES(`verified`), `updated_at` = CURRENT_TIMESTAMP(6)",
            (
                chunk_id(record.table, record.staging_prefix),
                record.table,
                record.staging_prefix,
                record.load_id,
                int(record.empty_before),
                int(record.verified),
            ),
        )

    def delete_load_records(self, conn: Any, table: TableRef, prefix: str) -> None:
        _execute(
            conn,
            f"DELETE FROM {self._state_table(conn, 'bulkload_loads')} "  # noqa: S608 (quoted)
            "WHERE `table_name` = %s AND LEFT(`staging_prefix`, CHAR_LENGTH(%s)) = %s",
            (str(table), prefix, prefix),
        )

    @contextmanager
    def withdraw_scratch(
        self, conn: Any, table: TableRef, columns: list[str] | None, *, keyless: bool, tag: str
    ) -> Iterator[WithdrawScratch]:
        """A TEMPORARY table beside the target, made before the withdraw's transaction.

        Temporary: the session's own (two withdraws never share one) and gone with a killed
        session. Made and dropped outside the transaction, where a binary log with GTIDs allows
        it; the session's open reads are committed after it. ``keyless``: a CRC32 of each row,
        indexed, so each target row costs one index lookup. ``tag`` changes nothing here.
        """
        if columns is None:
            columns = [column for column, _ in self.load_columns(conn, table)]
        digest = hashlib.sha256("\0".join([str(keyless), *columns]).encode()).hexdigest()[:16]
        scratch = TableRef(name=f"bulkload_withdraw_{digest}", schema=table.schema)
        crc_column = _crc_column(columns)
        crc = f"({crc_column} INT UNSIGNED NULL, INDEX ({crc_column})) " if keyless else ""
        selected = ", ".join(quote_identifier(c, "column") for c in columns)
        with _cursor(conn) as cur:
            cur.execute(f"DROP TEMPORARY TABLE IF EXISTS {quote_table(scratch)}")
            cur.execute(
                f"CREATE TEMPORARY TABLE {quote_table(scratch)} {crc}"  # noqa: S608 (quoted)
                f"ENGINE=InnoDB SELECT {selected} FROM {quote_table(table)} LIMIT 0"
            )
        # temporary DDL commits nothing: end the reads before it, so the withdraw's snapshot
        # starts at its first claim (see claim_chunk), not at a catalog read made before
        conn.commit()
        try:
            yield WithdrawScratch(scratch, columns)
        finally:
            try:
                _execute(conn, f"DROP TEMPORARY TABLE IF EXISTS {quote_table(scratch)}")
            except Exception:  # it goes with the session
                log.warning(
                    "could not drop the scratch table %s; it goes with the session", scratch
                )

    def withdraw_rows(
        self, conn: Any, withdrawals: Sequence[Withdrawal], scratch: WithdrawScratch
    ) -> int:
        """A multi-table ``DELETE`` joined with the scratch table, then ``DELETE`` of its rows.

        Without ``key_columns``, a row matches on every column the chunks carry, NULL-safely and
        byte for byte, through the scratch table's CRC32 index. Its ``UPDATE`` sets every other
        column to itself, so a column that ``CREATE … SELECT`` copied with ``ON UPDATE
        CURRENT_TIMESTAMP`` keeps the chunk's value. The scratch table is emptied with
        ``DELETE`` (``TRUNCATE`` would commit).
        """
        first = withdrawals[0]
        table, key_columns, columns, rows = (
            first.table,
            first.key_columns,
            scratch.columns,
            scratch.table,
        )
        others = [c for c in columns if c not in key_columns]
        # lower case: MySQL's column names ignore it, and the chunk may spell them otherwise
        floats = float_columns(conn, table)
        crc_column = _crc_column(columns)
        if key_columns:
            match = " AND ".join(
                f"t.{quote_identifier(c, 'column')} = w.{quote_identifier(c, 'column')}"
                for c in key_columns
            )
            join = "JOIN"
        else:  # the target first: each of its rows one lookup in the scratch table's index
            match = (
                f"w.{crc_column} = CRC32({_row_bytes('t', columns, floats)}) "
                f"AND {_row_bytes('t', columns, floats)} = {_row_bytes('w', columns, floats)}"
            )
            join = "STRAIGHT_JOIN"
        with _cursor(conn) as cur:
            if not key_columns:
                unchanged = "".join(
                    f", {quote_identifier(c, 'column')} = {quote_identifier(c, 'column')}"
                    for c in columns
                )
                cur.execute(
                    f"UPDATE {quote_table(rows)} "  # noqa: S608 (quoted)
                    f"SET {crc_column} = CRC32({_row_bytes(None, columns, floats)}){unchanged}"
                )
            elif others:
                cur.execute(
                    "SELECT "  # noqa: S608 (quoted)
                    + ", ".join(
                        f"CAST(w.{quote_identifier(c, 'column')} AS CHAR)" for c in key_columns
                    )
                    + f" FROM {quote_table(table)} AS t JOIN {quote_table(rows)} AS w"
                    f" ON {match} WHERE {_row_bytes('t', others, floats)} <> "
                    f"{_row_bytes('w', others, floats)} LIMIT 1"
                )
                check_unchanged(first.entry, first.chunk.uri, table, key_columns, cur.fetchone())
            deleted = int(
                cur.execute(
                    f"DELETE t FROM {quote_table(table)} AS t "
                    f"{join} {quote_table(rows)} AS w ON {match}"
                )
            )
            cur.execute(f"DELETE FROM {quote_table(rows)}")  # noqa: S608 (quoted)
        return deleted
