"""The two database engines as the benchmark drives them: tables, index builds, client commands
(psql / the mariadb client), the statements ``stream_load.py`` streams S3 parts into, the
order-independent checksum, and MySQL's buffer pool for the run. Identifiers are quoted with psycopg's ``sql.Identifier`` or the
project's MySQL quote helper."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any

from psycopg import sql

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects.mysql.load_sql import local_infile_sql
from airflow_bulkload.dialects.mysql.quoting import quote_identifier
from airflow_bulkload.dialects.postgres.load import copy_from_stdin
from airflow_bulkload.staging.manifest import FileFormat
from benchmarks.datasets import Dataset
from tests.harness import ServerSettings, TestDatabase

TABLE = "bench"
#: what the streamed loads send: CSV rows, the parts' headers already dropped
CSV_BODY = FileFormat(format="csv", header=False)
#: stands for the FIFO in MySQL's streamed LOAD DATA LOCAL (``stream_load.py`` fills it in)
FIFO_PLACEHOLDER = "@FIFO@"

#: order-independent checksums; {seconds} and {note} are filled in per engine
CLASSIC_CHECKSUM = (
    "SELECT count(*), sum(id), sum(a), sum(b), sum(c), sum(d), "
    "sum((id % 9973) * (a % 9973 + b % 997 + c + d % 991)) FROM {source}"
)
CHECKSUM_SQL = {
    "classic": CLASSIC_CHECKSUM,
    "classic_sorted": CLASSIC_CHECKSUM,
    "wide": (
        "SELECT count(*), sum(id), sum(customer_id * quantity), count({note}), "
        "sum(length({note})), sum({seconds}) FROM {source}"
    ),
}


def checksum_sql(dataset: Dataset, source: str, *, seconds: str, note: str = "note") -> str:
    return CHECKSUM_SQL[dataset.name].format(source=source, seconds=seconds, note=note)


def duckdb_checksum(dataset: Dataset, path: Path | Sequence[Path]) -> tuple[int, ...]:
    """The checksum of a source file, or of several together (plain or gzip), by DuckDB."""
    import duckdb

    paths = [path] if isinstance(path, Path) else list(path)
    targets = ", ".join("'" + str(p).replace("'", "''") + "'" for p in paths)
    query = checksum_sql(
        dataset,
        f"read_csv([{targets}], header=true, nullstr='')",
        seconds="date_diff('second', TIMESTAMP '2026-01-01', created_at)",
    )
    [row] = duckdb.execute(query).fetchall()
    return tuple(int(v or 0) for v in row)


def index_name(columns: Sequence[str]) -> str:
    return f"{TABLE}_{'_'.join(columns)}_idx"


def without_primary_key(ddl: str) -> str:
    """The dataset's DDL with the inline primary key left out (a table with no index at all)."""
    return ddl.replace(" PRIMARY KEY", "")


class Engine:
    """What differs per engine. Subclasses fill in the SQL and the client command."""

    name = ""

    def checksum(self, db: TestDatabase, dataset: Dataset, table: str = TABLE) -> tuple[int, ...]:
        [row] = db.query(self.checksum_query(dataset, table))
        return tuple(int(v or 0) for v in row)

    def create_table(
        self, db: TestDatabase, dataset: Dataset, *, indexed: bool, unlogged: bool = False
    ) -> None:
        statements = self.table_ddl(dataset, indexed=indexed, unlogged=unlogged)
        with closing(db.connect()) as conn:
            cur = conn.cursor()
            for statement in statements:
                cur.execute(statement)
            cur.close()

    def run_client(self, db: TestDatabase, statement: str, stdin: Path | None = None) -> None:
        """Run one statement with the engine's command-line client (stdin from a file)."""
        env = os.environ | self.client_env(db)
        with open(stdin or os.devnull, "rb") as data:
            done = subprocess.run(
                [*self.client_argv(db), statement],
                stdin=data,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
        if done.returncode != 0:
            raise RuntimeError(f"{self.name} client failed: {done.stderr.strip()[-2000:]}")

    # -- per engine ------------------------------------------------------------------------------
    def stream_statement(self, dataset: Dataset) -> str:
        """The statement a driver session feeds streamed CSV rows (no header) into; MySQL's
        reads the FIFO named :data:`FIFO_PLACEHOLDER`."""
        raise NotImplementedError

    def checksum_query(self, dataset: Dataset, table: str = TABLE) -> str:
        raise NotImplementedError

    def table_ddl(self, dataset: Dataset, *, indexed: bool, unlogged: bool) -> list[str]:
        raise NotImplementedError

    def index_phases(self, dataset: Dataset) -> list[list[str]]:
        """Statements that build the primary key and indexes on an unindexed table: phases run
        one after another, the statements of a phase in parallel sessions."""
        raise NotImplementedError

    def client_argv(self, db: TestDatabase) -> list[str]:
        raise NotImplementedError

    def client_env(self, db: TestDatabase) -> dict[str, str]:
        raise NotImplementedError


class Postgres(Engine):
    name = "postgres"

    def checksum_query(self, dataset: Dataset, table: str = TABLE) -> str:
        source = sql.Identifier(table).as_string(None)
        return checksum_sql(
            dataset,
            source,
            seconds="extract(epoch from created_at - timestamp '2026-01-01')::bigint",
        )

    def table_ddl(self, dataset: Dataset, *, indexed: bool, unlogged: bool) -> list[str]:
        table = sql.Identifier(TABLE).as_string(None)
        ddl = dataset.postgres_ddl.format(table=table)
        if not indexed:
            ddl = without_primary_key(ddl)
        if unlogged:
            ddl = ddl.replace("CREATE TABLE", "CREATE UNLOGGED TABLE", 1)
        indexes = [self._create_index(cols) for cols in dataset.index_columns] if indexed else []
        return [ddl, *indexes]

    def _create_index(self, columns: Sequence[str], *, unique: bool = False) -> str:
        return (
            sql.SQL("CREATE {unique}INDEX {name} ON {table} ({columns})")
            .format(
                unique=sql.SQL("UNIQUE " if unique else ""),
                name=sql.Identifier(index_name(columns) if not unique else f"{TABLE}_pkey"),
                table=sql.Identifier(TABLE),
                columns=sql.SQL(", ").join(sql.Identifier(c) for c in columns),
            )
            .as_string(None)
        )

    def index_phases(self, dataset: Dataset) -> list[list[str]]:
        # The PK as a unique index in its own session, then attached: a plain ADD PRIMARY KEY
        # would take a lock that blocks the concurrent CREATE INDEX sessions.
        attach = (
            sql.SQL("ALTER TABLE {table} ADD CONSTRAINT {pkey} PRIMARY KEY USING INDEX {pkey}")
            .format(table=sql.Identifier(TABLE), pkey=sql.Identifier(f"{TABLE}_pkey"))
            .as_string(None)
        )
        builds = [self._create_index([dataset.columns[0]], unique=True)]
        builds += [self._create_index(cols) for cols in dataset.index_columns]
        return [builds, [attach]]

    def stream_statement(self, dataset: Dataset) -> str:
        return copy_from_stdin(TableRef(TABLE), dataset.columns, CSV_BODY).as_string(None)

    def client_argv(self, db: TestDatabase) -> list[str]:
        s = db.server
        return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", s.host, "-p", str(s.port),
                "-U", s.user, "-d", db.name, "-c"]  # fmt: skip

    def client_env(self, db: TestDatabase) -> dict[str, str]:
        return {"PGPASSWORD": db.server.password} if db.server.password else {}


class MySql(Engine):
    name = "mysql"

    def checksum_query(self, dataset: Dataset, table: str = TABLE) -> str:
        return checksum_sql(
            dataset,
            quote_identifier(table),
            seconds="TIMESTAMPDIFF(SECOND, '2026-01-01', created_at)",
            # LOAD DATA and mariadb-import read an empty field as '' (the pipeline maps it to NULL)
            note="NULLIF(note, '')",
        )

    def table_ddl(self, dataset: Dataset, *, indexed: bool, unlogged: bool) -> list[str]:
        ddl = dataset.mysql_ddl.format(table=quote_identifier(TABLE))
        if not indexed:
            return [without_primary_key(ddl)]
        return [ddl, *[self._add_index(cols) for cols in dataset.index_columns]]

    def _add_index(self, columns: Sequence[str]) -> str:
        cols = ", ".join(quote_identifier(c) for c in columns)
        return (
            f"ALTER TABLE {quote_identifier(TABLE)} "
            f"ADD INDEX {quote_identifier(index_name(columns))} ({cols})"
        )

    def index_phases(self, dataset: Dataset) -> list[list[str]]:
        # Adding the primary key rebuilds the (clustered) table, so it goes first and alone.
        pk = f"ALTER TABLE {quote_identifier(TABLE)} ADD PRIMARY KEY ({quote_identifier(dataset.columns[0])})"
        return [[pk], [self._add_index(cols) for cols in dataset.index_columns]]

    def stream_statement(self, dataset: Dataset) -> str:
        return local_infile_sql(FIFO_PLACEHOLDER, TableRef(TABLE), dataset.columns, CSV_BODY)

    def client_argv(self, db: TestDatabase) -> list[str]:
        s = db.server
        return ["mariadb", "--local-infile=1", "-h", s.host, "-P", str(s.port), "-u", s.user,
                db.name, "-e"]  # fmt: skip

    def client_env(self, db: TestDatabase) -> dict[str, str]:
        return {"MYSQL_PWD": db.server.password} if db.server.password else {}


ENGINES: dict[str, Engine] = {"postgres": Postgres(), "mysql": MySql()}


#: MariaDB/MySQL buffer pool for the run: RDS gives InnoDB about 3/4 of the instance's memory
DEFAULT_BUFFER_POOL = 4 << 30


def _global_int(cur: Any, name: str) -> int:
    cur.execute(f"SELECT @@GLOBAL.{name}")
    return int(cur.fetchone()[0])


def _resize_buffer_pool(cur: Any, size: int, timeout: float = 600.0) -> int:
    """``SET GLOBAL innodb_buffer_pool_size`` and wait until the (online) resize has finished;
    returns the size the server settled on (it rounds to whole chunks)."""
    cur.execute("SET GLOBAL innodb_buffer_pool_size = %s", (size,))
    deadline = time.monotonic() + timeout
    while True:
        cur.execute("SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_resize_status'")
        row = cur.fetchone()
        status = str(row[1]) if row else ""
        # MariaDB 10.11 resizes within the statement (the status stays empty); servers that
        # resize in the background report progress here until "Completed resizing ..."
        if not status or status.startswith("Completed") or "not needed" in status:
            return _global_int(cur, "innodb_buffer_pool_size")
        if time.monotonic() > deadline:
            raise RuntimeError(f"buffer pool resize to {size} did not finish: {status}")
        time.sleep(0.5)


@contextmanager
def mysql_buffer_pool(server: ServerSettings, size: int | None) -> Iterator[str]:
    """Run with ``innodb_buffer_pool_size = size`` (None: leave it); the original size is restored
    afterwards, whatever happened. Yields a description for the output."""
    from tests.harness import _mysql_admin

    if not size:
        with closing(_mysql_admin(server)) as conn:
            current = _global_int(conn.cursor(), "innodb_buffer_pool_size")
        yield f"innodb_buffer_pool_size {current / 2**20:,.0f} MiB (server's own)"
        return
    with closing(_mysql_admin(server)) as conn:
        original = _global_int(conn.cursor(), "innodb_buffer_pool_size")
    if original == size:
        yield f"innodb_buffer_pool_size {size / 2**20:,.0f} MiB (already)"
        return
    print(
        f"innodb_buffer_pool_size: {original / 2**20:,.0f} MiB -> {size / 2**20:,.0f} MiB "
        "for the run",
        file=sys.stderr,
    )
    try:
        with closing(_mysql_admin(server)) as conn:
            actual = _resize_buffer_pool(conn.cursor(), size)
        yield (
            f"innodb_buffer_pool_size {actual / 2**20:,.0f} MiB for the run "
            f"(server's {original / 2**20:,.0f} MiB restored after)"
        )
    finally:
        with closing(_mysql_admin(server)) as conn:
            restored = _resize_buffer_pool(conn.cursor(), original)
        print(f"innodb_buffer_pool_size restored to {restored / 2**20:,.0f} MiB", file=sys.stderr)


def connection_uri(db: TestDatabase) -> str:
    """A ``postgresql://`` URI for tools like pgloader."""
    from urllib.parse import quote

    s = db.server
    auth = quote(s.user) + (f":{quote(s.password)}" if s.password else "")
    return f"postgresql://{auth}@{s.host}:{s.port}/{quote(db.name)}"
