"""PostgreSQL: every piece of PostgreSQL SQL text this provider sends lives in this module.

Identifiers and literals are composed with :mod:`psycopg.sql` (``Identifier``/``Literal``), never
pasted into strings. Connections are psycopg 3 connections.

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
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from airflow_bulkload.catalog import (
    ColumnInfo,
    ConstraintInfo,
    IndexInfo,
    KeyProbe,
    LedgerEntry,
    LoadRecord,
    SavedSetting,
    ServerFacts,
    TableInfo,
    TableRef,
    check_withdrawn,
)
from airflow_bulkload.dialects.roles import Dialect
from airflow_bulkload.exceptions import (
    BulkLoadError,
    BulkModeRefusedError,
    BulkModeStateError,
    ChunkLoadError,
    ForeignKeyViolationError,
    InsufficientPrivilegeError,
    TableNotFoundError,
)
from airflow_bulkload.s3io import ChunkStream
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat
from airflow_bulkload.table_state import normalise_ddl, reloption_changes, snapshot_from_info

STATE_SCHEMA = "bulkload"

#: bytes per COPY write: psycopg's largest single libpq write, so blocks pass through uncut, and
#: small enough that the allocator reuses them rather than growing the heap with the chunk
COPY_BLOCK_BYTES = 128 * 1024

#: advisory-lock class (two-int4 key space) for state-schema migrations; chunk claims use the
#: separate bigint key space, which PostgreSQL keeps apart from the two-int4 one.
_MIGRATION_LOCK = (0x626C6B64, 1)  # "blkd", 1

_S = sql.Identifier(STATE_SCHEMA)

#: advisory lock (two-int4 key space) serialising bulk-mode enter/exit on a server
_BULK_MODE_LOCK = (0x626C6B64, 2)  # "blkd", 2
#: setting contexts a reload (SIGHUP) applies; 'postmaster' needs a restart
_RELOADABLE_CONTEXTS = frozenset({"sighup", "superuser", "user"})

#: The state schema, one migration per step. A migration runs once, in order, under an
#: advisory lock, and is recorded in ``bulkload.schema_migrations``; later features append
#: steps (saved table state and claims, bulk-mode leases), never edit applied ones.
MIGRATIONS: tuple[tuple[int, str, sql.Composed], ...] = (
    (
        1,
        "chunk ledger",
        sql.SQL(
            """
            CREATE TABLE {s}.chunk_ledger (
                table_name text NOT NULL,
                chunk_key text NOT NULL,
                checksum text NOT NULL,
                rows bigint NOT NULL CHECK (rows >= 0),
                bytes bigint NOT NULL CHECK (bytes >= 0),
                load_id text NOT NULL DEFAULT '',
                loaded_at timestamptz NOT NULL DEFAULT now(),
                CONSTRAINT chunk_ledger_once UNIQUE (table_name, chunk_key, checksum)
            );
            COMMENT ON TABLE {s}.chunk_ledger IS
                'Chunks committed by airflow_bulkload: one row per chunk, written in the '
                'transaction that loaded it. The unique key''s (table_name, chunk_key) prefix '
                'finds a chunk loaded with another checksum.';
            """
        ).format(s=_S),
    ),
    (
        2,
        "bulk-mode leases and saved server settings",
        sql.SQL(
            """
            CREATE TABLE {s}.bulk_mode_leases (
                token text PRIMARY KEY,
                holder text NOT NULL,
                expires_at double precision NOT NULL
            );
            COMMENT ON TABLE {s}.bulk_mode_leases IS
                'Holders of bulk mode on this server (dag/table/logical date); settings are '
                'restored when the last live lease goes. expires_at is epoch seconds.';
            CREATE TABLE {s}.bulk_mode_settings (
                name text PRIMARY KEY,
                original text,
                position integer NOT NULL,
                saved_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE {s}.bulk_mode_settings IS
                'Server settings bulk mode changed, with their postgresql.auto.conf value before '
                '(NULL: not set there, restored with ALTER SYSTEM RESET).';
            """
        ).format(s=_S),
    ),
    (
        3,
        "saved table state and per-table claims",
        sql.SQL(
            """
            CREATE TABLE {s}.table_state (
                table_name text NOT NULL,
                load_id text NOT NULL,
                status text NOT NULL CHECK (status IN ('saved', 'prepared', 'done')),
                saved jsonb NOT NULL,
                dropped jsonb NOT NULL DEFAULT '[]',
                decision jsonb NOT NULL DEFAULT '{{}}',
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (table_name, load_id)
            );
            COMMENT ON TABLE {s}.table_state IS
                'A table''s indexes, constraints and reloptions, saved by prepare_table before '
                'anything was dropped; finalize/restore rebuild from it and mark it done.';
            CREATE TABLE {s}.table_claims (
                table_name text PRIMARY KEY,
                load_id text NOT NULL,
                holder text NOT NULL,
                claimed_at timestamptz NOT NULL DEFAULT now()
            );
            COMMENT ON TABLE {s}.table_claims IS
                'The load that prepared a table and has not finalized/restored it yet: a second '
                'load of the table waits or fails naming the holder.';
            """
        ).format(s=_S),
    ),
    (
        4,
        "ledger entries bound to the table's rows, and load records",
        sql.SQL(
            """
            ALTER TABLE {s}.chunk_ledger
                ADD COLUMN probe jsonb,
                ADD COLUMN generation text;
            COMMENT ON COLUMN {s}.chunk_ledger.probe IS
                'The chunk''s first and last key: looked up before a re-run skips the chunk.';
            COMMENT ON COLUMN {s}.chunk_ledger.generation IS
                'The table''s oid and filenode when the chunk loaded (changes on re-create, '
                'TRUNCATE, VACUUM FULL, CLUSTER).';
            CREATE TABLE {s}.loads (
                table_name text NOT NULL,
                staging_prefix text NOT NULL,
                load_id text NOT NULL,
                empty_before boolean NOT NULL,
                verified boolean NOT NULL DEFAULT false,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (table_name, staging_prefix)
            );
            COMMENT ON TABLE {s}.loads IS
                'One staged input loaded into a table: whether the table was empty when the load '
                'began, and whether the load report verified the rows in the table.';
            """
        ).format(s=_S),
    ),
)

_LEDGER_COLUMNS = sql.SQL(
    "table_name, chunk_key, checksum, rows, bytes, load_id, probe, generation"
)


def _ledger_entry(row: Sequence[Any]) -> LedgerEntry:
    probe = row[6]
    return LedgerEntry(
        table=row[0],
        chunk_key=row[1],
        checksum=row[2],
        rows=int(row[3]),
        bytes=int(row[4]),
        load_id=row[5],
        probe=KeyProbe(list(probe["columns"]), list(probe["first"]), list(probe["last"]))
        if probe
        else None,
        generation=row[7],
    )


# -- COPY options ---------------------------------------------------------------------------------

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


def table_identifier(table: TableRef) -> sql.Identifier:
    if table.schema is None:
        return sql.Identifier(table.name)
    return sql.Identifier(table.schema, table.name)


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


def chunk_lock_key(table: str, chunk_key: str) -> int:
    """A stable signed 64-bit advisory-lock key for one (table, chunk key)."""
    digest = hashlib.sha256(f"bulkload-chunk\0{table}\0{chunk_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def load_slot_key(table: str) -> int:
    """A stable signed 32-bit advisory-lock key naming one table's load slots."""
    digest = hashlib.sha256(f"bulkload-slots\0{table}".encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)


# -- error translation ----------------------------------------------------------------------------

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

_IMPORTED_ROWS = re.compile(r"^\s*(\d+) rows? imported into relation", re.IGNORECASE)


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
    """Turn a psycopg error raised by a load into a :class:`ChunkLoadError`, or ``None`` when it
    is not about the input (a missing table, a lost connection: those propagate as they are)."""
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


def parse_imported_rows(result: str | None) -> int:
    """The row count from ``aws_s3.table_import_from_s3``'s result text."""
    match = _IMPORTED_ROWS.match(result or "")
    if not match:
        raise BulkLoadError(
            f"aws_s3.table_import_from_s3 returned {result!r}; expected "
            "'<N> rows imported into relation ...'"
        )
    return int(match.group(1))


class PostgresDialect(Dialect):
    """PostgreSQL 12+ (RDS, Aurora and self-managed), over psycopg 3 connections."""

    name: ClassVar[str] = "postgres"
    max_identifier_length: ClassVar[int] = 63
    server_side_methods: ClassVar[tuple[str, ...]] = ("rds_s3",)
    load_errors_count_lines: ClassVar[bool] = True

    # -- names ------------------------------------------------------------------------------------
    def qualified_name(self, conn: Any, table: TableRef) -> TableRef:
        """Fill in the schema the way the server resolves the name: the schema of the table the
        search path finds, else ``current_schema()`` (where a new table would go)."""
        if table.schema is not None:
            return table
        with self._read(conn) as cur:
            cur.execute(
                "SELECT n.nspname FROM pg_catalog.pg_class c"
                " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                " WHERE c.oid = pg_catalog.to_regclass(%s)",
                (sql.Identifier(table.name).as_string(conn),),
            )
            row = cur.fetchone()
            if row is None:
                cur.execute("SELECT pg_catalog.current_schema()")
                row = cur.fetchone()
        if row is None or row[0] is None:
            raise BulkLoadError(
                f"cannot tell which schema {table.name!r} is in: the search_path names no "
                "existing schema; qualify the table as schema.table"
            )
        return TableRef(name=table.name, schema=str(row[0]))

    # -- transactions and state -------------------------------------------------------------------
    @contextmanager
    def transaction(self, conn: Any) -> Iterator[None]:
        """One READ COMMITTED transaction: commit on success, roll back on any exception.

        READ COMMITTED whatever the server default, so a statement after a lock wait sees what
        the lock holder committed (the ledger check relies on it).
        """
        if conn.autocommit:
            with conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
                yield
            return
        if conn.info.transaction_status == TransactionStatus.IDLE:
            conn.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
        try:
            yield
        except BaseException:
            conn.rollback()
            raise
        conn.commit()

    @contextmanager
    def _read(self, conn: Any) -> Iterator[Any]:
        """A cursor for catalog reads that leaves no transaction open it did not find open."""
        was_idle = conn.info.transaction_status == TransactionStatus.IDLE and not conn.autocommit
        try:
            with conn.cursor() as cur:
                yield cur
        finally:
            if was_idle:
                conn.rollback()

    def state_schema_version(self, conn: Any) -> int:
        """The highest applied migration, 0 when the state schema does not exist yet."""
        with self._read(conn) as cur:
            cur.execute(
                "SELECT pg_catalog.to_regclass(%s) IS NOT NULL",
                (sql.Identifier(STATE_SCHEMA, "schema_migrations").as_string(conn),),
            )
            row = cur.fetchone()
            if not row or not row[0]:
                return 0
            cur.execute(sql.SQL("SELECT max(version) FROM {}.schema_migrations").format(_S))
            row = cur.fetchone()
            return int(row[0]) if row and row[0] is not None else 0

    def ensure_state_schema(self, conn: Any) -> None:
        """Create/upgrade schema ``bulkload``; concurrent first users wait on an advisory lock
        and then find the work done. Commits its own work."""
        latest = MIGRATIONS[-1][0]
        if self.state_schema_version(conn) >= latest:
            return
        with self.transaction(conn), conn.cursor() as cur:
            cur.execute("SELECT pg_catalog.pg_advisory_xact_lock(%s, %s)", _MIGRATION_LOCK)
            cur.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(_S))
            cur.execute(
                sql.SQL(
                    "CREATE TABLE IF NOT EXISTS {}.schema_migrations ("
                    " version integer PRIMARY KEY,"
                    " description text NOT NULL,"
                    " applied_at timestamptz NOT NULL DEFAULT now())"
                ).format(_S)
            )
            cur.execute(sql.SQL("SELECT version FROM {}.schema_migrations").format(_S))
            applied = {int(r[0]) for r in cur.fetchall()}
            for version, description, statement in MIGRATIONS:
                if version in applied:
                    continue
                cur.execute(statement)
                cur.execute(
                    sql.SQL(
                        "INSERT INTO {}.schema_migrations (version, description) VALUES (%s, %s)"
                    ).format(_S),
                    (version, description),
                )

    # -- chunk ledger -----------------------------------------------------------------------------
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
                ).format(_LEDGER_COLUMNS, _S),
                (table_name, chunk.key, chunk.checksum),
            )
            row = cur.fetchone()
        return _ledger_entry(row) if row is not None else None

    def record_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.chunk_ledger"
                " (table_name, chunk_key, checksum, rows, bytes, load_id, probe, generation)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s)"
            ).format(_S),
            (
                entry.table,
                entry.chunk_key,
                entry.checksum,
                entry.rows,
                entry.bytes,
                entry.load_id,
                entry.probe.to_json() if entry.probe else None,
                entry.generation,
            ),
        )

    def ledger_entries(self, conn: Any, table: TableRef, key_prefix: str) -> list[LedgerEntry]:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT {} FROM {}.chunk_ledger WHERE table_name = %s"
                    " AND left(chunk_key, length(%s)) = %s ORDER BY chunk_key, loaded_at"
                ).format(_LEDGER_COLUMNS, _S),
                (str(table), key_prefix, key_prefix),
            )
            rows = cur.fetchall()
        return [_ledger_entry(r) for r in rows]

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

    # -- the table as the truth -------------------------------------------------------------------
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
                [None if v is None else str(v) for key in keys for v in key],
            )
            row = cur.fetchone()
        return [bool(v) for v in (row or [])]

    def table_is_empty(self, conn: Any, table: TableRef) -> bool:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL("SELECT NOT EXISTS (SELECT 1 FROM {})").format(table_identifier(table))
            )
            row = cur.fetchone()
        return bool(row and row[0])

    def count_rows(self, conn: Any, table: TableRef) -> int:
        with self._read(conn) as cur:
            cur.execute(sql.SQL("SELECT count(*) FROM {}").format(table_identifier(table)))
            row = cur.fetchone()
        return int(row[0]) if row else 0

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

    def empty_table(self, conn: Any, table: TableRef) -> None:
        with self.transaction(conn):
            conn.execute(sql.SQL("TRUNCATE TABLE {}").format(table_identifier(table)))

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
        if row is None:
            return None
        return LoadRecord(str(table), staging_prefix, row[0], bool(row[1]), bool(row[2]))

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

    def withdraw_chunk(
        self,
        conn: Any,
        table: TableRef,
        entry: LedgerEntry,
        chunk: ChunkSpec,
        key_columns: list[str],
        stream: ChunkStream,
        *,
        exact: bool = True,
    ) -> int:
        """COPY the chunk into a temporary table (dropped at commit), delete the rows whose key
        matches, and the ledger entry; under the chunk's claim, so no loader races it. A delete
        that does not match the ledger's row count rolls back (see the interface)."""
        info = self.describe_table(conn, table)
        generated = set(info.extra.get("generated_columns", []))
        columns = chunk.columns or [c.name for c in info.columns if c.name not in generated]
        scratch = TableRef(name="bulkload_withdrawn_rows", schema="pg_temp")
        match = sql.SQL(" AND ").join(
            sql.SQL("t.{c} = w.{c}").format(c=sql.Identifier(c)) for c in key_columns
        )
        with self.transaction(conn):
            self.claim_chunk(conn, table, chunk)
            conn.execute(
                sql.SQL(
                    "CREATE TEMP TABLE {} ON COMMIT DROP AS SELECT {} FROM {} WITH NO DATA"
                ).format(
                    sql.Identifier(scratch.name),
                    sql.SQL(", ").join(sql.Identifier(c) for c in columns),
                    table_identifier(table),
                )
            )
            self.load_stream(conn, scratch, columns, chunk.format, stream, chunk.uri)
            deleted = conn.execute(
                sql.SQL("DELETE FROM {} AS t USING {} AS w WHERE {}").format(
                    table_identifier(table), table_identifier(scratch), match
                )
            ).rowcount
            check_withdrawn(entry, chunk.uri, table, int(deleted), exact=exact)
            self.forget_chunk(conn, entry)
        return int(deleted)

    # -- load slots -------------------------------------------------------------------------------
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

    # -- loading ------------------------------------------------------------------------------------
    def tune_load_session(self, conn: Any) -> None:
        """Don't wait for the WAL flush at commit: a crash can lose the last commits, and with
        them their ledger rows, so a re-run loads those chunks again — never twice."""
        conn.execute("SET LOCAL synchronous_commit = off")

    def load_stream(
        self,
        conn: Any,
        table: TableRef,
        columns: list[str] | None,
        file_format: FileFormat,
        stream: ChunkStream,
        source: str,
    ) -> int:
        """``COPY ... FROM STDIN`` fed block by block from ``stream`` (bounded memory).

        A bad row raises :class:`ChunkLoadError` with PostgreSQL's line (header counted) and
        column; an error from the stream (corrupt gzip) aborts the COPY and propagates as is.
        """
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

    def load_server_side(
        self,
        conn: Any,
        method: str,
        table: TableRef,
        columns: list[str] | None,
        chunk: ChunkSpec,
        region: str,
    ) -> int:
        if method != "rds_s3":
            return super().load_server_side(conn, method, table, columns, chunk, region)
        statement, params = self.import_from_s3_call(
            conn, table, columns, chunk.format, chunk.bucket, chunk.key, region
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

    # -- introspection ------------------------------------------------------------------------------
    def describe_table(self, conn: Any, table: TableRef) -> TableInfo:
        """Read the table from the catalogs.

        Definitions come from ``pg_get_indexdef``/``pg_get_constraintdef``/``pg_get_triggerdef``
        with ``search_path`` emptied for the read, so every name in them is schema-qualified and
        the DDL recreates the same objects from any session.
        """
        if table.schema is None:
            table = self.qualified_name(conn, table)
        with self._read(conn) as cur:
            cur.execute("SELECT pg_catalog.current_setting('search_path')")
            saved_path = cur.fetchone()[0]
            cur.execute("SELECT pg_catalog.set_config('search_path', 'pg_catalog', false)")
            try:
                return self._describe(cur, table)
            finally:
                if conn.info.transaction_status != TransactionStatus.INERROR:
                    cur.execute(
                        "SELECT pg_catalog.set_config('search_path', %s, false)", (saved_path,)
                    )

    def _describe(self, cur: Any, table: TableRef) -> TableInfo:
        cur.execute(
            "SELECT c.oid, c.relkind, c.relpersistence, c.reltuples,"
            " pg_total_relation_size(c.oid), c.reloptions, t.reloptions"
            " FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " LEFT JOIN pg_class t ON t.oid = c.reltoastrelid"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
            (table.schema, table.name),
        )
        rel = cur.fetchone()
        if rel is None:
            raise TableNotFoundError(
                f"table {table} does not exist (or is not visible to this user)"
            )
        oid, relkind, persistence, reltuples, size, reloptions, toast_reloptions = rel
        partitions: list[list[Any]] = []
        if relkind == "p":
            # the leaves hold the rows: their size and row estimate are the table's
            cur.execute(
                "SELECT n.nspname, c.relname, c.reloptions, c.reltuples,"
                " pg_total_relation_size(c.oid)"
                " FROM pg_catalog.pg_partition_tree(%s) t"
                " JOIN pg_catalog.pg_class c ON c.oid = t.relid"
                " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                " WHERE t.isleaf ORDER BY 1, 2",
                (oid,),
            )
            leaves = cur.fetchall()
            partitions = [[leaf[0], leaf[1], _options_dict(leaf[2])] for leaf in leaves]
            reltuples = sum(max(float(leaf[3]), 0) for leaf in leaves) if leaves else reltuples
            size = sum(int(leaf[4]) for leaf in leaves)

        cur.execute(
            "SELECT a.attname, format_type(a.atttypid, a.atttypmod), NOT a.attnotnull,"
            " pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated"
            " FROM pg_attribute a"
            " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
            " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped"
            " ORDER BY a.attnum",
            (oid,),
        )
        columns: list[ColumnInfo] = []
        identity: dict[str, str] = {}
        generated: list[str] = []
        for name, data_type, nullable, default, attidentity, attgenerated in cur.fetchall():
            columns.append(ColumnInfo(name, data_type, bool(nullable), default))
            if attidentity:
                identity[name] = "always" if attidentity == "a" else "by default"
            if attgenerated:
                generated.append(name)

        # key columns by name, expressions as the server prints them (INCLUDE columns left out)
        cur.execute(
            "SELECT ic.relname, pg_get_indexdef(i.indexrelid), i.indisunique, i.indisprimary,"
            " i.indisvalid, am.amname, pg_get_expr(i.indpred, i.indrelid), con.conname,"
            " ARRAY(SELECT CASE WHEN i.indkey[k - 1] <> 0"
            "   THEN (SELECT a.attname FROM pg_attribute a"
            "         WHERE a.attrelid = i.indrelid AND a.attnum = i.indkey[k - 1])"
            "   ELSE pg_get_indexdef(i.indexrelid, k, true) END"
            "   FROM generate_series(1, i.indnkeyatts) AS k ORDER BY k),"
            " pg_catalog.obj_description(i.indexrelid, 'pg_class'),"
            " pg_catalog.obj_description(con.oid, 'pg_constraint')"
            " FROM pg_index i"
            " JOIN pg_class ic ON ic.oid = i.indexrelid"
            " JOIN pg_am am ON am.oid = ic.relam"
            " LEFT JOIN pg_constraint con ON con.conindid = i.indexrelid"
            "  AND con.conrelid = i.indrelid AND con.contype IN ('p', 'u', 'x')"
            " WHERE i.indrelid = %s ORDER BY ic.relname",
            (oid,),
        )
        indexes = [
            IndexInfo(
                name=name,
                definition=definition,
                columns=list(index_columns),
                is_unique=bool(unique),
                is_primary=bool(primary),
                constraint_name=constraint,
                method=method,
                predicate=predicate,
                is_valid=bool(valid),
                comment=comment,
                constraint_comment=constraint_comment,
            )
            for (
                name,
                definition,
                unique,
                primary,
                valid,
                method,
                predicate,
                constraint,
                index_columns,
                comment,
                constraint_comment,
            ) in cur.fetchall()
        ]

        constraint_query = (
            "SELECT con.conname, con.contype, pg_get_constraintdef(con.oid), cn.nspname,"
            " cc.relname, ARRAY(SELECT a.attname FROM unnest(con.conkey)"
            "   WITH ORDINALITY AS k(attnum, ord)"
            "   JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum"
            "   ORDER BY k.ord)"
            " FROM pg_constraint con"
            " JOIN pg_class cc ON cc.oid = con.conrelid"
            " JOIN pg_namespace cn ON cn.oid = cc.relnamespace"
        )
        cur.execute(constraint_query + " WHERE con.conrelid = %s ORDER BY con.conname", (oid,))
        constraints = [_constraint(row) for row in cur.fetchall()]
        cur.execute(
            constraint_query + " WHERE con.confrelid = %s AND con.contype = 'f'"
            " ORDER BY cn.nspname, cc.relname, con.conname",
            (oid,),
        )
        referencing = [_constraint(row) for row in cur.fetchall()]

        cur.execute(
            "SELECT tgname, pg_get_triggerdef(oid), tgenabled FROM pg_trigger"
            " WHERE tgrelid = %s AND NOT tgisinternal ORDER BY tgname",
            (oid,),
        )
        trigger_rows = cur.fetchall()

        primary = next((ix for ix in indexes if ix.is_primary), None)
        return TableInfo(
            table=table,
            columns=columns,
            primary_key=list(primary.columns) if primary else [],
            indexes=indexes,
            constraints=constraints,
            referencing_foreign_keys=referencing,
            triggers=[row[0] for row in trigger_rows],
            reloptions=_options_dict(reloptions),
            estimated_rows=max(int(reltuples), 0),
            size_bytes=int(size),
            extra={
                "oid": int(oid),
                "relkind": relkind,
                "persistence": {"p": "permanent", "u": "unlogged", "t": "temporary"}.get(
                    persistence, persistence
                ),
                # reltuples is -1 until the first VACUUM/ANALYZE (PostgreSQL 14+)
                "analyzed": reltuples >= 0,
                "toast_reloptions": _options_dict(toast_reloptions),
                "partitions": partitions,
                "identity_columns": identity,
                "generated_columns": generated,
                "trigger_definitions": {row[0]: row[1] for row in trigger_rows},
                "disabled_triggers": [row[0] for row in trigger_rows if row[2] == "D"],
            },
        )

    # -- table preparation ------------------------------------------------------------------------
    def table_snapshot(self, conn: Any, table: TableRef) -> dict[str, Any]:
        """:meth:`describe_table` as a saved state, plus the indexes incoming FKs depend on."""
        info = self.describe_table(conn, table)
        with self._read(conn) as cur:
            cur.execute(
                "SELECT DISTINCT ic.relname FROM pg_catalog.pg_constraint con"
                " JOIN pg_catalog.pg_class ic ON ic.oid = con.conindid"
                " WHERE con.confrelid = %s AND con.contype = 'f'",
                (info.extra["oid"],),
            )
            needed = [r[0] for r in cur.fetchall()]
        return snapshot_from_info(self.name, info, needed_by_fk=needed)

    def claim_table(self, conn: Any, table: TableRef, load_id: str, holder: str) -> str | None:
        row = conn.execute(
            sql.SQL(
                "INSERT INTO {s}.table_claims AS c (table_name, load_id, holder)"
                " VALUES (%s, %s, %s) ON CONFLICT (table_name) DO UPDATE"
                " SET holder = EXCLUDED.holder, claimed_at = now()"
                " WHERE c.load_id = EXCLUDED.load_id RETURNING c.load_id"
            ).format(s=_S),
            (str(table), load_id, holder),
        ).fetchone()
        if row is not None:
            return None
        other = conn.execute(
            sql.SQL(
                "SELECT load_id, holder, claimed_at FROM {s}.table_claims WHERE table_name = %s"
            ).format(s=_S),
            (str(table),),
        ).fetchone()
        if other is None:  # released between the two statements
            return self.claim_table(conn, table, load_id, holder)
        return f"load {other[0]} ({other[1]}, since {other[2]:%Y-%m-%d %H:%M:%S %Z})"

    def release_table_claim(self, conn: Any, table: TableRef, load_id: str) -> None:
        conn.execute(
            sql.SQL("DELETE FROM {s}.table_claims WHERE table_name = %s AND load_id = %s").format(
                s=_S
            ),
            (str(table), load_id),
        )

    def unfinished_table_saved_state(self, conn: Any, table: TableRef) -> dict[str, Any] | None:
        with self._read(conn) as cur:
            cur.execute(
                sql.SQL(
                    "SELECT saved FROM {s}.table_state WHERE table_name = %s AND status <> 'done'"
                    " ORDER BY updated_at DESC LIMIT 1"
                ).format(s=_S),
                (str(table),),
            )
            row = cur.fetchone()
        return None if row is None else dict(row[0])

    def read_table_state(self, conn: Any, table: TableRef, load_id: str) -> dict[str, Any] | None:
        row = conn.execute(
            sql.SQL(
                "SELECT status, saved, dropped, decision FROM {s}.table_state"
                " WHERE table_name = %s AND load_id = %s"
            ).format(s=_S),
            (str(table), load_id),
        ).fetchone()
        if row is None:
            return None
        return {"status": row[0], "saved": row[1], "dropped": row[2], "decision": row[3]}

    def write_table_state(
        self,
        conn: Any,
        table: TableRef,
        load_id: str,
        *,
        status: str,
        saved: dict[str, Any],
        dropped: list[str],
        decision: dict[str, Any],
    ) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {s}.table_state (table_name, load_id, status, saved, dropped, decision)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (table_name, load_id) DO UPDATE"
                " SET status = EXCLUDED.status, saved = EXCLUDED.saved,"
                " dropped = EXCLUDED.dropped, decision = EXCLUDED.decision,"
                " created_at = now(), updated_at = now()"
            ).format(s=_S),
            (str(table), load_id, status, Jsonb(saved), Jsonb(dropped), Jsonb(decision)),
        )

    def set_table_state_status(
        self, conn: Any, table: TableRef, load_id: str, status: str, dropped: list[str] | None
    ) -> None:
        conn.execute(
            sql.SQL(
                "UPDATE {s}.table_state SET status = %s, dropped = coalesce(%s, dropped),"
                " updated_at = now() WHERE table_name = %s AND load_id = %s"
            ).format(s=_S),
            (status, None if dropped is None else Jsonb(dropped), str(table), load_id),
        )

    def disable_autovacuum(self, conn: Any, table: TableRef) -> None:
        """Autovacuum off for the table; for a partitioned table (which has no storage and
        refuses the option), for each of its leaf partitions."""
        for target in self._storage_tables(conn, table):
            conn.execute(
                sql.SQL("ALTER TABLE {} SET (autovacuum_enabled = false)").format(
                    table_identifier(target)
                )
            )

    def _storage_tables(self, conn: Any, table: TableRef) -> list[TableRef]:
        partitions = self.describe_table(conn, table).extra.get("partitions") or []
        if not partitions:
            return [table]
        return [TableRef(name=name, schema=schema) for schema, name, _ in partitions]

    def restore_reloptions(self, conn: Any, table: TableRef, saved: dict[str, Any]) -> list[str]:
        """Put the table's storage options back as saved (and its TOAST table's, and for a
        partitioned table each leaf partition's that still exists)."""
        current = self.table_snapshot(conn, table)
        changes: list[str] = []
        now_leaves = current.get("partition_reloptions") or {}
        for leaf, options in (saved.get("partition_reloptions") or {}).items():
            if leaf not in now_leaves:
                continue  # detached or dropped since: not ours to re-create
            schema, _, name = leaf.partition(".")
            leaf_changes = self._set_options(
                conn, TableRef(name=name, schema=schema), None, options, now_leaves[leaf]
            )
            changes += [f"{leaf}: {change}" for change in leaf_changes]
        for key, prefix in (("reloptions", None), ("toast_reloptions", "toast")):
            changes += self._set_options(
                conn, table, prefix, saved.get(key) or {}, current.get(key) or {}
            )
        return changes

    def _set_options(
        self,
        conn: Any,
        table: TableRef,
        prefix: str | None,
        saved: dict[str, str],
        current: dict[str, str],
    ) -> list[str]:
        to_set, to_reset = reloption_changes(saved, current)

        def name(option: str) -> sql.Identifier:
            return sql.Identifier(prefix, option) if prefix else sql.Identifier(option)

        if to_set:
            conn.execute(
                sql.SQL("ALTER TABLE {} SET ({})").format(
                    table_identifier(table),
                    sql.SQL(", ").join(
                        sql.SQL("{} = {}").format(name(k), sql.Literal(v))
                        for k, v in to_set.items()
                    ),
                )
            )
        if to_reset:
            conn.execute(
                sql.SQL("ALTER TABLE {} RESET ({})").format(
                    table_identifier(table), sql.SQL(", ").join(name(k) for k in to_reset)
                )
            )
        label = f"{prefix}." if prefix else ""
        return [f"SET {label}{k}={v}" for k, v in to_set.items()] + [
            f"RESET {label}{k}" for k in to_reset
        ]

    def drop_index(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        if index.get("constraint_name"):
            conn.execute(
                sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
                    table_identifier(table), sql.Identifier(index["constraint_name"])
                )
            )
        # the constraint took its index with it; a plain index (or a left-over) goes here
        if table.schema is None:
            raise BulkLoadError(f"drop_index needs a qualified table name, got {table}")
        conn.execute(
            sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(table.schema, index["name"]))
        )

    def drop_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT IF EXISTS {}").format(
                sql.Identifier(fk["schema"], fk["table"]), sql.Identifier(fk["name"])
            )
        )

    def create_indexes(
        self,
        conn: Any,
        table: TableRef,
        indexes: list[dict[str, Any]],
        maintenance_work_mem: str,
        *,
        concurrent_sessions: int = 1,
    ) -> None:
        """Each saved ``pg_get_indexdef`` text (catalog output, schema-qualified) as captured,
        with ``maintenance_work_mem`` raised for this session. When several sessions build at
        once, each builds without parallel workers: the sessions already keep the cores busy,
        and workers on top only oversubscribe them (measured on 2 cores, 5 M rows, 3 indexes:
        3 sessions with workers 6.3 s, without 4.4 s; one session with workers 4.9 s)."""
        conn.execute(
            "SELECT pg_catalog.set_config('maintenance_work_mem', %s, false)",
            (maintenance_work_mem,),
        )
        if concurrent_sessions > 1:
            conn.execute(
                "SELECT pg_catalog.set_config('max_parallel_maintenance_workers', '0', false)"
            )
        for index in indexes:
            conn.execute(sql.SQL(index["definition"]))

    def restore_comments(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """Put a rebuilt index's comment (and its constraint's) back as saved."""
        if index.get("comment") is not None:
            conn.execute(
                sql.SQL("COMMENT ON INDEX {} IS {}").format(
                    sql.Identifier(table.schema or "public", index["name"]),
                    sql.Literal(index["comment"]),
                )
            )
        if index.get("constraint_comment") is not None and index.get("constraint_name"):
            conn.execute(
                sql.SQL("COMMENT ON CONSTRAINT {} ON {} IS {}").format(
                    sql.Identifier(index["constraint_name"]),
                    table_identifier(table),
                    sql.Literal(index["constraint_comment"]),
                )
            )

    def attach_constraint(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """``ADD CONSTRAINT ... PRIMARY KEY/UNIQUE USING INDEX``: no second build, and no lock that
        blocks other sessions' index builds for the length of a build."""
        kind = sql.SQL("PRIMARY KEY" if index["is_primary"] else "UNIQUE")
        definition = (index.get("constraint_definition") or "").upper()
        deferral = sql.SQL("")
        if "INITIALLY DEFERRED" in definition:
            deferral = sql.SQL(" DEFERRABLE INITIALLY DEFERRED")
        elif "DEFERRABLE" in definition and "NOT DEFERRABLE" not in definition:
            deferral = sql.SQL(" DEFERRABLE")
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} {} USING INDEX {}{}").format(
                table_identifier(table),
                sql.Identifier(index["constraint_name"]),
                kind,
                sql.Identifier(index["name"]),
                deferral,
            )
        )

    def add_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        """``ADD CONSTRAINT ... NOT VALID`` (brief lock), then ``VALIDATE CONSTRAINT`` (checks the
        rows under a lock that lets writes through). A foreign key saved as NOT VALID stays so."""
        owner = sql.Identifier(fk["schema"], fk["table"])
        name = sql.Identifier(fk["name"])
        definition = normalise_ddl(fk["definition"])
        was_valid = not definition.upper().endswith("NOT VALID")
        try:
            # one transaction: a failed validation takes the constraint back out, never leaving
            # it NOT VALID where it was valid
            with conn.transaction():
                conn.execute(
                    sql.SQL("ALTER TABLE {} ADD CONSTRAINT {} ").format(owner, name)
                    + sql.SQL(definition)
                    + sql.SQL(" NOT VALID" if was_valid else "")
                )
                if was_valid:
                    conn.execute(
                        sql.SQL("ALTER TABLE {} VALIDATE CONSTRAINT {}").format(owner, name)
                    )
        except pg_errors.ForeignKeyViolation as exc:
            raise ForeignKeyViolationError(
                f"foreign key {fk['name']} on {fk['schema']}.{fk['table']} ({definition}) cannot "
                f"be re-added: loaded rows reference missing parents ({exc.diag.message_detail}). "
                "Load the parents first, or remove the orphan rows, then run finalize (or "
                "restore) again"
            ) from exc

    def duplicate_key_sample(
        self, conn: Any, table: TableRef, index: dict[str, Any], exc: Exception, limit: int = 5
    ) -> list[str] | None:
        if not isinstance(exc, pg_errors.UniqueViolation):
            return None
        sample: list[str] = []
        if exc.diag.message_detail:
            sample.append(exc.diag.message_detail)
        columns = index.get("columns") or []
        plain = {c.name for c in self.describe_table(conn, table).columns}
        if columns and all(c in plain for c in columns) and index.get("method") == "btree":
            cols = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
            rows = conn.execute(
                sql.SQL(
                    "SELECT {cols}, count(*) FROM {t} WHERE ({not_null})"
                    " GROUP BY {cols} HAVING count(*) > 1 LIMIT {n}"
                ).format(
                    cols=cols,
                    t=table_identifier(table),
                    not_null=sql.SQL(" AND ").join(
                        sql.SQL("{} IS NOT NULL").format(sql.Identifier(c)) for c in columns
                    ),
                    n=sql.Literal(limit),
                )
            ).fetchall()
            sample += [
                f"({', '.join(columns)})=({', '.join(map(str, r[:-1]))}) x{r[-1]}" for r in rows
            ]
        return sample

    def analyze(self, conn: Any, table: TableRef) -> None:
        conn.execute(sql.SQL("ANALYZE {}").format(table_identifier(table)))

    def checkpoint(self, conn: Any) -> str:
        """``CHECKPOINT`` needs superuser, or the ``pg_checkpoint`` role on PostgreSQL 15+ (on RDS
        the master user has ``rds_superuser``, which may run it)."""
        try:
            conn.execute("CHECKPOINT")
        except pg_errors.InsufficientPrivilege as exc:
            raise InsufficientPrivilegeError(
                "CHECKPOINT needs a superuser or, on PostgreSQL 15+, membership in pg_checkpoint "
                "(GRANT pg_checkpoint TO <user>); on RDS use the master user (rds_superuser). "
                f"Server said: {exc.diag.message_primary}"
            ) from exc
        return "CHECKPOINT"

    # -- pre-flight reads ---------------------------------------------------------------------------
    def server_facts(self, conn: Any) -> ServerFacts:
        """Version and whether ``aws_s3.table_import_from_s3`` (the ``rds_s3`` method's function)
        is callable here, and whether the ``aws_s3`` extension could be installed."""
        with self._read(conn) as cur:
            cur.execute(
                "SELECT pg_catalog.current_setting('server_version'),"
                " pg_catalog.to_regprocedure(%s) IS NOT NULL,"
                " EXISTS (SELECT 1 FROM pg_catalog.pg_available_extensions WHERE name = %s)",
                ("aws_s3.table_import_from_s3(text,text,text,text,text,text)", "aws_s3"),
            )
            version, import_function, available = cur.fetchone()
            cur.execute(_CAN_CHECKPOINT)
            row = cur.fetchone()
        return ServerFacts(
            engine=self.name,
            version=str(version),
            aws_s3_installed=bool(import_function),
            aws_s3_available=bool(available) or bool(import_function),
            can_checkpoint=bool(row and row[0]),
        )

    # -- server settings and bulk-mode leases ---------------------------------------------------
    # ALTER SYSTEM writes postgresql.auto.conf; the saved original is the value that was there,
    # so a restore leaves the file as it was (ALTER SYSTEM RESET when it was not set there).
    @contextmanager
    def bulk_mode_lock(self, conn: Any) -> Iterator[None]:
        conn.execute("SELECT pg_catalog.pg_advisory_lock(%s, %s)", _BULK_MODE_LOCK)
        try:
            yield
        finally:
            conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s, %s)", _BULK_MODE_LOCK)

    def bulk_mode_leases(self, conn: Any) -> list[tuple[str, str, float]]:
        rows = conn.execute(
            sql.SQL("SELECT token, holder, expires_at FROM {}.bulk_mode_leases").format(_S)
        ).fetchall()
        return [(r[0], r[1], float(r[2])) for r in rows]

    def put_bulk_mode_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.bulk_mode_leases (token, holder, expires_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (token) DO UPDATE SET expires_at = EXCLUDED.expires_at"
            ).format(_S),
            (token, holder, expires_at),
        )

    def delete_bulk_mode_leases(self, conn: Any, tokens: list[str]) -> None:
        if tokens:
            conn.execute(
                sql.SQL("DELETE FROM {}.bulk_mode_leases WHERE token = ANY(%s)").format(_S),
                (tokens,),
            )

    def saved_server_settings(self, conn: Any) -> list[SavedSetting]:
        rows = conn.execute(
            sql.SQL(
                "SELECT name, original, position FROM {}.bulk_mode_settings ORDER BY position"
            ).format(_S)
        ).fetchall()
        return [SavedSetting(r[0], r[1], r[2]) for r in rows]

    def save_server_setting(self, conn: Any, name: str, position: int) -> None:
        row = conn.execute(
            "SELECT setting FROM pg_catalog.pg_file_settings"
            " WHERE name = %s AND right(sourcefile, 20) = 'postgresql.auto.conf'"
            " ORDER BY seqno DESC LIMIT 1",
            (name,),
        ).fetchone()
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.bulk_mode_settings (name, original, position) VALUES (%s, %s, %s)"
                " ON CONFLICT (name) DO NOTHING"
            ).format(_S),
            (name, None if row is None else str(row[0]), position),
        )

    def forget_saved_server_settings(self, conn: Any) -> None:
        conn.execute(sql.SQL("DELETE FROM {}.bulk_mode_settings").format(_S))

    def check_server_setting(self, conn: Any, name: str) -> None:
        row = conn.execute(
            "SELECT context FROM pg_catalog.pg_settings WHERE name = %s", (name,)
        ).fetchone()
        if row is None:
            raise BulkModeRefusedError(f"PostgreSQL has no setting {name!r}")
        if row[0] not in _RELOADABLE_CONTEXTS:
            raise BulkModeRefusedError(
                f"PostgreSQL setting {name} has context {row[0]!r}: it only changes with a server "
                "restart, which bulk mode never does on a self-managed server"
            )

    def set_server_setting(self, conn: Any, name: str, value: str) -> None:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
        )

    def restore_server_setting(self, conn: Any, saved: SavedSetting) -> None:
        if saved.original is None:
            conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(saved.name)))
        else:
            self.set_server_setting(conn, saved.name, saved.original)

    def apply_server_settings(self, conn: Any) -> None:
        """Reload and wait until this session has re-read the configuration (the reload is
        asynchronous; ``pg_conf_load_time()`` moves once the session has)."""
        before = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()[0]
        conn.execute("SELECT pg_catalog.pg_reload_conf()")
        for _ in range(100):
            if conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()[0] > before:
                break
            time.sleep(0.05)
        else:
            raise BulkModeStateError("PostgreSQL did not reload its configuration within 5 s")
        errors = conn.execute(
            "SELECT name, error FROM pg_catalog.pg_file_settings WHERE error IS NOT NULL"
        ).fetchall()
        if errors:
            raise BulkModeStateError(f"PostgreSQL configuration has errors after reload: {errors}")

    def show_server_setting(self, conn: Any, name: str) -> str:
        return str(conn.execute("SELECT pg_catalog.current_setting(%s)", (name,)).fetchone()[0])


#: superuser, or a member of pg_checkpoint (PostgreSQL 15+) or rds_superuser (RDS's master user)
_CAN_CHECKPOINT = (
    "SELECT r.rolsuper OR EXISTS ("
    " SELECT 1 FROM pg_catalog.pg_roles g"
    " WHERE g.rolname IN ('pg_checkpoint', 'rds_superuser')"
    " AND pg_catalog.pg_has_role(r.oid, g.oid, 'MEMBER'))"
    " FROM pg_catalog.pg_roles r WHERE r.rolname = current_user"
)


def _constraint(row: Sequence[Any]) -> ConstraintInfo:
    name, kind, definition, schema, relname, columns = row
    return ConstraintInfo(
        name=name,
        kind=kind,
        definition=definition,
        table=TableRef(name=relname, schema=schema),
        columns=list(columns),
    )


def _options_dict(options: Sequence[str] | None) -> dict[str, str]:
    """``['fillfactor=70', 'autovacuum_enabled=false']`` -> ``{'fillfactor': '70', ...}``."""
    result: dict[str, str] = {}
    for option in options or ():
        key, _, value = option.partition("=")
        result[key] = value
    return result
