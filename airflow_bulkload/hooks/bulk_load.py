"""BulkLoadHook: the database side of a bulk load, for PostgreSQL and MySQL connections."""

from __future__ import annotations

import time
from contextlib import closing
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_bulkload.dialects import Dialect, dialect_for
from airflow_bulkload.dialects.base import LedgerEntry, ServerFacts, TableInfo
from airflow_bulkload.exceptions import ChunkConflictError, RowCountMismatchError
from airflow_bulkload.s3io import open_s3_stream, s3_region
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

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
    ) -> ChunkResult:
        """Load one chunk in one transaction: claim it in the ledger, skip it if already committed,
        load, check the row count against the manifest, record it, commit.

        A retry after a commit is a no-op; a failure leaves nothing of the chunk behind.
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
            with dialect.transaction(conn):
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
