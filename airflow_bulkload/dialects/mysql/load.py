"""MySQL loading (the ChunkLoader role): ``LOAD DATA`` from a FIFO or from S3, and load slots.

Loading (one transaction per chunk, see :class:`~airflow_bulkload.hooks.bulk_load.BulkLoadHook`):

* ``client``: ``LOAD DATA LOCAL INFILE`` reading a FIFO that a thread fills from the S3 stream, so
  the chunk never sits in memory or on disk. ``LOCAL`` makes MySQL downgrade every data error to a
  warning and carry on (it cannot stop the client mid-file), so after the load we read
  ``SHOW WARNINGS``: any warning rolls the chunk back and raises :class:`ChunkLoadError` naming the
  S3 URI, the row, the column and MySQL's reason. Affected rows are checked against the manifest.
* ``aurora_s3``: Aurora MySQL's server-side ``LOAD DATA FROM S3``. Aurora setup: an IAM role that
  may read the bucket, attached to the cluster and named in the cluster parameter
  ``aws_default_s3_role`` (Aurora 3; ``aurora_load_from_s3_role`` on Aurora 2); the loading user
  needs ``GRANT AWS_LOAD_S3_ACCESS TO 'user'@'%'`` (Aurora 3; the ``LOAD FROM S3`` privilege on
  Aurora 2); loads are recorded in ``mysql.aurora_s3_load_history``. Aurora cannot read gzip
  objects: stage uncompressed chunks (``compression="none"``) for this method.

Session tuning: ``foreign_key_checks = 0`` and a strict ``sql_mode``; ``unique_checks`` stays 1.
``foreign_key_checks = 0`` would let a row whose parent does not exist commit, and InnoDB never
re-checks existing rows: so the load turns foreign key checks back on for a table that has foreign
keys (an orphan row fails its chunk, naming it), and off only for tables without any.
``unique_checks = 0`` only lets InnoDB skip the uniqueness checks of *secondary* unique indexes
(duplicates there could go unnoticed), and on MariaDB 10.6+ it has one more effect: with both
checks off, a transaction that inserts into an *empty* table takes its bulk path, which locks
the whole table until the transaction commits. Parallel load sessions into an empty target
(a first load, a reload's work table) then run one after another: two sessions loading 5 M
key-sorted rows each took 40 to 42 s so, 26 to 30 s with ``unique_checks = 1``
(docs/performance.md). The primary key is checked either way.
The session settings are restored when the transaction ends, so a pooled connection is never left
weakened.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
from contextlib import suppress
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_bulkload.catalog import MYSQL_TRAITS, TableRef
from airflow_bulkload.dialects.requests import LoadInto
from airflow_bulkload.exceptions import BulkLoadError, ChunkLoadError
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

if TYPE_CHECKING:
    from airflow_bulkload.s3io import ChunkStream

from airflow_bulkload.dialects.mysql.errors import _driver_error, is_transient, warnings_error
from airflow_bulkload.dialects.mysql.load_sql import aurora_load_sql, local_infile_sql
from airflow_bulkload.dialects.mysql.quoting import quote_table
from airflow_bulkload.dialects.mysql.session import (
    MySqlSession,
    _count,
    _cursor,
    _execute,
    _fetch_all,
    _scalar,
)
from airflow_bulkload.dialects.mysql.stored_csv import StoredCsvStream

log = logging.getLogger(__name__)

#: the session sql_mode for loads: strict, and nothing that changes how our SQL text is read
#: (no ANSI_QUOTES, no NO_BACKSLASH_ESCAPES). NO_AUTO_VALUE_ON_ZERO stores a 0 in an
#: AUTO_INCREMENT column as 0, as the file says, instead of generating a new id.
STRICT_SQL_MODE = (
    "STRICT_ALL_TABLES,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,"
    "ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO"
)


def load_slot_name(table: str, slot: int) -> str:
    """A GET_LOCK name (at most 64 characters) for one of a table's load slots."""
    digest = hashlib.sha256(f"bulkload-slots\0{table}".encode()).hexdigest()[:32]
    return f"bulkload_slot_{digest}_{slot}"


class MySqlLoader(MySqlSession):
    """``LOAD DATA LOCAL INFILE`` from a FIFO, Aurora's ``LOAD DATA FROM S3``, load slots."""

    server_side_methods: ClassVar[tuple[str, ...]] = MYSQL_TRAITS.server_side_methods

    def try_acquire_load_slot(self, conn: Any, table: TableRef, slot: int) -> bool:
        return _scalar(conn, "SELECT GET_LOCK(%s, 0)", (load_slot_name(str(table), slot),)) == 1

    def release_load_slot(self, conn: Any, table: TableRef, slot: int) -> None:
        _scalar(conn, "SELECT RELEASE_LOCK(%s)", (load_slot_name(str(table), slot),))

    def tune_load_session(self, conn: Any) -> None:
        """``foreign_key_checks = 0``, ``unique_checks = 1``, strict ``sql_mode``, for this session.

        They hold until the transaction ends (the originals are saved and put back then). The load
        itself turns foreign key checks back on for tables with foreign keys. Unique checks stay
        on: off, they would let MariaDB lock an empty table for one load at a time (see above).
        """
        state = self._session(conn)
        with _cursor(conn) as cur:
            if state.saved_settings is None:
                cur.execute(
                    "SELECT @@SESSION.unique_checks, @@SESSION.foreign_key_checks, "
                    "@@SESSION.sql_mode"
                )
                state.saved_settings = tuple(cur.fetchone())
            cur.execute(
                "SET SESSION unique_checks = 1, foreign_key_checks = 0, sql_mode = %s",
                (STRICT_SQL_MODE,),
            )

    def _keep_foreign_key_checks_if_needed(self, conn: Any, table: TableRef) -> None:
        """Foreign key checks back on for a table with foreign keys.

        With them off, a row whose parent does not exist would commit, and nothing re-checks it:
        InnoDB never validates existing rows.
        """
        if self.has_foreign_keys(conn, table):
            _execute(conn, "SET SESSION foreign_key_checks = 1")

    def has_foreign_keys(self, conn: Any, table: TableRef) -> bool:
        sql = (
            "SELECT COUNT(*) FROM information_schema.REFERENTIAL_CONSTRAINTS "
            "WHERE CONSTRAINT_SCHEMA = %s AND TABLE_NAME = %s"
        )
        return _count(conn, sql, (table.schema, table.name)) > 0

    def load_columns(self, conn: Any, table: TableRef) -> list[tuple[str, str]]:
        """(name, type) of the columns a load writes by default: all but generated ones."""
        rows = _fetch_all(
            conn,
            "SELECT COLUMN_NAME, COLUMN_TYPE, EXTRA FROM information_schema.COLUMNS "
            "WHERE TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION",
            (table.schema, table.name),
        )
        if not rows:  # a TEMPORARY table (a dry run's scratch copy) is only in SHOW COLUMNS
            import MySQLdb

            try:
                shown = _fetch_all(conn, f"SHOW COLUMNS FROM {quote_table(table)}")
            except MySQLdb.ProgrammingError:  # no such table: said below
                shown = []
            rows = [(row[0], row[1], row[5]) for row in shown]
        if not rows:
            raise BulkLoadError(f"table {table} does not exist or has no columns")
        return [(str(n), str(t)) for n, t, extra in rows if "GENERATED" not in str(extra).upper()]

    def load_stream(self, conn: Any, into: LoadInto, stream: ChunkStream, source: str) -> int:
        """``LOAD DATA LOCAL INFILE`` from a FIFO a thread fills with ``stream``'s blocks.

        The writer's errors (a corrupt gzip, S3 failing) win over whatever the load saw and
        roll the chunk back. If the load fails first, the writer is released (we open and close
        the FIFO's read end, so its open or write returns) and joined. Any warning fails the load.
        Input as stored (a direct chunk) is rewritten in flight where ``LOAD DATA`` reads CSV
        otherwise than staging (see :mod:`~airflow_bulkload.dialects.mysql.stored_csv`).
        """
        table, columns, file_format = into.table, into.columns, into.file_format
        if stream.as_stored:
            stream = StoredCsvStream(stream, file_format)
            file_format = stream.file_format
        column_types = dict(self.load_columns(conn, table))
        columns = list(columns) if columns else list(column_types)
        self._keep_foreign_key_checks_if_needed(conn, table)
        workdir = tempfile.mkdtemp(prefix="bulkload-mysql-")
        fifo = os.path.join(workdir, "chunk.fifo")
        os.mkfifo(fifo, 0o600)
        writer = _FifoWriter(fifo, stream)
        writer.start()
        try:
            sql = local_infile_sql(fifo, table, columns, file_format)
            load_error: Exception | None = None
            rows = 0
            try:
                rows = _execute(conn, sql)
            except Exception as exc:
                load_error = exc
            writer.finish()
            if load_error is not None and is_transient(load_error):
                # a lost connection also stops the reading, and the writer's broken pipe would
                # read as bad input (no retry)
                raise _driver_error(source, load_error, file_format) from load_error
            if writer.error is not None:
                raise writer.error
            if load_error is not None:
                raise _driver_error(source, load_error, file_format) from load_error
            self._raise_on_warnings(conn, source, file_format, column_types)
            return rows
        finally:
            writer.finish()
            shutil.rmtree(workdir, ignore_errors=True)

    def _raise_on_warnings(
        self, conn: Any, source: str, fmt: FileFormat, column_types: dict[str, str]
    ) -> None:
        with _cursor(conn) as cur:
            cur.execute("SHOW COUNT(*) WARNINGS")
            total = int(cur.fetchone()[0])
            if total == 0:
                return
            cur.execute("SHOW WARNINGS LIMIT 5")
            rows = list(cur.fetchall())
        raise warnings_error(
            source,
            rows,
            total,
            header_lines=1 if fmt.header else 0,
            column_types=column_types,
        )

    def scratch_copy(self, conn: Any, table: TableRef) -> TableRef:
        """``CREATE TEMPORARY TABLE ... LIKE``: columns, defaults and keys, for this session.

        A key the input holds twice is seen. Needs the ``CREATE TEMPORARY TABLES`` privilege.
        """
        scratch = TableRef(name="bulkload_dry_run", schema=table.schema)
        with _cursor(conn) as cur:
            cur.execute(f"DROP TEMPORARY TABLE IF EXISTS {quote_table(scratch)}")
            cur.execute(f"CREATE TEMPORARY TABLE {quote_table(scratch)} LIKE {quote_table(table)}")
        return scratch

    def load_from_s3(self, conn: Any, into: LoadInto, chunk: ChunkSpec, region: str) -> int:
        """Aurora MySQL ``LOAD DATA FROM S3 FILE`` (``aurora_s3``). Refuses gzip chunks."""
        table, columns = into.table, into.columns
        if chunk.compression == "gzip" or chunk.object_key.lower().endswith(".gz"):
            raise ChunkLoadError(
                chunk.uri,
                "Aurora MySQL LOAD DATA FROM S3 cannot read gzip objects",
                expected="an uncompressed chunk: stage with compression='none' for method "
                "aurora_s3",
            )
        column_types = dict(self.load_columns(conn, table))
        columns = list(columns) if columns else list(column_types)
        self._keep_foreign_key_checks_if_needed(conn, table)
        sql = aurora_load_sql("FILE", chunk.uri, table, columns, chunk.format, region=region)
        try:
            rows = _execute(conn, sql)
        except Exception as exc:
            raise _driver_error(chunk.uri, exc, chunk.format) from exc
        self._raise_on_warnings(conn, chunk.uri, chunk.format, column_types)
        return rows


class _FifoWriter(threading.Thread):
    """Copies a :class:`ChunkStream` into a FIFO that ``LOAD DATA LOCAL INFILE`` reads.

    Memory: one read buffer. Errors are kept in :attr:`error` for the loading thread.
    """

    def __init__(self, path: str, stream: ChunkStream) -> None:
        super().__init__(name="bulkload-fifo-writer", daemon=True)
        self.path = path
        self.stream = stream
        self.error: BaseException | None = None
        self._stop_event = threading.Event()

    def run(self) -> None:
        try:
            fd = os.open(self.path, os.O_WRONLY)  # blocks until the reader (or finish()) opens
        except OSError as exc:
            if not self._stop_event.is_set():
                self.error = exc
            return
        try:
            for block in self.stream:
                if self._stop_event.is_set():
                    return
                view = memoryview(block)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
        except BrokenPipeError:
            if not self._stop_event.is_set():
                self.error = ChunkLoadError(
                    self.stream.source, "the database client stopped reading the chunk"
                )
        except BaseException as exc:  # kept for the loading thread, which re-raises it
            self.error = exc
        finally:
            os.close(fd)

    def finish(self, timeout: float = 60.0) -> None:
        """Make sure the thread ends, whatever the reader did.

        Opening the FIFO's read end releases a writer blocked in ``open``; draining it releases
        one blocked in ``write`` (if the client library stopped reading but kept the file open).
        The writer sees the stop flag before its next block and returns.
        """
        if not self.is_alive():
            return
        self._stop_event.set()
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            self.join(timeout)
            return
        deadline = time.monotonic() + timeout
        try:
            while self.is_alive() and time.monotonic() < deadline:
                with suppress(BlockingIOError):
                    os.read(fd, 1 << 16)
                self.join(0.02)
        finally:
            os.close(fd)
        if self.is_alive():
            log.error("the FIFO writer for %s did not stop; leaving it behind", self.path)
