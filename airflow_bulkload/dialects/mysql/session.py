"""MySQL sessions: names, transactions and the state tables (the Session role).

:class:`MySqlSession` is the base every MySQL role builds on; it keeps what a transaction changed
on a session (settings, named locks) to undo when the transaction ends.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_bulkload.catalog import MYSQL_TRAITS, EngineTraits, TableRef
from airflow_bulkload.dialects.mysql.quoting import (
    MAX_IDENTIFIER_LENGTH,
    quote_identifier,
    quote_table,
)
from airflow_bulkload.dialects.mysql.state import _ER_DUP_FIELDNAME, STATE_COLUMNS, STATE_TABLES
from airflow_bulkload.dialects.roles import Dialect
from airflow_bulkload.exceptions import BulkLoadError, InvalidIdentifierError

log = logging.getLogger(__name__)

#: seconds a loader waits for another loader of the same chunk before giving up
DEFAULT_CHUNK_LOCK_TIMEOUT = 6 * 3600


@dataclass
class _SessionState:
    """What a transaction changed on the session, undone when it ends."""

    saved_settings: tuple[Any, ...] | None = None
    locks: list[str] = field(default_factory=list)


class MySqlSession(Dialect):
    """Names, transactions and the state tables, over MySQLdb connections.

    The other MySQL roles build on this class, and :class:`MySqlDialect` composes them into one
    engine object, so a role may call any other role's method.
    """

    name: ClassVar[str] = "mysql"
    max_identifier_length: ClassVar[int] = MAX_IDENTIFIER_LENGTH
    traits: ClassVar[EngineTraits] = MYSQL_TRAITS

    def __init__(
        self,
        state_database: str | None = None,
        *,
        chunk_lock_timeout: int = DEFAULT_CHUNK_LOCK_TIMEOUT,
    ) -> None:
        if state_database is not None:
            quote_identifier(state_database, "state database")
        self.state_database = state_database
        self.chunk_lock_timeout = chunk_lock_timeout
        self._sessions: weakref.WeakKeyDictionary[Any, _SessionState] = weakref.WeakKeyDictionary()

    def connect(self, conn_id: str) -> Any:
        """A MySQLdb connection via ``MySqlHook``, with the ``local_infile`` client flag."""
        from airflow.providers.mysql.hooks.mysql import MySqlHook

        # LOAD DATA LOCAL needs the client flag; the hook ignores it as a connection extra.
        mysql_conn: Any = MySqlHook(mysql_conn_id=conn_id, local_infile=True).get_conn()
        mysql_conn.autocommit(False)
        return mysql_conn

    def set_autocommit(self, conn: Any, on: bool) -> None:
        conn.autocommit(on)

    def table_ref(self, table: str | TableRef) -> TableRef:
        ref = super().table_ref(table)
        quote_table(ref)  # MySQL's own rules on top of the generic ones
        return ref

    def qualified_name(self, conn: Any, table: TableRef) -> TableRef:
        """Fill in the connection's current database (``DATABASE()``) when none is given."""
        if table.schema is not None:
            return table
        database = _scalar(conn, "SELECT DATABASE()")
        if not database:
            raise InvalidIdentifierError(
                f"table {table.name!r} has no database and the connection has none selected: "
                "use 'database.table' or set the connection's schema"
            )
        return TableRef(name=table.name, schema=str(database))

    @contextmanager
    def transaction(self, conn: Any) -> Iterator[None]:
        """Commit on success, roll back on any exception; then undo the session's changes.

        That is, restore the session settings :meth:`tune_load_session` changed and release the
        chunk locks :meth:`claim_chunk` took (after the commit, so a waiting loader sees the
        committed ledger row).
        """
        try:
            yield
        except BaseException:
            try:
                conn.rollback()
            except Exception:  # the connection may be gone; the server rolls back then
                log.warning("rollback failed; the server rolls back when the session ends")
            raise
        else:
            conn.commit()
        finally:
            self._end_transaction(conn)

    def _session(self, conn: Any) -> _SessionState:
        state = self._sessions.get(conn)
        if state is None:
            state = self._sessions[conn] = _SessionState()
        return state

    def _end_transaction(self, conn: Any) -> None:
        state = self._sessions.pop(conn, None)
        if state is None:
            return
        try:
            with _cursor(conn) as cur:
                if state.saved_settings is not None:
                    cur.execute(
                        "SET SESSION unique_checks = %s, foreign_key_checks = %s, sql_mode = %s",
                        state.saved_settings,
                    )
                for lock in state.locks:
                    cur.execute("SELECT RELEASE_LOCK(%s)", (lock,))
                    cur.fetchall()
        except Exception:  # a dead session loses its settings and locks by itself
            log.warning("could not restore the MySQL session after the load", exc_info=True)

    def state_database_name(self, conn: Any) -> str:
        """The configured state database, else the connection's current database."""
        if self.state_database:
            return self.state_database
        database = _scalar(conn, "SELECT DATABASE()")
        if not database:
            raise BulkLoadError(
                "the MySQL connection has no database selected: set its schema or configure "
                "a state database for the bulkload_* tables"
            )
        return str(database)

    def _state_table(self, conn: Any, name: str) -> str:
        return f"{quote_identifier(self.state_database_name(conn), 'state database')}.`{name}`"

    def ensure_state_schema(self, conn: Any) -> None:
        """Create the missing ``bulkload_*`` tables; commits (DDL does).

        Existing ones are only looked up (an information_schema read takes no metadata lock), so a
        busy ledger never blocks this. ``CREATE ... IF NOT EXISTS`` makes concurrent first use safe.
        """
        database = self.state_database_name(conn)
        quoted = quote_identifier(database, "state database")
        with _cursor(conn) as cur:
            names = list(STATE_TABLES)
            cur.execute(
                "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "  # noqa: S608 (placeholders only)
                f"AND TABLE_NAME IN ({', '.join(['%s'] * len(names))})",
                (database, *names),
            )
            existing = {str(r[0]) for r in cur.fetchall()}
            missing = [name for name in STATE_TABLES if name not in existing]
            if missing and self.state_database:
                cur.execute(f"CREATE DATABASE IF NOT EXISTS {quoted} CHARACTER SET utf8mb4")
            for name in missing:
                cur.execute(STATE_TABLES[name].format(db=quoted))
            self._add_missing_state_columns(cur, database, quoted)
        conn.commit()

    @staticmethod
    def _add_missing_state_columns(cur: Any, database: str, quoted: str) -> None:
        tables = sorted({table for table, _, _ in STATE_COLUMNS})
        cur.execute(
            "SELECT TABLE_NAME, COLUMN_NAME FROM information_schema.COLUMNS "  # noqa: S608 (placeholders only)
            f"WHERE TABLE_SCHEMA = %s AND TABLE_NAME IN ({', '.join(['%s'] * len(tables))})",
            (database, *tables),
        )
        present = {(str(t), str(c)) for t, c in cur.fetchall()}
        for table, column, definition in STATE_COLUMNS:
            if (table, column) in present:
                continue
            try:
                cur.execute(f"ALTER TABLE {quoted}.`{table}` ADD COLUMN `{column}` {definition}")
            except Exception as exc:  # a concurrent first user added it
                if not (exc.args and exc.args[0] == _ER_DUP_FIELDNAME):
                    raise


@contextmanager
def _cursor(conn: Any) -> Iterator[Any]:
    cur = conn.cursor()
    try:
        yield cur
    finally:
        cur.close()


def _execute(conn: Any, sql: str, params: Sequence[Any] | None = None) -> int:
    """Run one statement on a cursor of its own; the number of rows it affected."""
    with _cursor(conn) as cur:
        return int(cur.execute(sql, params))


def _fetch_one(conn: Any, sql: str, params: Sequence[Any] | None = None) -> Any:
    """The first row of one query (``None`` when it returns none)."""
    with _cursor(conn) as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def _fetch_all(conn: Any, sql: str, params: Sequence[Any] | None = None) -> list[Any]:
    """Every row of one query."""
    with _cursor(conn) as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def _scalar(conn: Any, sql: str, params: Sequence[Any] | None = None) -> Any:
    row = _fetch_one(conn, sql, params)
    return None if row is None else row[0]


def _count(conn: Any, sql: str, params: Sequence[Any] | None = None) -> int:
    """A ``COUNT(*)`` query's count (0 when it returns no row or NULL)."""
    return int(_scalar(conn, sql, params) or 0)


def _dict_rows(cur: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cur.execute(sql, params)
    names = [d[0].upper() for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
