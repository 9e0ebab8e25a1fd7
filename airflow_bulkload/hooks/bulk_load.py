"""BulkLoadHook: the database side of a bulk load, for PostgreSQL and MySQL connections."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_bulkload.catalog import (
    KeyProbe,
    LedgerEntry,
    LoadRecord,
    ServerFacts,
    TableInfo,
    TableRef,
)
from airflow_bulkload.dialects import Dialect, dialect_for
from airflow_bulkload.exceptions import (
    BulkLoadError,
    ChunkConflictError,
    ChunkLoadError,
    InputAlreadyLoadedError,
    LoadVerificationError,
    RowCountMismatchError,
)
from airflow_bulkload.s3io import (
    open_s3_stream,
    parse_s3_uri,
    s3_client,
    s3_error_code,
    s3_region,
)
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, read_manifest
from airflow_bulkload.staging.origin import SourceLine, find_record, read_record
from airflow_bulkload.staging.planning import MANIFEST_NAME
from airflow_bulkload.staging.sources import open_source
from airflow_bulkload.table_state import primary_key_of_snapshot

LOAD_METHODS = ("client", "rds_s3", "aurora_s3")


def _few(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


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


def probe_of(spec: ChunkSpec) -> KeyProbe | None:
    """The chunk's first and last key, as the ledger keeps them (``None`` without a key)."""
    if spec.key_columns and spec.first_key is not None and spec.last_key is not None:
        return KeyProbe(list(spec.key_columns), list(spec.first_key), list(spec.last_key))
    return None


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


class BulkLoadHook(BaseHook):
    """Loads staged chunks into a table exactly once, through the engine's fastest path.

    :param conn_id: an Airflow connection of type ``postgres`` or ``mysql``; the dialect follows it.
        Its extra ``bulkload_state_schema`` names where the state tables live (MySQL: a database;
        default the connection's).
    :param aws_conn_id: the AWS connection used to read chunks from S3 (``client`` method) and to
        know the region (server-side methods).
    """

    conn_name_attr = "conn_id"
    default_conn_name = "postgres_default"
    conn_type = "bulkload"
    hook_name = "Bulk Load"

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
        """The table's primary key columns, also while a load has it stripped: then the key its
        saved state recorded (staging and withdrawing must see the same key on a re-run)."""
        with closing(self.get_conn()) as conn:
            dialect = self.dialect
            dialect.ensure_state_schema(conn)
            return self._primary_key(conn, dialect.qualified_name(conn, dialect.table_ref(table)))

    def _primary_key(self, conn: Any, ref: TableRef) -> list[str]:
        saved = self.dialect.unfinished_table_saved_state(conn, ref)
        if saved is not None:
            return primary_key_of_snapshot(saved)
        return list(self.dialect.describe_table(conn, ref).primary_key)

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
        """Load one chunk in one transaction: claim it in the ledger, skip it if already committed,
        load, check the row count against the manifest, record it, commit.

        A retry after a commit is a no-op; a failure leaves nothing of the chunk behind.
        With ``max_concurrent_loads``, the load first waits for one of that many per-table load
        slots held on the database server, so no more chunks load into the table at once,
        whichever workers, DAG runs or DAGs they come from.
        """
        if method not in LOAD_METHODS:
            raise ValueError(f"method must be one of {LOAD_METHODS}, got {method!r}")
        spec = ChunkSpec.from_dict(chunk)
        fmt = FileFormat.from_dict(file_format) if file_format is not None else spec.format
        columns = columns if columns is not None else spec.columns
        try:
            return self._load_chunk(
                table, spec, method, load_id, columns, fmt, max_concurrent_loads, slot_wait_timeout
            )
        except ChunkLoadError as exc:
            raise self._at_source(spec, exc) from exc

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
            with self._load_slot(conn, ref, max_concurrent_loads, slot_wait_timeout):
                while True:
                    with dialect.transaction(conn):
                        existing = dialect.claim_chunk(conn, ref, spec)
                        if existing is None:
                            rows, nbytes = self._load_claimed(conn, ref, spec, method, columns, fmt)
                            dialect.record_chunk(
                                conn,
                                LedgerEntry(
                                    str(ref),
                                    spec.key,
                                    spec.checksum,
                                    rows,
                                    nbytes,
                                    load_id,
                                    probe=probe_of(spec),
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
                            self.log.info(
                                "%s: already loaded into %s (%d rows, load %s), and its rows are "
                                "there; skipping",
                                spec.uri,
                                ref,
                                existing.rows,
                                existing.load_id,
                            )
                            return ChunkResult(
                                spec.uri, existing.rows, existing.bytes, 0.0, True, method
                            )
                    # outside the transaction: taking the stale entry back claims the chunk itself
                    self._withdraw_stale(conn, ref, existing, spec, stale)
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

    def _at_source(self, spec: ChunkSpec, error: ChunkLoadError) -> ChunkLoadError:
        """The error as the user can act on it: the input file and line of the bad record.

        The chunk's line is kept beside it. Any failure to trace the record (the input moved,
        an old manifest, the search budget spent) leaves the error as it was.
        """
        if error.line is None or error.source != spec.uri or not spec.uri.startswith("s3://"):
            return error
        try:
            found = self._find_source_line(spec, error.line)
        except Exception as exc:  # tracing is a courtesy: never hide the load's own error
            self.log.warning(
                "could not trace %s line %d to its input: %s", spec.uri, error.line, exc
            )
            return error
        if found is None:
            return error
        return ChunkLoadError(
            found.source,
            f"{error.reason} [staged as {spec.uri}, line {error.line}]",
            line=found.line,
            column=error.column,
            expected=error.expected,
        )

    def _find_source_line(self, spec: ChunkSpec, line: int) -> SourceLine | None:
        s3 = s3_client(self.aws_conn_id)
        manifest = read_manifest(s3, spec.uri.rsplit("/", 1)[0] + "/" + MANIFEST_NAME)
        if manifest is None or not manifest.sources or not manifest.source_format:
            return None
        with open_s3_stream(
            spec.uri, aws_conn_id=None, compression=spec.compression, client=s3
        ) as stream:
            record = read_record(
                stream,  # type: ignore[arg-type]
                spec.format,
                line,
                counts_lines=self.dialect.load_errors_count_lines,
            )
        if record is None:
            return None
        return find_record(
            record,
            manifest.columns or [],
            manifest.sources,
            staged_format=spec.format,
            source_format=FileFormat.from_dict(manifest.source_format),
            open_source=lambda source: open_source(source, s3),
        )

    def _load_claimed(
        self,
        conn: Any,
        ref: TableRef,
        spec: ChunkSpec,
        method: str,
        columns: list[str] | None,
        fmt: FileFormat,
    ) -> tuple[int, int]:
        """Load the chunk in the open transaction (its ledger claim held); rows and bytes.

        The stored bytes are checked against the manifest's sha256 before the caller commits,
        so a chunk rewritten in S3 after staging never loads.
        """
        dialect = self.dialect
        dialect.tune_load_session(conn)
        if method == "client":
            with open_s3_stream(
                spec.uri, aws_conn_id=self.aws_conn_id, compression=spec.compression
            ) as stream:
                rows = dialect.load_stream(conn, ref, columns, fmt, stream, spec.uri)
                stream.verify(spec.checksum)
                nbytes = stream.bytes_read
        else:
            self._check_stored_object(spec)
            rows = dialect.load_server_side(
                conn, method, ref, columns, spec, s3_region(self.aws_conn_id)
            )
            nbytes = spec.raw_bytes or spec.bytes
        if spec.rows is not None and rows != spec.rows:
            raise RowCountMismatchError(
                spec.uri,
                f"the server loaded {rows} rows",
                expected=f"{spec.rows} rows as the manifest says",
            )
        return rows, nbytes

    def _check_stored_object(self, spec: ChunkSpec) -> None:
        """Server-side loads never see the bytes: check the object's ETag (or size) instead."""
        try:
            head = s3_client(self.aws_conn_id).head_object(Bucket=spec.bucket, Key=spec.key)
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

    def _stale_reason(self, conn: Any, ref: TableRef, entry: LedgerEntry) -> str | None:
        """Why the entry's rows are not (all) in the table any more, or ``None`` when they are.

        With a key: its first and last key are looked up. Without: the table's generation
        tells a TRUNCATE or re-create (then the table is empty) from inserts and deletes.
        """
        dialect = self.dialect
        if entry.probe is not None:
            probe = entry.probe
            present = dialect.keys_present(conn, ref, probe.columns, [probe.first, probe.last])
            if all(present):
                return None
            missing = [
                k for k, ok in zip((probe.first, probe.last), present, strict=True) if not ok
            ]
            return f"{', '.join(probe.columns)} {' and '.join(map(str, missing))} not in the table"
        generation = dialect.table_generation(conn, ref)
        if entry.generation is None or generation is None or generation == entry.generation:
            return None
        if dialect.table_is_empty(conn, ref):
            return "the table was emptied or re-created since (it is empty)"
        raise BulkLoadError(
            f"{ref} has no primary or unique key and was truncated, re-created or rebuilt since "
            f"s3://…/{entry.chunk_key} loaded (generation {entry.generation} -> {generation}), "
            "and it is not empty: whether that chunk's rows are still there cannot be told. "
            "Run the pipeline's withdraw_superseded task (it compares row counts), or delete the "
            "rows and the chunk's ledger entry by hand"
        )

    def _withdraw_stale(
        self, conn: Any, ref: TableRef, entry: LedgerEntry, spec: ChunkSpec, reason: str | None
    ) -> int:
        """Drop a stale ledger entry, first taking out what is left of its rows (by key), so
        the chunk's reload leaves each of its rows in the table once."""
        dialect = self.dialect
        self.log.warning(
            "%s: the chunk ledger says load %s put %d rows into %s, but %s: the entry is stale; "
            "loading the chunk again",
            spec.uri,
            entry.load_id,
            entry.rows,
            ref,
            reason,
        )
        if entry.probe is not None and not dialect.table_is_empty(conn, ref):
            with open_s3_stream(
                spec.uri, aws_conn_id=self.aws_conn_id, compression=spec.compression
            ) as stream:
                deleted = dialect.withdraw_chunk(
                    conn, ref, entry, spec, entry.probe.columns, stream, exact=False
                )
            if deleted:
                self.log.warning(
                    "%s: took out the %d of its rows still in %s before loading it again",
                    spec.uri,
                    deleted,
                    ref,
                )
            return deleted
        with dialect.transaction(conn):
            dialect.claim_chunk(conn, ref, spec)
            dialect.forget_chunk(conn, entry)
        return 0

    def withdraw_superseded_chunks(self, table: str, manifest_uri: str) -> list[ChunkResult]:
        """:meth:`reconcile` without a reload; the chunks taken back out."""
        return self.reconcile(table, manifest_uri).withdrawn

    def reconcile(
        self, table: str, manifest_uri: str, *, reload: bool = False, load_id: str = ""
    ) -> Reconciliation:
        """Make the chunk ledger agree with the table before the input at ``manifest_uri`` loads.

        Staging puts every input of one load (DAG, table, data interval) under
        ``<load prefix>/<fingerprint>/``. Here, in order:

        1. *Superseded stagings*: ledger chunks under the load prefix but outside the current
           fingerprint come from another input for the same date. When that input's load never
           completed (a run failed and its input was corrected), its committed chunks are taken
           back out, by key, so no row loads twice. When it completed (its report verified it),
           the run is refused with :class:`InputAlreadyLoadedError` unless ``reload``: a second
           input for a loaded date never silently replaces it.
        2. ``reload``: the current input's chunks are taken back out too, so they load again.
        3. *Stale entries*: each remaining entry of the current input counts only while its
           rows are in the table (key probes; for a keyless table, its generation and row
           count). A stale entry is dropped (what is left of its rows taken out) so the chunk
           loads again.

        A withdraw deletes exactly the rows the ledger says the chunk loaded (with ``reload``: at
        most that many), or nothing (:class:`~airflow_bulkload.exceptions.WithdrawMismatchError`):
        rows of another load that share the chunk's keys are never taken.
        """
        current = manifest_uri.rsplit("/", 1)[0] + "/"
        bucket, current_key = parse_s3_uri(current)
        load_key = current_key.rstrip("/").rsplit("/", 1)[0] + "/"
        dialect = self.dialect
        s3 = s3_client(self.aws_conn_id)
        withdrawn: list[ChunkResult] = []
        stale: list[str] = []
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            entries = dialect.ledger_entries(conn, ref, load_key)
            superseded = [e for e in entries if not e.chunk_key.startswith(current_key)]
            mine = [e for e in entries if e.chunk_key.startswith(current_key)]
            if superseded:
                prefixes = sorted({e.chunk_key.rsplit("/", 1)[0] + "/" for e in superseded})
                if not reload:
                    self._refuse_loaded_input(conn, ref, bucket, prefixes, current_key)
                key_columns = self._withdraw_key(conn, ref, superseded, bucket)
                for entry in superseded:
                    withdrawn.append(
                        self._withdraw(conn, ref, entry, bucket, key_columns, s3, exact=not reload)
                    )
                with dialect.transaction(conn):
                    for prefix in prefixes:
                        dialect.delete_load_records(conn, ref, prefix)
            if reload and mine:
                key_columns = self._withdraw_key(conn, ref, mine, bucket)
                for entry in mine:
                    withdrawn.append(
                        self._withdraw(conn, ref, entry, bucket, key_columns, s3, exact=False)
                    )
                mine = []
            if mine:
                manifest = read_manifest(s3, manifest_uri)
                specs = {c.key: c for c in manifest.chunks} if manifest else {}
                for entry, reason in self._stale_entries(conn, ref, mine):
                    spec = specs.get(entry.chunk_key)
                    if spec is None:  # not in this manifest (cannot happen): nothing to reload
                        continue
                    self._withdraw_stale(conn, ref, entry, spec, reason)
                    stale.append(spec.uri)
            record = dialect.read_load_record(conn, ref, current_key)
            if reload:
                record = None
            only_this_input = self._holds_only_this_input(conn, ref, current_key, record)
            if record is None or record.empty_before != only_this_input:
                record = LoadRecord(
                    str(ref),
                    current_key,
                    load_id or (record.load_id if record else ""),
                    empty_before=only_this_input,
                    verified=bool(record and record.verified),
                )
                with dialect.transaction(conn):
                    dialect.write_load_record(conn, record)
            warnings = self._same_input_elsewhere(conn, ref, current_key, load_key)
        return Reconciliation(withdrawn, stale, record.empty_before, warnings)

    def _holds_only_this_input(
        self, conn: Any, ref: TableRef, current_key: str, record: LoadRecord | None
    ) -> bool:
        """Whether the table held nothing but this input's rows when its load began.

        Only then may the report check the table's row count against the input's. The answer
        is taken anew at every run of the date, under the table claim: a table that was empty
        when a date first loaded holds other dates' rows once they load after it (their ledger
        entries say so), and then the date's rows are checked by key probes alone.
        """
        dialect = self.dialect
        mine = dialect.ledger_entries(conn, ref, current_key)
        if not mine:
            return dialect.table_is_empty(conn, ref)
        if record is None or not record.empty_before:
            return False
        return dialect.ledger_rows(conn, ref) == sum(e.rows for e in mine)

    def _refuse_loaded_input(
        self, conn: Any, ref: TableRef, bucket: str, prefixes: list[str], current_key: str
    ) -> None:
        """Refuse to take back a staged input that loaded completely, or that cannot be told.

        An input whose load was verified, or whose ledger entries carry no load record (a
        ledger of an earlier release), is replaced only when the author asks (``reload``); an
        unverified input is a failed attempt whose input was corrected, and is taken back.
        """
        for prefix in prefixes:
            record = self.dialect.read_load_record(conn, ref, prefix)
            if record is None:
                raise InputAlreadyLoadedError(
                    f"this date has rows in {ref} from another input (staged at "
                    f"s3://{bucket}/{prefix}) with no record of whether that load completed, "
                    f"and this run's input differs (staged at s3://{bucket}/{current_key}). "
                    "Nothing was changed. To replace the date's rows with this input, run "
                    "again with reload=True (the example DAGs' 'reload' Param)"
                )
            if record.verified:
                raise InputAlreadyLoadedError(
                    f"this date was already loaded into {ref} from another input (staged at "
                    f"s3://{bucket}/{prefix}, load {record.load_id}, verified), and this run's "
                    f"input differs (staged at s3://{bucket}/{current_key}). Nothing was changed. "
                    "To replace the date's rows with this input, run again with reload=True "
                    "(the example DAGs' 'reload' Param); to add the input, load it under its "
                    "own run or DAG"
                )

    def _withdraw_key(
        self, conn: Any, ref: TableRef, entries: list[LedgerEntry], bucket: str
    ) -> list[str]:
        probes = {tuple(e.probe.columns) for e in entries if e.probe is not None}
        if len(probes) == 1:
            return list(next(iter(probes)))
        key = self._primary_key(conn, ref)
        if key:
            return key
        raise BulkLoadError(
            f"{ref} has no primary key, so the rows of {len(entries)} chunk(s) an "
            "earlier attempt of this load committed from a since-replaced staging "
            f"(e.g. s3://{bucket}/{entries[0].chunk_key}) cannot be told apart: "
            "delete them by hand, then their rows in the chunk ledger"
        )

    def _stale_entries(
        self, conn: Any, ref: TableRef, entries: list[LedgerEntry]
    ) -> list[tuple[LedgerEntry, str]]:
        """The entries whose rows are not all in the table, with why.

        A keyless table whose generation changed (TRUNCATE, re-create, VACUUM FULL, CLUSTER,
        OPTIMIZE TABLE) is judged as a whole: empty means its rows are gone; holding at least
        the rows these entries loaded means it was rebuilt with them (the entries take the new
        generation); fewer is refused, since which chunks lost rows cannot be told.
        """
        dialect = self.dialect
        stale: list[tuple[LedgerEntry, str]] = []
        keyless: list[LedgerEntry] = []
        for entry in entries:
            if entry.probe is not None:
                reason = self._stale_reason(conn, ref, entry)
                if reason is not None:
                    stale.append((entry, reason))
            else:
                keyless.append(entry)
        generation = dialect.table_generation(conn, ref) if keyless else None
        changed = [e for e in keyless if e.generation and generation and e.generation != generation]
        if not changed or generation is None:
            return stale
        if dialect.table_is_empty(conn, ref):
            reason = "the table was emptied or re-created since (it is empty)"
            return stale + [(e, reason) for e in changed]
        in_table = dialect.count_rows(conn, ref)
        expected = sum(e.rows for e in keyless)
        if in_table < expected:
            raise BulkLoadError(
                f"{ref} has no primary or unique key and was truncated, re-created or rebuilt "
                f"since {len(changed)} chunk(s) of this input loaded; it now holds {in_table} "
                f"rows, fewer than the {expected} this input's chunks loaded, so which chunks "
                "lost rows cannot be told. Delete the rows of this input yourself (or TRUNCATE "
                "the table), then run again: an empty table reloads every chunk"
            )
        self.log.info(
            "%s was rebuilt since %d chunk(s) loaded (VACUUM FULL, CLUSTER or OPTIMIZE TABLE) "
            "and holds %d rows, at least the %d they loaded: their ledger entries stand",
            ref,
            len(changed),
            in_table,
            expected,
        )
        with dialect.transaction(conn):
            for entry in changed:
                dialect.set_chunk_generation(conn, entry, generation)
        return stale

    def _same_input_elsewhere(
        self, conn: Any, ref: TableRef, current_key: str, load_key: str
    ) -> list[str]:
        """A keyless table has nothing to reject a second copy of the same input with: say so
        when the same input (same fingerprint) was loaded by another DAG or date."""
        if self._primary_key(conn, ref):
            return []
        fingerprint = current_key.rstrip("/").rsplit("/", 1)[-1]
        elsewhere = sorted(
            {
                e.chunk_key.rsplit("/", 1)[0]
                for e in self.dialect.ledger_entries(conn, ref, "")
                if f"/{fingerprint}/" in f"/{e.chunk_key}" and not e.chunk_key.startswith(load_key)
            }
        )
        if not elsewhere:
            return []
        warning = (
            f"{ref} has no primary key, and the same input (fingerprint {fingerprint}) was "
            f"already loaded into it under {', '.join(elsewhere[:3])}: the ledger tells loads "
            "apart by DAG, table and date, so this load adds its rows again. Stop the run if "
            "that is not what you want"
        )
        self.log.warning("%s", warning)
        return [warning]

    def _withdraw(
        self,
        conn: Any,
        table: TableRef,
        entry: LedgerEntry,
        bucket: str,
        key_columns: list[str],
        s3: Any,
        *,
        exact: bool = True,
    ) -> ChunkResult:
        """Take one chunk back out. ``exact``: exactly the rows the ledger says it loaded;
        otherwise (a reload asked for by the author) at most that many: what is left of them."""
        started = time.monotonic()
        uri = f"s3://{bucket}/{entry.chunk_key}"
        manifest = read_manifest(s3, uri.rsplit("/", 1)[0] + "/" + MANIFEST_NAME)
        spec = next((c for c in manifest.chunks if c.uri == uri), None) if manifest else None
        if spec is None:
            raise BulkLoadError(
                f"{uri} was loaded into {table} by an earlier attempt of this load from a staging "
                "that has since been replaced, and its manifest is gone: its rows cannot be "
                "identified to take them back"
            )
        with open_s3_stream(
            uri, aws_conn_id=None, compression=spec.compression, client=s3
        ) as stream:
            deleted = self.dialect.withdraw_chunk(
                conn, table, entry, spec, key_columns, stream, exact=exact
            )
        self.log.info("%s: took its %d rows back out of %s", uri, deleted, table)
        return ChunkResult(uri, deleted, entry.bytes, time.monotonic() - started, False, "withdraw")

    def verify_load(self, table: str, manifest_uri: str, *, load_id: str = "") -> dict[str, Any]:
        """Check that the rows the load claims are in ``table``; raise
        :class:`~airflow_bulkload.exceptions.LoadVerificationError` with the numbers otherwise.

        Every chunk of the manifest must have its ledger entry (rows as the manifest says); a
        chunk with a key must have its first and last key in the table (two index lookups);
        when the table was empty before the load, its row count must equal the input's. A
        keyless table that held rows before can only be checked to hold at least the input's
        rows. On success the load is recorded as verified (see :meth:`reconcile`).
        """
        s3 = s3_client(self.aws_conn_id)
        manifest = read_manifest(s3, manifest_uri)
        if manifest is None:
            raise LoadVerificationError(f"{manifest_uri}: the manifest is gone; nothing to verify")
        current_key = parse_s3_uri(manifest_uri.rsplit("/", 1)[0] + "/")[1]
        dialect = self.dialect
        problems: list[str] = []
        checks: list[str] = []
        expected = manifest.total_rows
        found: int | None = None
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            entries = {e.chunk_key: e for e in dialect.ledger_entries(conn, ref, current_key)}
            unrecorded = [c.uri for c in manifest.chunks if c.key not in entries]
            if unrecorded:
                problems.append(f"{len(unrecorded)} chunk(s) never committed: {_few(unrecorded)}")
            miscounted = [
                f"{c.uri} ({entries[c.key].rows} rows, manifest {c.rows})"
                for c in manifest.chunks
                if c.key in entries and c.rows is not None and entries[c.key].rows != c.rows
            ]
            if miscounted:
                problems.append(f"chunks whose rows differ from the manifest: {_few(miscounted)}")
            probed = [(c, entries[c.key]) for c in manifest.chunks if c.key in entries]
            probed = [(c, e) for c, e in probed if e.probe is not None]
            missing: list[str] = []
            for chunk, entry in probed:
                reason = self._stale_reason(conn, ref, entry)
                if reason is not None:
                    missing.append(f"{chunk.uri} ({reason})")
            if probed:
                checks.append(f"first and last key of {len(probed)} chunk(s) found")
            if missing:
                problems.append(f"rows missing from the table: {_few(missing)}")
            record = dialect.read_load_record(conn, ref, current_key)
            empty_before = bool(record and record.empty_before)
            if empty_before:
                found = dialect.count_rows(conn, ref)
                checks.append("row count equals the input's (the table was empty before)")
                if found != expected:
                    problems.append(
                        f"the table was empty before the load and holds {found} rows, "
                        f"but the input has {expected}"
                    )
            elif len(probed) < len(manifest.chunks):
                found = dialect.count_rows(conn, ref)
                checks.append("row count at least the input's (no key to probe)")
                if found < expected:
                    problems.append(
                        f"the table holds {found} rows, fewer than the input's {expected}"
                    )
            if problems:
                raise LoadVerificationError(
                    f"{ref} does not hold what this load claims (expected {expected} rows"
                    + (f", found {found}" if found is not None else "")
                    + "): "
                    + "; ".join(problems)
                )
            with dialect.transaction(conn):
                dialect.write_load_record(
                    conn,
                    LoadRecord(
                        str(ref),
                        current_key,
                        record.load_id if record and not load_id else load_id,
                        empty_before=empty_before,
                        verified=True,
                    ),
                )
        return {
            "verified": True,
            "checks": checks,
            "rows_expected": expected,
            "rows_in_table": found,
            "sources": manifest.sources,
            "input_empty": expected == 0,
        }

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
            if time.monotonic() > deadline:
                raise TimeoutError(
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
