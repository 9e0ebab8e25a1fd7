"""The engine-neutral side of the dialects: table references, catalog models, and the interface
every engine implements. No SQL text lives here; each engine's SQL lives in its own module.
"""

from __future__ import annotations

import abc
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_bulkload.exceptions import InvalidIdentifierError
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

if TYPE_CHECKING:
    from airflow_bulkload.s3io import ChunkStream


@dataclass(frozen=True)
class TableRef:
    """A table name split into its parts, unquoted. ``schema`` is the MySQL database on MySQL."""

    name: str
    schema: str | None = None

    @classmethod
    def parse(cls, text: str) -> TableRef:
        """Parse ``table``, ``schema.table`` or ``"quoted.part"."table"`` (double quotes or backticks).

        Parsing only splits; the dialect validates and quotes each part.
        """
        parts = list(_split_qualified_name(text))
        if len(parts) == 1:
            return cls(name=parts[0])
        if len(parts) == 2:
            return cls(schema=parts[0], name=parts[1])
        raise InvalidIdentifierError(
            f"table name {text!r} must be 'table' or 'schema.table' (quote parts that hold a dot)"
        )

    def __str__(self) -> str:
        return f"{self.schema}.{self.name}" if self.schema else self.name


def _split_qualified_name(text: str) -> Iterator[str]:
    if not isinstance(text, str) or not text:
        raise InvalidIdentifierError(f"table name must be a non-empty string, got {text!r}")
    i, n = 0, len(text)
    while i < n:
        if text[i] in '"`':
            quote = text[i]
            i += 1
            part = []
            while True:
                if i >= n:
                    raise InvalidIdentifierError(f"unterminated quoted identifier in {text!r}")
                if text[i] == quote:
                    if i + 1 < n and text[i + 1] == quote:
                        part.append(quote)
                        i += 2
                        continue
                    i += 1
                    break
                part.append(text[i])
                i += 1
            yield "".join(part)
            if i < n:
                if text[i] != ".":
                    raise InvalidIdentifierError(f"expected '.' after quoted part in {text!r}")
                i += 1
                if i == n:
                    raise InvalidIdentifierError(f"table name ends with '.': {text!r}")
        else:
            end = text.find(".", i)
            if end == -1:
                end = n
            part_text = text[i:end]
            if not part_text:
                raise InvalidIdentifierError(f"empty part in table name {text!r}")
            yield part_text
            i = end + 1
            if end < n and i == n:
                raise InvalidIdentifierError(f"table name ends with '.': {text!r}")


def check_identifier(name: str, *, max_length: int, what: str = "identifier") -> str:
    """Refuse names no engine quotes safely; quoting itself is the dialect's job."""
    if not isinstance(name, str) or not name:
        raise InvalidIdentifierError(f"{what} must be a non-empty string, got {name!r}")
    if "\0" in name:
        raise InvalidIdentifierError(f"{what} {name!r} contains a NUL byte")
    if len(name.encode("utf-8")) > max_length:
        raise InvalidIdentifierError(f"{what} {name!r} is longer than {max_length} bytes")
    return name


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    data_type: str
    nullable: bool = True
    default: str | None = None


@dataclass(frozen=True)
class IndexInfo:
    """A secondary or primary index, with the DDL that recreates it exactly."""

    name: str
    definition: str
    columns: list[str] = field(default_factory=list)
    is_unique: bool = False
    is_primary: bool = False
    constraint_name: str | None = None  # set when the index backs a PK/UNIQUE constraint
    method: str | None = None  # access method: btree, hash, gin, ... (engine's name)
    predicate: str | None = None  # WHERE clause of a partial index
    is_valid: bool = True  # False for an index left invalid by a failed concurrent build
    comment: str | None = None  # COMMENT ON INDEX (PostgreSQL; MySQL keeps it in the key DDL)
    constraint_comment: str | None = None  # COMMENT ON CONSTRAINT of the backed constraint


@dataclass(frozen=True)
class ConstraintInfo:
    """A table constraint: ``kind`` is ``p`` primary, ``u`` unique, ``f`` foreign key, ``c`` check."""

    name: str
    kind: str
    definition: str
    table: TableRef | None = None  # the table the constraint is declared on (FKs into us differ)
    columns: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class TableInfo:
    """What introspection knows about a table; pre-flight advice and table preparation use it."""

    table: TableRef
    columns: list[ColumnInfo]
    primary_key: list[str]
    indexes: list[IndexInfo]
    constraints: list[ConstraintInfo]
    referencing_foreign_keys: list[ConstraintInfo]
    triggers: list[str]
    reloptions: dict[str, str]
    estimated_rows: int
    size_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def secondary_indexes(self) -> list[IndexInfo]:
        return [ix for ix in self.indexes if not ix.is_primary]

    @property
    def foreign_keys(self) -> list[ConstraintInfo]:
        return [c for c in self.constraints if c.kind == "f"]

    def column_types(self) -> dict[str, str]:
        return {c.name: c.data_type for c in self.columns}


@dataclass(frozen=True)
class KeyProbe:
    """Two keys of a loaded chunk (its first and last record's), to look up in the table.

    Both found: the chunk's rows are (still) there. Either missing: its rows were deleted, or the
    table was emptied or re-created since the chunk loaded.
    """

    columns: list[str]
    first: list[Any]
    last: list[Any]

    def to_json(self) -> str:
        return json.dumps({"columns": self.columns, "first": self.first, "last": self.last})

    @classmethod
    def from_json(cls, text: str | None) -> KeyProbe | None:
        if not text:
            return None
        data = json.loads(text) if isinstance(text, str) else text
        return cls(list(data["columns"]), list(data["first"]), list(data["last"]))


@dataclass(frozen=True)
class LedgerEntry:
    """A chunk that was committed into a table.

    ``probe`` (first and last key) and ``generation`` (the table's physical identity when the
    chunk loaded, see :meth:`Dialect.table_generation`) let a later run check that the chunk's
    rows are still in the table before skipping it: the ledger is a cache of the table, not its
    truth.
    """

    table: str
    chunk_key: str
    checksum: str
    rows: int
    bytes: int
    load_id: str
    probe: KeyProbe | None = None
    generation: str | None = None


@dataclass(frozen=True)
class LoadRecord:
    """One staged input's load into a table (``staging_prefix`` names it), as the ledger's
    companion: whether the table was empty when the load began, and whether its report
    verified the rows in the table."""

    table: str
    staging_prefix: str
    load_id: str
    empty_before: bool
    verified: bool = False


def probe_key_of(info: TableInfo) -> list[str]:
    """The columns that identify a row of the table: its primary key, else the first valid,
    non-partial unique index over plain NOT NULL columns; ``[]`` when it has neither."""
    if info.primary_key:
        return list(info.primary_key)
    not_null = {c.name for c in info.columns if not c.nullable}
    for index in info.indexes:
        if (
            index.is_unique
            and index.is_valid
            and not index.predicate
            and index.columns
            and all(c in not_null for c in index.columns)
        ):
            return list(index.columns)
    return []


def check_withdrawn(
    entry: LedgerEntry, uri: str, table: TableRef, deleted: int, *, exact: bool
) -> None:
    """Raise (so the withdrawing transaction rolls back) when a chunk's withdraw deleted rows it
    cannot have inserted: more than the ledger says it loaded, or, with ``exact``, another count.
    """
    if deleted > entry.rows or (exact and deleted != entry.rows):
        from airflow_bulkload.exceptions import WithdrawMismatchError

        raise WithdrawMismatchError(
            f"{uri}: taking this chunk back out of {table} would delete {deleted} rows, but the "
            f"chunk ledger says it loaded {entry.rows} (load {entry.load_id}): rows of another "
            "load share its keys, or rows changed since. Nothing was deleted; check the table by "
            "hand before loading this input again"
        )


class Dialect(abc.ABC):
    """One engine's SQL. Methods take a DB-API connection from :class:`BulkLoadHook`.

    Every method that changes data runs inside the caller's transaction (see :meth:`transaction`)
    unless its docstring says it commits.
    """

    name: ClassVar[str]
    #: the longest identifier the engine accepts, in bytes
    max_identifier_length: ClassVar[int]
    #: the load methods this engine offers besides ``client``
    server_side_methods: ClassVar[tuple[str, ...]] = ()
    #: whether a load error's line counts physical lines (newlines inside quoted fields
    #: included, as PostgreSQL's COPY does) rather than records (MySQL's rows)
    load_errors_count_lines: ClassVar[bool] = False

    # -- names --------------------------------------------------------------------------------
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

    # -- transactions and state ---------------------------------------------------------------
    @abc.abstractmethod
    def transaction(self, conn: Any) -> AbstractContextManager[None]:
        """Run the block in one transaction: commit on success, roll back on any exception."""

    @abc.abstractmethod
    def ensure_state_schema(self, conn: Any) -> None:
        """Create the durable state tables if missing; idempotent, safe when run concurrently.

        Commits its own work.
        """

    # -- chunk ledger ---------------------------------------------------------------------------
    @abc.abstractmethod
    def claim_chunk(self, conn: Any, table: TableRef, chunk: ChunkSpec) -> LedgerEntry | None:
        """Serialise loaders of this (table, chunk key) until the transaction ends, then return
        the ledger entry if the chunk is already committed (any checksum), else ``None``."""

    @abc.abstractmethod
    def record_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        """Insert the ledger row, in the loading transaction."""

    @abc.abstractmethod
    def ledger_entries(self, conn: Any, table: TableRef, key_prefix: str) -> list[LedgerEntry]:
        """The committed chunks of ``table`` whose key starts with ``key_prefix``, by key."""

    @abc.abstractmethod
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
        """Take a committed chunk back out: delete the rows of ``table`` whose ``key_columns``
        equal those of a row in ``stream`` (the chunk's content, as it was loaded) and the
        chunk's ledger entry, in one transaction of its own (committed). Returns rows deleted.

        The delete must match the ledger: with ``exact`` it must delete exactly ``entry.rows``
        rows, else (at most that many, for a chunk some of whose rows are already gone) it
        raises :class:`~airflow_bulkload.exceptions.WithdrawMismatchError` and rolls back, so
        rows the chunk did not insert are never taken."""

    @abc.abstractmethod
    def forget_chunk(self, conn: Any, entry: LedgerEntry) -> None:
        """Delete the ledger entry alone (its rows are already gone), in the open transaction."""

    @abc.abstractmethod
    def set_chunk_generation(self, conn: Any, entry: LedgerEntry, generation: str) -> None:
        """Record that the entry's rows survived a rebuild of the table (new generation)."""

    # -- the table as the truth -------------------------------------------------------------------
    @abc.abstractmethod
    def table_generation(self, conn: Any, table: TableRef) -> str | None:
        """The table's physical identity: changes when it is dropped and re-created, truncated or
        rebuilt (VACUUM FULL, CLUSTER, OPTIMIZE TABLE), not when rows are inserted or deleted.
        ``None`` when the server will not tell (missing privilege)."""

    @abc.abstractmethod
    def keys_present(
        self, conn: Any, table: TableRef, columns: list[str], keys: list[list[Any]]
    ) -> list[bool]:
        """For each key (values of ``columns``, as text), whether a row with it is in ``table``."""

    @abc.abstractmethod
    def table_is_empty(self, conn: Any, table: TableRef) -> bool:
        """Exactly, not from statistics: does ``table`` hold no row?"""

    @abc.abstractmethod
    def count_rows(self, conn: Any, table: TableRef) -> int:
        """Exact ``count(*)`` of ``table``."""

    @abc.abstractmethod
    def ledger_rows(self, conn: Any, table: TableRef) -> int:
        """The rows the chunk ledger says are in ``table``, over all its entries."""

    @abc.abstractmethod
    def empty_table(self, conn: Any, table: TableRef) -> None:
        """``TRUNCATE`` the table (only ever a table that was empty before this load)."""

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

    # -- load slots -------------------------------------------------------------------------------
    @abc.abstractmethod
    def try_acquire_load_slot(self, conn: Any, table: TableRef, slot: int) -> bool:
        """Take load slot ``slot`` of ``table`` for this session without waiting; ``False`` when
        another session holds it. Session-scoped on the server, so a killed worker's slot frees
        itself when its connection goes."""

    @abc.abstractmethod
    def release_load_slot(self, conn: Any, table: TableRef, slot: int) -> None:
        """Give back a slot taken by :meth:`try_acquire_load_slot`."""

    # -- loading ----------------------------------------------------------------------------------
    @abc.abstractmethod
    def tune_load_session(self, conn: Any) -> None:
        """Per-transaction/session settings for a fast, still-checked load."""

    @abc.abstractmethod
    def load_stream(
        self,
        conn: Any,
        table: TableRef,
        columns: list[str] | None,
        file_format: FileFormat,
        stream: ChunkStream,
        source: str,
    ) -> int:
        """Load rows read from ``stream`` (decompressed bytes) and return the number loaded.

        Bad input raises :class:`~airflow_bulkload.exceptions.ChunkLoadError` naming ``source``.
        """

    def load_server_side(
        self,
        conn: Any,
        method: str,
        table: TableRef,
        columns: list[str] | None,
        chunk: ChunkSpec,
        region: str,
    ) -> int:
        """Have the server pull the chunk from S3 itself; returns rows loaded."""
        raise NotImplementedError(f"{self.name} has no server-side load method {method!r}")

    # -- introspection ----------------------------------------------------------------------------
    @abc.abstractmethod
    def describe_table(self, conn: Any, table: TableRef) -> TableInfo:
        """Read the table's columns, keys, indexes (with DDL), constraints, triggers and size."""

    # -- table preparation (prepare/finalize/restore) ---------------------------------------------
    # Saved table state and per-table claims live in the state tables (ensure_state_schema).
    # State methods run in the caller's transaction; DDL methods commit as the engine does.
    @abc.abstractmethod
    def table_snapshot(self, conn: Any, table: TableRef) -> dict[str, Any]:
        """The table's indexes, constraints, foreign keys (both ways) and reloptions as a saved
        state dict (see :mod:`airflow_bulkload.table_state`)."""

    @abc.abstractmethod
    def claim_table(self, conn: Any, table: TableRef, load_id: str, holder: str) -> str | None:
        """Take (or re-take, for the same ``load_id``) the table's durable claim; return ``None``
        when held now, else a description of the other load that holds it."""

    @abc.abstractmethod
    def release_table_claim(self, conn: Any, table: TableRef, load_id: str) -> None:
        """Drop the table's claim if ``load_id`` holds it."""

    @abc.abstractmethod
    def unfinished_table_saved_state(self, conn: Any, table: TableRef) -> dict[str, Any] | None:
        """The saved snapshot of the table's most recent load whose state is not done (the table
        may be stripped of the indexes it lists), else ``None``."""

    @abc.abstractmethod
    def read_table_state(self, conn: Any, table: TableRef, load_id: str) -> dict[str, Any] | None:
        """``{"status", "saved", "dropped", "decision"}`` for (table, load id), or ``None``."""

    @abc.abstractmethod
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
    def create_indexes(
        self,
        conn: Any,
        table: TableRef,
        indexes: list[dict[str, Any]],
        maintenance_work_mem: str,
        *,
        concurrent_sessions: int = 1,
    ) -> None:
        """Build saved indexes in this session (PostgreSQL: one per call when run in parallel;
        MySQL: one ``ALTER TABLE`` for all). ``concurrent_sessions``: how many sessions build at
        once (PostgreSQL then gives each build no parallel workers of its own)."""

    def restore_comments(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:  # noqa: B027
        """Put a rebuilt index's saved comments back; engines whose index DDL holds the comment
        (MySQL's ``COMMENT '…'`` in the key definition) have nothing to do."""

    @abc.abstractmethod
    def attach_constraint(self, conn: Any, table: TableRef, index: dict[str, Any]) -> None:
        """Turn a rebuilt unique index back into its PRIMARY KEY/UNIQUE constraint."""

    @abc.abstractmethod
    def add_foreign_key(self, conn: Any, fk: dict[str, Any]) -> None:
        """Re-add a saved foreign key."""

    @abc.abstractmethod
    def duplicate_key_sample(
        self, conn: Any, table: TableRef, index: dict[str, Any], exc: Exception, limit: int = 5
    ) -> list[str] | None:
        """When ``exc`` is a duplicate-key failure building ``index``, a sample of the offending
        key values (possibly empty); ``None`` when ``exc`` is something else."""

    @abc.abstractmethod
    def analyze(self, conn: Any, table: TableRef) -> None:
        """Refresh the planner statistics of the table."""

    @abc.abstractmethod
    def checkpoint(self, conn: Any) -> str:
        """Force a checkpoint where the engine has one; returns what was done."""

    # -- pre-flight reads -------------------------------------------------------------------------
    @abc.abstractmethod
    def server_facts(self, conn: Any) -> ServerFacts:
        """Read the server settings pre-flight advice needs (version, ``local_infile``, the
        ``aws_s3`` extension, the Aurora S3 role, doublewrite). Read-only; a setting the server
        does not have or the user may not read is ``None``."""

    # -- server settings and bulk-mode leases (self-managed servers) ------------------------------
    # Bulk mode's server-wide settings and its lease/saved-settings tables (created by
    # ensure_state_schema). Methods take an autocommit connection; each change is durable at once.
    @abc.abstractmethod
    def bulk_mode_lock(self, conn: Any) -> AbstractContextManager[None]:
        """Serialise bulk-mode enter/exit on this server for the block (a session lock the server
        drops if the session dies)."""

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


@dataclass(frozen=True)
class ServerFacts:
    """Server settings pre-flight advice reads besides the table (``None``: could not be read).

    ``s3_role`` is the role Aurora MySQL's ``LOAD DATA FROM S3`` uses
    (``aurora_load_from_s3_role`` or ``aws_default_s3_role``), empty when unset.
    """

    engine: str
    version: str = ""
    local_infile: bool | None = None
    aws_s3_installed: bool | None = None
    aws_s3_available: bool | None = None
    s3_role: str | None = None
    innodb_doublewrite: bool | None = None
    #: may the load's user run ``CHECKPOINT`` (PostgreSQL: superuser, pg_checkpoint, rds_superuser)
    can_checkpoint: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SavedSetting:
    """A server setting bulk mode changed: what to put back, in which order.

    ``original`` is engine-specific: PostgreSQL keeps the ``postgresql.auto.conf`` value (``None``:
    not set there, restored with ``ALTER SYSTEM RESET``); MySQL keeps the global value.
    """

    name: str
    original: str | None
    position: int
