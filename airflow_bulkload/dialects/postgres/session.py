"""PostgreSQL sessions: names, transactions and the state schema (the Session role).

:class:`PostgresSession` is the base every PostgreSQL role builds on.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

from psycopg import sql
from psycopg.pq import TransactionStatus

from airflow_bulkload.catalog import POSTGRES_TRAITS, EngineTraits, TableRef
from airflow_bulkload.connections import postgres_hook
from airflow_bulkload.dialects.postgres.migrations import (
    _MIGRATION_LOCK,
    _S,
    MIGRATIONS,
    STATE_SCHEMA,
)
from airflow_bulkload.dialects.roles import Dialect
from airflow_bulkload.exceptions import BulkLoadError


def table_identifier(table: TableRef) -> sql.Identifier:
    if table.schema is None:
        return sql.Identifier(table.name)
    return sql.Identifier(table.schema, table.name)


class PostgresSession(Dialect):
    """Names, READ COMMITTED transactions and the state schema, over psycopg 3 connections.

    The other PostgreSQL roles build on this class, and :class:`PostgresDialect` composes them
    into one engine object, so a role may call any other role's method.
    """

    name: ClassVar[str] = "postgres"
    max_identifier_length: ClassVar[int] = 63
    traits: ClassVar[EngineTraits] = POSTGRES_TRAITS

    def connect(self, conn_id: str) -> Any:
        """A psycopg 3 connection via ``PostgresHook``, without this provider's own extras."""
        conn: Any = postgres_hook(conn_id).get_conn()
        conn.autocommit = False
        return conn

    def set_autocommit(self, conn: Any, on: bool) -> None:
        conn.autocommit = on

    def qualified_name(self, conn: Any, table: TableRef) -> TableRef:
        """Fill in the schema the way the server resolves the name.

        The schema of the table the search path finds, else ``current_schema()`` (where a new table
        would go).
        """
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
        """Create/upgrade schema ``bulkload``; commits its own work.

        Concurrent first users wait on an advisory lock and then find the work done.
        """
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
