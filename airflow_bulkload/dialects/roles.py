"""The engine interface, by concern: six small roles, and :class:`Dialect`, their union.

Each engine implements every role (``dialects/postgres/``, ``dialects/mysql/``: one module per
role) and composes them into one engine object, so callers keep a single dialect. The data the
roles speak in lives in :mod:`airflow_bulkload.catalog`. No SQL text lives here.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_bulkload.catalog import (
    EngineTraits,
    LedgerEntry,
    LoadRecord,
    SavedSetting,
    ServerFacts,
    TableInfo,
    TableRef,
    TableState,
    check_identifier,
)
from airflow_bulkload.dialects.requests import IndexBuild, LoadInto, Withdrawal, WithdrawScratch
from airflow_bulkload.dialects.work_tables import WorkTables
from airflow_bulkload.staging.manifest import ChunkSpec

if TYPE_CHECKING:
    from airflow_bulkload.s3io import ChunkStream


class Session(abc.ABC):
    """Connections, names, transactions and the state schema: what the other roles run on."""

    name: ClassVar[str]

    #: the longest identifier the engine accepts, in bytes
    max_identifier_length: ClassVar[int]
    #: what the engine does differently, for callers to decide on instead of its name
    traits: ClassVar[EngineTraits]

    @abc.abstractmethod
    def connect(self, conn_id: str) -> Any:
        """A new DB-API connection for the Airflow connection ``conn_id``, autocommit off.

        The caller closes it.
        """

    @abc.abstractmethod
    def set_autocommit(self, conn: Any, on: bool) -> None:
        """Turn the driver's autocommit on or off for ``conn``."""

    def table_ref(self, table: str | TableRef) -> TableRef:
        """Parse and validate a table name (each part checked, nothing quoted yet)."""
        ref = table if isinstance(table, TableRef) else TableRef.parse(table)
        check_identifier(ref.name, max_length=self.max_identifier_length, what="table name")
        if ref.schema is not None:
            check_identifier(ref.schema, max_length=self.max_identifier_length, what="schema name")
        return ref

    @abc.abstractmethod
    def qualified_name(self, conn: Any, table: TableRef) -> TableRef:
        """The table with its schema filled in (current schema/database when not given)."""

    @abc.abstractmethod
    def transaction(self, conn: Any) -> AbstractContextManager[None]:
        """Run the block in one transaction: commit on success, roll back on any exception."""

    @abc.abstractmethod
    def ensure_state_schema(self, conn: Any) -> None:
        """Create the durable state tables if missing; idempotent, safe when run concurrently.

        Commits its own work.
        """


class Ledger(abc.ABC):
    """The chunk ledger and the load records: which chunks are committed into a table.

    Entries are checked against the table's own rows: the ledger is a cache of the table, not
    its truth.
    """

    @abc.abstractmethod
    def claim_chunk(self, conn: Any, table: TableRef, chunk: ChunkSpec) -> LedgerEntry | None:
        """Serialise loaders of this (table, chunk key) until the transaction ends.

        Then return the ledger entry if the chunk is already committed (any checksum), else
        ``None``.
        """

    @abc.abstractmethod
    def record_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        """Insert the ledger row, in the loading transaction."""

    @abc.abstractmethod
    def ledger_entries(self, conn: Any, table: TableRef, key_prefix: str) -> list[LedgerEntry]:
        """The committed chunks of ``table`` whose key starts with ``key_prefix``, by key."""

    @abc.abstractmethod
    def withdraw_scratch(
        self, conn: Any, table: TableRef, columns: list[str] | None, *, keyless: bool, tag: str
    ) -> AbstractContextManager[WithdrawScratch]:
        """A scratch table for :meth:`withdraw_rows`, made before their transaction, dropped after.

        It holds ``columns`` of ``table`` (``None``: every loadable column). ``keyless``: rows
        will match on every column (the engine may index for it). ``tag`` names what it is for
        (a chunk key), so a killed run's leftover is replaced by the next withdraw of it.
        """

    @abc.abstractmethod
    def withdraw_rows(
        self, conn: Any, withdrawals: Sequence[Withdrawal], scratch: WithdrawScratch
    ) -> int:
        """Delete the rows that match a row of ``scratch``, then empty it; returns rows deleted.

        In the caller's transaction, which claimed the chunks and read them into ``scratch``
        (:meth:`~ChunkLoader.load_stream`); checking the count against the ledger, and dropping
        the ledger entries, are the caller's. The ``withdrawals`` (of one table) share their
        ``key_columns``: the rows of the table whose ``key_columns`` equal a scratch row's
        match. A match whose other columns differ from the chunk's row changed since it loaded
        (another load, a person): :class:`~airflow_bulkload.exceptions.WithdrawChangedRowsError`,
        naming the first withdrawal's chunk. With no ``key_columns`` (the table has no key the
        chunks carry), a row matches on every column of ``scratch``, NULL-safely; a table row
        equal to several scratch rows is deleted once.
        """

    @abc.abstractmethod
    def forget_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        """Delete the ledger entry alone (its rows are already gone), in the open transaction."""

    @abc.abstractmethod
    def set_chunk_generation(self, conn: Any, entry: LedgerEntry, generation: str) -> None:
        """Record that the entry's rows survived a rebuild of the table (new generation)."""

    @abc.abstractmethod
    def table_generation(self, conn: Any, table: TableRef) -> str | None:
        """The table's physical identity, ``None`` when the server will not tell (no privilege).

        It changes when the table is dropped and re-created, truncated or rebuilt (VACUUM FULL,
        CLUSTER, OPTIMIZE TABLE), not when rows are inserted or deleted.
        """

    @abc.abstractmethod
    def keys_present(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[bool]:
        """For each key (values of ``columns``, as text), whether a row with it is in ``table``."""

    @abc.abstractmethod
    def stored_key_values(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[list[Any]]:
        """Each key (values of ``columns``, as text) as ``table`` stores it, read back as text.

        Each value is converted to its column's type as a load converts it (a ``timestamp(0)``
        rounds its fraction, a ``numeric(10,1)`` its digits), so :meth:`keys_present` finds the
        row a load of that text stored. Run in the loading transaction.
        """

    @abc.abstractmethod
    def ledger_rows(self, conn: Any, table: TableRef) -> int:
        """The rows the chunk ledger says are in ``table``, over all its entries."""

    @abc.abstractmethod
    def read_load_record(
        self, conn: Any, table: TableRef, staging_prefix: str
    ) -> LoadRecord | None:
        """The load record of one staged input into ``table``, if any."""

    @abc.abstractmethod
    def write_load_record(self, conn: Any, record: LoadRecord) -> None:
        """Insert or replace a load record (committed by the caller's transaction)."""

    @abc.abstractmethod
    def delete_load_records(self, conn: Any, table: TableRef, prefix: str) -> None:
        """Delete the load records of ``table`` whose staging prefix starts with ``prefix``."""


class ChunkLoader(abc.ABC):
    """Loading a chunk: session tuning, client stream, server-side pull, per-table load slots."""

    name: ClassVar[str]  # the engine's, declared by its Session
    #: the load methods this engine offers besides ``client``
    server_side_methods: ClassVar[tuple[str, ...]] = ()
    #: whether a load error's line counts physical lines (newlines inside quoted fields
    #: included, as PostgreSQL's COPY does) rather than records (MySQL's rows)
    load_errors_count_lines: ClassVar[bool] = False

    @abc.abstractmethod
    def try_acquire_load_slot(self, conn: Any, table: TableRef, slot: int) -> bool:
        """Take load slot ``slot`` of ``table`` now; ``False`` when another session holds it.

        It does not wait. Slots are session-scoped on the server, so a killed worker's slot frees
        itself when its connection goes.
        """

    @abc.abstractmethod
    def release_load_slot(self, conn: Any, table: TableRef, slot: int) -> None:
        """Give back a slot taken by :meth:`try_acquire_load_slot`."""

    @abc.abstractmethod
    def tune_load_session(self, conn: Any) -> None:
        """Per-transaction/session settings for a fast, still-checked load."""

    @abc.abstractmethod
    def load_stream(self, conn: Any, into: LoadInto, stream: ChunkStream, source: str) -> int:
        """Load rows read from ``stream`` (decompressed bytes) and return the number loaded.

        Bad input raises :class:`~airflow_bulkload.exceptions.ChunkLoadError` naming ``source``.
        """

    @abc.abstractmethod
    def scratch_copy(self, conn: Any, table: TableRef) -> TableRef:
        """A temporary table of ``table``'s columns, types, defaults and checks, for this session.

        A dry run loads a chunk into it to see every value through the engine's own parser;
        it goes with the transaction (PostgreSQL) or the session (MySQL), whatever happens.
        """

    def load_server_side(
        self, conn: Any, method: str, into: LoadInto, chunk: ChunkSpec, region: str
    ) -> int:
        """Have the server pull the chunk from S3 itself by ``method``; returns rows loaded.

        ``method`` must be one of the engine's :attr:`server_side_methods`.
        """
        if method not in self.server_side_methods:
            raise NotImplementedError(f"{self.name} has no server-side load method {method!r}")
        return self.load_from_s3(conn, into, chunk, region)

    @abc.abstractmethod
    def load_from_s3(self, conn: Any, into: LoadInto, chunk: ChunkSpec, region: str) -> int:
        """The engine's one server-side load: the server reads ``chunk`` from S3 into the table.

        The chunk's own format is what the server reads.
        """


class Catalog(abc.ABC):
    """Reads of a table and its server, for table preparation and pre-flight advice.

    The definition, the snapshot a load saves, exact row counts, the duplicate keys behind a
    failed unique build, and the server facts pre-flight reads.
    """

    @abc.abstractmethod
    def describe_table(self, conn: Any, table: TableRef) -> TableInfo:
        """Read the table's columns, keys, indexes (with DDL), constraints, triggers and size."""

    @abc.abstractmethod
    def table_snapshot(self, conn: Any, table: TableRef) -> dict[str, Any]:
        """The table's indexes, constraints, foreign keys and reloptions as a saved state dict.

        Foreign keys both ways; see :mod:`airflow_bulkload.table_state`.
        """

    @abc.abstractmethod
    def table_is_empty(self, conn: Any, table: TableRef) -> bool:
        """Whether ``table`` holds no row, exactly (not from statistics)."""

    @abc.abstractmethod
    def count_rows(self, conn: Any, table: TableRef) -> int:
        """Exact ``count(*)`` of ``table``."""

    @abc.abstractmethod
    def duplicate_key_sample(
        self, conn: Any, table: TableRef, index: dict[str, Any], exc: Exception, limit: int = 5
    ) -> list[str] | None:
        """Sample the offending keys when ``exc`` is a duplicate-key failure building ``index``.

        The sample may be empty; ``None`` when ``exc`` is something else.
        """

    @abc.abstractmethod
    def server_facts(self, conn: Any) -> ServerFacts:
        """Read the server settings pre-flight advice needs; read-only.

        Version, ``local_infile``, the ``aws_s3`` extension, the Aurora S3 role, doublewrite. A
        setting the server does not have or the user may not read is ``None``.
        """


class TablePrep(abc.ABC):
    """Preparing a table for a load and putting it back afterwards.

    The per-table claim and saved state, autovacuum and reloptions, index, constraint and
    foreign-key DDL, ANALYZE and CHECKPOINT.

    Saved table state and per-table claims live in the state tables (ensure_state_schema). State
    methods run in the caller's transaction; DDL methods commit as the engine does.
    """

    @abc.abstractmethod
    def claim_table(self, conn: Any, table: TableRef, load_id: str, holder: str) -> str | None:
        """Take (or re-take, for the same ``load_id``) the table's durable claim.

        Return ``None`` when held now, else a description of the other load that holds it.
        """

    @abc.abstractmethod
    def release_table_claim(self, conn: Any, table: TableRef, load_id: str) -> None:
        """Drop the table's claim if ``load_id`` holds it."""

    @abc.abstractmethod
    def unfinished_table_saved_state(self, conn: Any, table: TableRef) -> dict[str, Any] | None:
        """The saved snapshot of the table's latest load whose state is not done, else ``None``.

        The table may be stripped of the indexes it lists.
        """

    @abc.abstractmethod
    def read_table_state(self, conn: Any, table: TableRef, load_id: str) -> TableState | None:
        """The saved state of (table, load id), or ``None``."""

    @abc.abstractmethod
    def write_table_state(
        self, conn: Any, table: TableRef, load_id: str, state: TableState
    ) -> None:
        """Insert or replace the saved state of (table, load id)."""

    @abc.abstractmethod
    def set_table_state_status(
        self, conn: Any, table: TableRef, load_id: str, status: str, dropped: list[str] | None
    ) -> None:
        """Move the saved state to ``status`` (and record what is dropped, when given)."""

    @abc.abstractmethod
    def disable_autovacuum(self, conn: Any, table: TableRef) -> None:
        """Stop background maintenance of the table during the load (PostgreSQL)."""

    @abc.abstractmethod
    def restore_reloptions(self, conn: Any, table: TableRef, saved: dict[str, Any]) -> list[str]:
        """Put the saved reloptions back; returns what was changed."""

    @abc.abstractmethod
    def drop_index(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """Drop a saved index (with the constraint it backs)."""

    @abc.abstractmethod
    def drop_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        """Drop a saved foreign key (declared on ``fk["schema"].fk["table"]``)."""

    @abc.abstractmethod
    def create_indexes(self, conn: Any, table: TableRef, build: IndexBuild) -> None:
        """Build saved indexes in this session.

        PostgreSQL: one per call when run in parallel; MySQL: one ``ALTER TABLE`` for all.
        """

    def restore_comments(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:  # noqa: B027
        """Put a rebuilt index's saved comments back.

        Engines whose index DDL holds the comment (MySQL's ``COMMENT '…'`` in the key definition)
        have nothing to do.
        """

    @abc.abstractmethod
    def attach_constraint(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """Turn a rebuilt unique index back into its PRIMARY KEY/UNIQUE constraint."""

    @abc.abstractmethod
    def add_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        """Re-add a saved foreign key."""

    @abc.abstractmethod
    def analyze(self, conn: Any, table: TableRef) -> None:
        """Refresh the planner statistics of the table."""

    @abc.abstractmethod
    def checkpoint(self, conn: Any) -> str:
        """Force a checkpoint where the engine has one; returns what was done."""

    @abc.abstractmethod
    def empty_table(self, conn: Any, table: TableRef) -> None:
        """``TRUNCATE`` the table (only ever a table that was empty before this load)."""


class ServerSettings(abc.ABC):
    """Bulk mode on a self-managed server: server-wide settings, leases, saved originals.

    The lease and saved-settings tables are created by ensure_state_schema. Methods take an autocommit connection; each change is durable at once.
    """

    #: the database bulk mode keeps its leases and saved settings in, unless the connection's
    #: extra ``bulkload_bulk_mode_database`` names another. The settings are server-wide, so their
    #: state is too: one place per server, whichever database a load targets (else two databases'
    #: loads would save each other's bulk values as "originals"). PostgreSQL: the maintenance
    #: database; MySQL: a ``bulkload`` database, created on first use.
    default_state_database: ClassVar[str]

    @abc.abstractmethod
    def is_privilege_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the server refusing the user a privilege (not a lost connection)."""

    @abc.abstractmethod
    def connect_server(self, conn_id: str, state_database: str) -> Any:
        """An autocommit connection for bulk mode's state and the server's settings.

        ALTER SYSTEM cannot run in a transaction, and each state change must be durable before
        the next server change. The caller closes it.
        """

    @abc.abstractmethod
    def bulk_mode_lock(self, conn: Any) -> AbstractContextManager[None]:
        """Serialise bulk-mode enter/exit on this server for the block.

        A session lock, which the server drops if the session dies.
        """

    @abc.abstractmethod
    def bulk_mode_leases(self, conn: Any) -> list[tuple[str, str, float]]:
        """(token, holder, expires_at epoch seconds) of every lease."""

    @abc.abstractmethod
    def put_bulk_mode_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        """Insert or renew a lease."""

    @abc.abstractmethod
    def delete_bulk_mode_leases(self, conn: Any, tokens: list[str]) -> None:
        """Remove these leases (missing ones are ignored)."""

    @abc.abstractmethod
    def saved_server_settings(self, conn: Any) -> list[SavedSetting]:
        """The saved originals, in the order they were changed."""

    @abc.abstractmethod
    def save_server_setting(self, conn: Any, name: str, position: int) -> None:
        """Record the setting's original before changing it; a no-op if already recorded."""

    @abc.abstractmethod
    def forget_saved_server_settings(self, conn: Any) -> None:
        """Drop every saved original (after a complete restore)."""

    @abc.abstractmethod
    def check_server_setting(self, conn: Any, name: str) -> None:
        """Raise BulkModeRefusedError when ``name`` is unknown or changes only with a restart."""

    @abc.abstractmethod
    def set_server_setting(self, conn: Any, name: str, value: str) -> None:
        """Set a server-wide value (PostgreSQL ALTER SYSTEM, MySQL SET GLOBAL)."""

    @abc.abstractmethod
    def restore_server_setting(self, conn: Any, saved: SavedSetting) -> None:
        """Put a saved original back."""

    @abc.abstractmethod
    def apply_server_settings(self, conn: Any) -> None:
        """Make set/restored values effective for new sessions (PostgreSQL: reload and wait)."""

    @abc.abstractmethod
    def show_server_setting(self, conn: Any, name: str) -> str:
        """The server-wide value in effect now, as the server shows it."""


class Dialect(Session, Ledger, ChunkLoader, Catalog, TablePrep, ServerSettings, WorkTables):
    """One engine's SQL: every role at once.

    Methods take a DB-API connection from :class:`~airflow_bulkload.hooks.bulk_load.BulkLoadHook`.
    Every method that changes data runs inside the caller's transaction (see :meth:`transaction`)
    unless its docstring says it commits.
    """
