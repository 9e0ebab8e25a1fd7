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

from airflow_bulkload.dialects import Dialect, dialect_for
from airflow_bulkload.dialects.base import LedgerEntry, ServerFacts, TableInfo, TableRef
from airflow_bulkload.exceptions import BulkLoadError, ChunkConflictError, RowCountMismatchError
from airflow_bulkload.s3io import open_s3_stream, s3_client, s3_region
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, parse_s3_uri
from airflow_bulkload.staging.planning import MANIFEST_NAME
from airflow_bulkload.staging.stager import read_manifest
from airflow_bulkload.table_state import primary_key_of_snapshot

LOAD_METHODS = ("client", "rds_s3", "aurora_s3")


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
        if self.dialect.name == "postgres":
            from airflow.providers.postgres.hooks.postgres import PostgresHook

            conn: Any = PostgresHook(postgres_conn_id=self.conn_id).get_conn()
            conn.autocommit = False
            return conn
        from airflow.providers.mysql.hooks.mysql import MySqlHook

        # LOAD DATA LOCAL needs the client flag; the hook ignores it as a connection extra.
        mysql_conn: Any = MySqlHook(mysql_conn_id=self.conn_id, local_infile=True).get_conn()
        mysql_conn.autocommit(False)
        return mysql_conn

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
        dialect = self.dialect
        started = time.monotonic()
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            with (
                self._load_slot(conn, ref, max_concurrent_loads, slot_wait_timeout),
                dialect.transaction(conn),
            ):
                existing = dialect.claim_chunk(conn, ref, spec)
                if existing is not None:
                    if existing.checksum != spec.checksum:
                        raise ChunkConflictError(
                            f"{spec.uri} was already loaded into {ref} with checksum "
                            f"{existing.checksum}, but the staged chunk now has {spec.checksum}: "
                            "the input changed after loading began; stage it under a new prefix"
                        )
                    self.log.info(
                        "%s: already loaded into %s (%d rows, load %s); skipping",
                        spec.uri,
                        ref,
                        existing.rows,
                        existing.load_id,
                    )
                    return ChunkResult(spec.uri, existing.rows, existing.bytes, 0.0, True, method)
                dialect.tune_load_session(conn)
                if method == "client":
                    with open_s3_stream(
                        spec.uri, aws_conn_id=self.aws_conn_id, compression=spec.compression
                    ) as stream:
                        rows = dialect.load_stream(conn, ref, columns, fmt, stream, spec.uri)
                        nbytes = stream.bytes_read
                else:
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
                dialect.record_chunk(
                    conn, LedgerEntry(str(ref), spec.key, spec.checksum, rows, nbytes, load_id)
                )
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

    def withdraw_superseded_chunks(self, table: str, manifest_uri: str) -> list[ChunkResult]:
        """Take back the chunks an earlier attempt of this load committed from a staging of its
        input that the staging at ``manifest_uri`` replaced (the input was corrected and staged
        again, under a new fingerprint). Without this, a re-run after fixing a bad file would
        load the earlier attempt's good chunks a second time.

        Staging puts every attempt of one load under ``<load prefix>/<fingerprint>/``: the
        ledger's chunks under the load prefix but outside the current fingerprint's are the
        superseded ones. Each is read again from its old staging location and its rows are
        deleted by primary key, with its ledger entry, in one transaction.
        """
        current = manifest_uri.rsplit("/", 1)[0] + "/"
        bucket, current_key = parse_s3_uri(current)
        load_key = current_key.rstrip("/").rsplit("/", 1)[0] + "/"
        dialect = self.dialect
        s3 = s3_client(self.aws_conn_id)
        results: list[ChunkResult] = []
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            superseded = [
                entry
                for entry in dialect.ledger_entries(conn, ref, load_key)
                if not entry.chunk_key.startswith(current_key)
            ]
            if not superseded:
                return results
            key_columns = self._primary_key(conn, ref)
            if not key_columns:
                raise BulkLoadError(
                    f"{ref} has no primary key, so the rows of {len(superseded)} chunk(s) an "
                    "earlier attempt of this load committed from a since-replaced staging "
                    f"(e.g. s3://{bucket}/{superseded[0].chunk_key}) cannot be told apart: "
                    "delete them by hand, then their rows in the chunk ledger"
                )
            for entry in superseded:
                results.append(self._withdraw(conn, ref, entry, bucket, key_columns, s3))
        return results

    def _withdraw(
        self,
        conn: Any,
        table: TableRef,
        entry: LedgerEntry,
        bucket: str,
        key_columns: list[str],
        s3: Any,
    ) -> ChunkResult:
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
            deleted = self.dialect.withdraw_chunk(conn, table, entry, spec, key_columns, stream)
        if deleted != entry.rows:
            self.log.warning(
                "%s: took back %d rows, but the ledger says it loaded %d (rows changed since?)",
                uri,
                deleted,
                entry.rows,
            )
        self.log.info(
            "%s: superseded by a new staging; took its %d rows back out of %s", uri, deleted, table
        )
        return ChunkResult(uri, deleted, entry.bytes, time.monotonic() - started, False, "withdraw")

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
