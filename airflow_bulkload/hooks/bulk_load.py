"""BulkLoadHook: the database side of a bulk load, for PostgreSQL and MySQL connections."""

from __future__ import annotations

import random
import time
from collections.abc import Collection, Iterator, Sequence
from contextlib import closing, contextmanager
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_bulkload.catalog import (
    ChunkResult,
    KeyProbe,
    LedgerEntry,
    ServerFacts,
    TableInfo,
    TableRef,
)
from airflow_bulkload.dialects import Dialect, LoadInto, dialect_for
from airflow_bulkload.exceptions import (
    ChunkConflictError,
    ChunkLoadError,
    LoadSlotsBusyError,
    RowCountMismatchError,
)
from airflow_bulkload.hooks.load_errors import LoadErrorTracingMixin
from airflow_bulkload.hooks.load_verification import LoadVerificationMixin
from airflow_bulkload.s3io import (
    s3_error_code,
    s3_region,
)
from airflow_bulkload.staging.direct import DirectChunkStream, open_chunk_stream
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat
from airflow_bulkload.table_state import primary_key_of_snapshot

LOAD_METHODS = ("client", "rds_s3", "aurora_s3")


def probe_of(
    spec: ChunkSpec,
    first: Sequence[Any] | None = None,
    last: Sequence[Any] | None = None,
    *,
    nullable: Collection[str] = (),
) -> KeyProbe | None:
    """The chunk's probe for the ledger: its first and last key (``None`` without a key).

    ``first``/``last`` are the keys read as it streamed, else the manifest's. ``None`` too when
    either holds a NULL in one of the ``nullable`` key columns (a unique key over nullable
    columns, a sort key): a NULL is found by no lookup, so the chunk is told by the table's
    generation instead. In a NOT NULL column the NULL marker is the text itself.
    """
    first = spec.first_key if first is None else first
    last = spec.last_key if last is None else last
    if not (spec.key_columns and first is not None and last is not None):
        return None
    null, may_be_null = spec.format.effective_null, {c.lower() for c in nullable}
    for column, values in zip(spec.key_columns, zip(first, last, strict=True), strict=True):
        if column.lower() in may_be_null and any(v is None or v == null for v in values):
            return None
    return KeyProbe(list(spec.key_columns), list(first), list(last))


class BulkLoadHook(LoadErrorTracingMixin, LoadVerificationMixin, BaseHook):
    """Loads staged chunks into a table exactly once, through the engine's fastest path.

    :param conn_id: an Airflow connection of type ``postgres`` or ``mysql``; the dialect follows it.
        Its extra ``bulkload_state_schema`` names where the state tables live (MySQL: a database;
        default the connection's).
    :param aws_conn_id: the AWS connection used to read chunks from S3 (``client`` method) and to
        know the region (server-side methods).
    """

    conn_name_attr = "conn_id"
    default_conn_name = "postgres_default"
    #: the connection types it works on: the postgres and mysql providers' own (no type of its
    #: own, so no form of its own: ``bulkload_state_schema`` goes in the connection's Extra JSON)
    supported_conn_types: tuple[str, ...] = ("postgres", "mysql")

    def __init__(self, conn_id: str, aws_conn_id: str | None = "aws_default") -> None:
        super().__init__()
        self.conn_id = conn_id
        self.aws_conn_id = aws_conn_id

    @cached_property
    def connection_type(self) -> str:
        return str(self.get_connection(self.conn_id).conn_type)

    @cached_property
    def dialect(self) -> Dialect:
        extra = self.get_connection(self.conn_id).extra_dejson
        return dialect_for(self.connection_type, state_schema=extra.get("bulkload_state_schema"))

    def get_conn(self) -> Any:
        """A new DB-API connection (psycopg 3 or MySQLdb) with autocommit off; the caller closes it."""
        return self.dialect.connect(self.conn_id)

    def describe_table(self, table: str) -> TableInfo:
        with closing(self.get_conn()) as conn:
            ref = self.dialect.qualified_name(conn, self.dialect.table_ref(table))
            return self.dialect.describe_table(conn, ref)

    def primary_key(self, table: str) -> list[str]:
        """The table's primary key columns, also while a load has it stripped.

        Then the key its saved state recorded (staging and withdrawing must see the same key on a
        re-run).
        """
        with closing(self.get_conn()) as conn:
            dialect = self.dialect
            dialect.ensure_state_schema(conn)
            return self._primary_key(conn, dialect.qualified_name(conn, dialect.table_ref(table)))

    def _primary_key(self, conn: Any, ref: TableRef) -> list[str]:
        saved = self.dialect.unfinished_table_saved_state(conn, ref)
        if saved is not None:
            return primary_key_of_snapshot(saved)
        return list(self.dialect.describe_table(conn, ref).primary_key)

    @cached_property
    def _nullable_by_table(self) -> dict[str, set[str]]:
        return {}

    def _nullable_columns(self, conn: Any, ref: TableRef) -> set[str]:
        """The table's columns that may hold NULL, read once per hook (a load task's batch)."""
        if str(ref) not in self._nullable_by_table:
            info = self.dialect.describe_table(conn, ref)
            self._nullable_by_table[str(ref)] = {c.name for c in info.columns if c.nullable}
        return self._nullable_by_table[str(ref)]

    def server_facts(self) -> ServerFacts:
        """The server settings pre-flight advice reads (see :meth:`Dialect.server_facts`)."""
        with closing(self.get_conn()) as conn:
            return self.dialect.server_facts(conn)

    def load_chunk(
        self,
        table: str,
        chunk: ChunkSpec | dict[str, Any],
        *,
        method: str = "client",
        load_id: str = "",
        columns: list[str] | None = None,
        file_format: FileFormat | dict[str, Any] | None = None,
        max_concurrent_loads: int | None = None,
        slot_wait_timeout: float = 6 * 3600,
    ) -> ChunkResult:
        """Load one chunk in one transaction.

        Claim it in the ledger, skip it if already committed, load, check the row count against the
        manifest, record it, commit.

        A retry after a commit is a no-op; a failure leaves nothing of the chunk behind.
        With ``max_concurrent_loads``, the load first waits for one of that many per-table load
        slots held on the database server, so no more chunks load into the table at once,
        whichever workers, DAG runs or DAGs they come from.
        """
        if method not in LOAD_METHODS:
            raise ValueError(f"method must be one of {LOAD_METHODS}, got {method!r}")
        spec = ChunkSpec.from_dict(chunk)
        fmt = FileFormat.from_dict(file_format) if file_format is not None else spec.format
        if fmt.self_describing:
            raise ValueError(
                f"chunks load as CSV; {fmt.format} input is staged first (StageToS3Operator)"
            )
        columns = columns if columns is not None else spec.columns
        try:
            return self._load_chunk(
                table, spec, method, load_id, columns, fmt, max_concurrent_loads, slot_wait_timeout
            )
        except ChunkLoadError as exc:
            raise self._at_source(table, spec, exc) from exc

    def try_chunk(
        self, table: str, chunk: ChunkSpec | dict[str, Any], *, columns: list[str] | None = None
    ) -> ChunkResult:
        """A dry run of one chunk: every value through the engine's own parser, nothing kept.

        The chunk loads into a temporary copy of the table (:meth:`Dialect.scratch_copy`) in a
        transaction that is rolled back: no ledger entry, no slot, no row in ``table``. Bad
        input raises as the load would, traced to its input line; the rows are counted.
        """
        spec = ChunkSpec.from_dict(chunk)
        dialect, started = self.dialect, time.monotonic()
        try:
            with closing(self.get_conn()) as conn:
                try:
                    ref = dialect.qualified_name(conn, dialect.table_ref(table))
                    scratch = dialect.scratch_copy(conn, ref)
                    with open_chunk_stream(spec, aws_conn_id=None, client=self.s3) as stream:
                        cols = columns if columns is not None else spec.columns
                        into = LoadInto(scratch, cols, spec.format)
                        rows = dialect.load_stream(conn, into, stream, spec.uri)
                        stream.verify(spec.checksum)
                        nbytes = stream.bytes_read
                finally:
                    conn.rollback()
        except ChunkLoadError as exc:
            raise self._at_source(table, spec, exc) from exc
        if spec.rows is not None and rows != spec.rows:
            raise RowCountMismatchError(spec.uri, f"{rows} rows read", expected=f"{spec.rows}")
        self.log.info("dry run: %s would load %d rows into %s", spec.uri, rows, table)
        return ChunkResult(spec.uri, rows, nbytes, time.monotonic() - started, False, "dry_run")

    def _load_chunk(
        self,
        table: str,
        spec: ChunkSpec,
        method: str,
        load_id: str,
        columns: list[str] | None,
        fmt: FileFormat,
        max_concurrent_loads: int | None,
        slot_wait_timeout: float,
    ) -> ChunkResult:
        dialect = self.dialect
        started = time.monotonic()
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            if max_concurrent_loads:
                # a chunk already in the table needs no slot: a retry or re-run never waits
                done = self._already_loaded(conn, ref, spec, method)
                if done is not None:
                    return done
            with self._load_slot(conn, ref, max_concurrent_loads, slot_wait_timeout):
                while True:
                    with dialect.transaction(conn):
                        existing = dialect.claim_chunk(conn, ref, spec)
                        if existing is None:
                            rows, nbytes, probe = self._load_claimed(
                                conn, ref, spec, method, columns, fmt
                            )
                            dialect.record_chunk(
                                conn,
                                LedgerEntry(
                                    str(ref),
                                    spec.key,
                                    spec.checksum,
                                    rows,
                                    nbytes,
                                    load_id,
                                    probe=self._stored_probe(conn, ref, probe),
                                    generation=dialect.table_generation(conn, ref),
                                ),
                            )
                            break
                        if existing.checksum != spec.checksum:
                            raise ChunkConflictError(
                                f"{spec.uri} was already loaded into {ref} with checksum "
                                f"{existing.checksum}, but the staged chunk now has "
                                f"{spec.checksum}: the input changed after loading began; "
                                "stage it under a new prefix"
                            )
                        stale = self._stale_reason(conn, ref, existing)
                        if stale is None:
                            return self._skipped(spec, ref, existing, method)
                    # outside the transaction: taking the stale entry back claims the chunk itself
                    self._withdraw_stale(conn, ref, [(existing, spec, stale)])
        result = ChunkResult(spec.uri, rows, nbytes, time.monotonic() - started, False, method)
        self.log.info(
            "%s -> %s: %d rows, %.1f MB in %.2f s (%.0f rows/s, %.1f MB/s)",
            spec.uri,
            ref,
            rows,
            nbytes / 1e6,
            result.seconds,
            result.rows_per_second,
            nbytes / 1e6 / result.seconds if result.seconds else 0.0,
        )
        return result

    def _already_loaded(
        self, conn: Any, ref: TableRef, spec: ChunkSpec, method: str
    ) -> ChunkResult | None:
        """The skip result when the ledger has this very chunk and its rows are in the table.

        Read only: anything less certain goes the long way, under a slot and the chunk's claim.
        """
        dialect = self.dialect
        with dialect.transaction(conn):
            entry = next(
                (e for e in dialect.ledger_entries(conn, ref, spec.key) if e.chunk_key == spec.key),
                None,
            )
            if entry is None or entry.checksum != spec.checksum:
                return None
            if self._stale_reason(conn, ref, entry) is not None:
                return None
        return self._skipped(spec, ref, entry, method)

    def _skipped(
        self, spec: ChunkSpec, ref: TableRef, entry: LedgerEntry, method: str
    ) -> ChunkResult:
        """The result of a chunk the ledger holds and whose rows are in the table: nothing done."""
        self.log.info(
            "%s: already loaded into %s (%d rows, load %s), and its rows are there; skipping",
            spec.uri,
            ref,
            entry.rows,
            entry.load_id,
        )
        return ChunkResult(spec.uri, entry.rows, entry.bytes, 0.0, True, method)

    def _stored_probe(self, conn: Any, ref: TableRef, probe: KeyProbe | None) -> KeyProbe | None:
        """The chunk's first and last key as the table stores them, in the loading transaction.

        A ``timestamp(0)`` key rounds its input's fraction: stored as such, later probes find it.
        """
        if probe is None:
            return None
        first, last = self.dialect.stored_key_values(
            conn, ref, probe.columns, [probe.first, probe.last]
        )
        return KeyProbe(probe.columns, first, last)

    def _load_claimed(
        self,
        conn: Any,
        ref: TableRef,
        spec: ChunkSpec,
        method: str,
        columns: list[str] | None,
        fmt: FileFormat,
    ) -> tuple[int, int, KeyProbe | None]:
        """Load the chunk in the open transaction (its ledger claim held).

        Rows, bytes and the key probe its ledger entry keeps.

        The stored bytes are checked against the manifest's sha256 before the caller commits,
        so a chunk rewritten in S3 after staging never loads; a direct chunk's object is read
        pinned to the version planning saw, and its first and last key are read as it streams.
        """
        dialect = self.dialect
        dialect.tune_load_session(conn)
        nullable = self._nullable_columns(conn, ref) if spec.key_columns else set()
        probe = probe_of(spec, nullable=nullable)
        into = LoadInto(ref, columns, fmt)
        if method == "client":
            with open_chunk_stream(spec, aws_conn_id=None, client=self.s3) as stream:
                rows = dialect.load_stream(conn, into, stream, spec.uri)
                stream.verify(spec.checksum)
                nbytes = stream.bytes_read
                if isinstance(stream, DirectChunkStream) and spec.key_columns:
                    keys = stream.key_probe()
                    probe = probe_of(spec, *keys, nullable=nullable) if keys else None
        else:
            if spec.is_direct:  # the server would read the whole object, header included
                raise ChunkLoadError(
                    spec.uri,
                    f"a chunk planned to load as stored (direct) cannot load with method "
                    f"{method!r}: the server would read the whole object, not its range",
                    expected="method='client' for this manifest, or staging with direct=False",
                )
            self._check_stored_object(spec)
            rows = dialect.load_server_side(
                conn, method, into, spec, s3_region(self.aws_conn_id, self.s3)
            )
            nbytes = spec.raw_bytes or spec.bytes
        if spec.rows is not None and rows != spec.rows:
            raise RowCountMismatchError(
                spec.uri,
                f"the server loaded {rows} rows",
                expected=f"{spec.rows} rows as the manifest says",
            )
        return rows, nbytes, probe

    def _check_stored_object(self, spec: ChunkSpec) -> None:
        """Server-side loads never see the bytes: check the object's ETag (or size) instead."""
        try:
            head = self.s3.head_object(Bucket=spec.bucket, Key=spec.object_key)
        except Exception as exc:
            code = s3_error_code(exc)
            if code in ("NoSuchKey", "404", "NoSuchBucket"):
                raise ChunkLoadError(
                    spec.uri, "the S3 object does not exist", expected="a staged chunk"
                ) from exc
            raise
        etag = str(head.get("ETag", "")).strip('"')
        if spec.etag and etag != spec.etag.strip('"'):
            found = f"ETag {etag}, the manifest says {spec.etag}"
        elif spec.bytes and int(head.get("ContentLength", spec.bytes)) != spec.bytes:
            found = f"{head.get('ContentLength')} bytes, the manifest says {spec.bytes}"
        else:
            return
        raise ChunkLoadError(
            spec.uri,
            f"the stored object changed after staging ({found}); nothing of it was loaded",
            expected="the chunk exactly as staging wrote it",
        )

    def load_slot_free(self, table: str, slots: int) -> bool:
        """Whether one of ``table``'s ``slots`` load slots is free now (taken and let go at once).

        The deferred load's trigger asks this; the load then takes a slot for real, and waits
        again if another load was quicker.
        """
        dialect = self.dialect
        with closing(self.get_conn()) as conn:
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            for slot in range(slots):
                taken = dialect.try_acquire_load_slot(conn, ref, slot)
                if taken:
                    dialect.release_load_slot(conn, ref, slot)
                conn.commit()
                if taken:
                    return True
        return False

    @contextmanager
    def _load_slot(
        self, conn: Any, table: TableRef, slots: int | None, timeout: float
    ) -> Iterator[int | None]:
        """Hold one of ``slots`` server-side load slots of ``table`` for the block."""
        if not slots:
            yield None
            return
        if slots < 1:
            raise ValueError(f"max_concurrent_loads must be at least 1, got {slots}")
        dialect = self.dialect
        deadline = time.monotonic() + timeout
        waited = False
        while True:
            slot = next(
                (n for n in range(slots) if dialect.try_acquire_load_slot(conn, table, n)), None
            )
            conn.commit()  # the slot is session-scoped; the load's transaction starts afresh
            if slot is not None:
                break
            if time.monotonic() >= deadline:
                raise LoadSlotsBusyError(
                    f"no free load slot for {table} after {timeout:.0f} s: {slots} other loads "
                    "still hold them"
                )
            if not waited:
                self.log.info("%s: all %d load slots are busy; waiting for one", table, slots)
                waited = True
            time.sleep(1 + random.random())
        try:
            yield slot
        finally:
            try:
                dialect.release_load_slot(conn, table, slot)
                conn.commit()
            except Exception:  # the server frees it with the session anyway
                self.log.warning("could not release load slot %d of %s", slot, table)
