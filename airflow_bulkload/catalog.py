"""What every layer knows about tables, chunks and servers: engine-neutral data, no SQL.

The dialects fill these in from the catalogs and state tables; the hooks, the operators, the
table-state rules and the pre-flight advice read them. Nothing here imports the engine layer, so
any layer may import this module.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from airflow_bulkload.exceptions import InvalidIdentifierError


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

    def quoted(self) -> str:
        """The name as text :meth:`parse` reads back whatever it holds (each part quoted)."""
        parts = [self.schema, self.name] if self.schema else [self.name]
        return ".".join('"' + part.replace('"', '""') + '"' for part in parts)


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
    #: when the entry was written, as the server keeps it (read back, never written): it tells
    #: one entry from another of the same chunk, load and content
    loaded_at: str | None = field(default=None, compare=False)

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> LedgerEntry:
        """An entry from a row of the ledger, as both engines select it.

        The columns, in order: table, chunk key, checksum, rows, bytes, load id, probe (JSON text
        or already decoded), generation and, where selected, the time it was written.
        """
        return cls(
            table=row[0],
            chunk_key=row[1],
            checksum=str(row[2]),
            rows=int(row[3]),
            bytes=int(row[4]),
            load_id=row[5],
            probe=KeyProbe.from_json(row[6]),
            generation=None if row[7] is None else str(row[7]),
            loaded_at=str(row[8]) if len(row) > 8 and row[8] is not None else None,
        )

    def to_row(self) -> tuple[Any, ...]:
        """The entry as a ledger row, in :meth:`from_row`'s column order (probe as JSON text)."""
        probe = self.probe.to_json() if self.probe else None
        return (
            self.table,
            self.chunk_key,
            self.checksum,
            self.rows,
            self.bytes,
            self.load_id,
            probe,
            self.generation,
        )


@dataclass(frozen=True)
class LoadRecord:
    """One staged input's load into a table (``staging_prefix`` names it): the ledger's companion.

    It says whether the table was empty when the load began, and whether its report verified the
    rows in the table.
    """

    table: str
    staging_prefix: str
    load_id: str
    empty_before: bool
    verified: bool = False

    @classmethod
    def from_row(cls, table: TableRef, staging_prefix: str, row: Sequence[Any]) -> LoadRecord:
        """The record of ``staging_prefix`` into ``table``: its row is load id, empty, verified."""
        return cls(str(table), staging_prefix, row[0], bool(row[1]), bool(row[2]))


def loadable_column_types(table: TableInfo) -> dict[str, str]:
    """The columns a load writes (generated ones left out), in table order, and their types."""
    generated = set(table.extra.get("generated_columns", []))
    return {c.name: c.data_type for c in table.columns if c.name not in generated}


def probe_key_of(info: TableInfo) -> list[str]:
    """The columns that identify a row of the table; ``[]`` when it has none.

    Its primary key, else the first valid, non-partial unique index over plain NOT NULL columns.
    """
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


class TableState(TypedDict):
    """What prepare saved for (table, load id), as the state table holds it.

    ``status`` (``saved``, ``prepared``, ``done``), the ``saved`` catalog snapshot, the names
    ``dropped`` so far and the drop ``decision``.
    """

    status: str
    saved: dict[str, Any]
    dropped: list[str]
    decision: dict[str, Any]


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


@dataclass(frozen=True)
class EngineTraits:
    """What an engine does differently, as capabilities the layers above it decide on.

    Each dialect declares its own (:attr:`Session.traits
    <airflow_bulkload.dialects.roles.Session.traits>`); pure code that only knows the engine's
    name (pre-flight inputs, a saved table state) looks them up with :meth:`of`. ``engine`` is
    for display and logs: decisions read the capabilities.
    """

    engine: str
    #: rows are stored in primary-key order (InnoDB's clustered index): the primary key is never
    #: dropped (that rebuilds the table), and input sorted by it loads faster
    clustered_primary_key: bool
    #: DDL is transactional, so a session running DDL autocommits (each statement commits)
    transactional_ddl: bool
    #: indexes rebuild one per session, several sessions at once (else one statement builds all)
    parallel_index_builds: bool
    #: PRIMARY KEY/UNIQUE constraints are objects of their own, attached to a rebuilt index (else
    #: the index is the key)
    index_backed_constraints: bool
    #: foreign keys stay through a load and check every row (re-adding a dropped one would not
    #: check the rows already there), so auto keeps them
    foreign_keys_checked_on_load: bool
    #: the engine has a CHECKPOINT statement (which needs a privilege)
    has_checkpoint: bool
    #: the ``client`` method loads through ``LOAD DATA LOCAL INFILE`` (the server's
    #: ``local_infile`` must be on)
    client_load_uses_local_infile: bool
    #: the load methods where the server pulls a chunk from S3 itself
    server_side_methods: tuple[str, ...] = ()
    #: column names match in any case (a header ``NAME`` loads into column ``name``)
    case_insensitive_columns: bool = False
    #: the measured optimum of load sessions per vCPU; ``None``: vCPUs - 1 (RDS PostgreSQL's
    #: guideline)
    load_sessions_per_vcpu: float | None = None
    #: an AUTO_INCREMENT column makes each load statement hold a table lock unless the server's
    #: ``innodb_autoinc_lock_mode`` is 2 (InnoDB)
    autoinc_lock_per_load: bool = False

    @classmethod
    def of(cls, engine: str) -> EngineTraits:
        """The traits of a dialect by its name (``postgres`` or ``mysql``)."""
        try:
            return ENGINE_TRAITS[engine]
        except KeyError:
            raise ValueError(f"no engine traits for {engine!r} (postgres or mysql)") from None


POSTGRES_TRAITS = EngineTraits(
    engine="postgres",
    clustered_primary_key=False,
    transactional_ddl=True,
    parallel_index_builds=True,
    index_backed_constraints=True,
    foreign_keys_checked_on_load=False,
    has_checkpoint=True,
    client_load_uses_local_infile=False,
    server_side_methods=("rds_s3",),
)
MYSQL_TRAITS = EngineTraits(
    engine="mysql",
    clustered_primary_key=True,
    transactional_ddl=False,
    parallel_index_builds=False,
    index_backed_constraints=False,
    foreign_keys_checked_on_load=True,
    has_checkpoint=False,
    client_load_uses_local_infile=True,
    server_side_methods=("aurora_s3",),
    case_insensitive_columns=True,
    load_sessions_per_vcpu=10 / 16,  # 10 threads on 16 vCPUs measured best
    autoinc_lock_per_load=True,
)
ENGINE_TRAITS = {traits.engine: traits for traits in (POSTGRES_TRAITS, MYSQL_TRAITS)}


@dataclass(frozen=True)
class ChunkResult:
    """What one chunk load did; small enough for XCom."""

    uri: str
    rows: int
    bytes: int
    seconds: float
    skipped: bool
    method: str

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["rows_per_second"] = round(self.rows_per_second, 1)
        return data


@dataclass(frozen=True)
class Reconciliation:
    """What the ledger check before a load did: chunks taken back out, stale entries dropped."""

    withdrawn: list[ChunkResult]
    stale: list[str]
    empty_before: bool | None
    warnings: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {
            "chunks": [r.uri for r in self.withdrawn],
            "rows": sum(r.rows for r in self.withdrawn),
            "stale": self.stale,
            "empty_before": self.empty_before,
            "warnings": self.warnings,
        }
