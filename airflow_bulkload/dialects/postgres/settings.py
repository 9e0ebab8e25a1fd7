"""PostgreSQL server settings for bulk mode (the ServerSettings role).

``ALTER SYSTEM``, reload, leases and saved originals.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import sql

from airflow_bulkload.catalog import SavedSetting
from airflow_bulkload.connections import postgres_hook
from airflow_bulkload.dialects.postgres.migrations import _S
from airflow_bulkload.dialects.postgres.session import PostgresSession
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

#: advisory lock (two-int4 key space) serialising bulk-mode enter/exit on a server
_BULK_MODE_LOCK = (0x626C6B64, 2)  # "blkd", 2

#: setting contexts a reload (SIGHUP) applies; 'postmaster' needs a restart
_RELOADABLE_CONTEXTS = frozenset({"sighup", "superuser", "user"})


class PostgresSettings(PostgresSession):
    """Server-wide settings through ``postgresql.auto.conf``, under a server-wide advisory lock."""

    default_state_database = "postgres"

    def is_privilege_error(self, exc: BaseException) -> bool:
        from psycopg import errors as pg_errors

        return isinstance(exc, pg_errors.InsufficientPrivilege)

    def connect_server(self, conn_id: str, state_database: str) -> Any:
        """A connection to the state database, where the ``bulkload`` schema and its locks are."""
        conn: Any = postgres_hook(conn_id, database=state_database).get_conn()
        conn.autocommit = True
        return conn

    # ALTER SYSTEM writes postgresql.auto.conf; the saved original is the value that was there,
    # so a restore leaves the file as it was (ALTER SYSTEM RESET when it was not set there).
    @contextmanager
    def bulk_mode_lock(self, conn: Any) -> Iterator[None]:
        conn.execute("SELECT pg_catalog.pg_advisory_lock(%s, %s)", _BULK_MODE_LOCK)
        try:
            yield
        finally:
            conn.execute("SELECT pg_catalog.pg_advisory_unlock(%s, %s)", _BULK_MODE_LOCK)

    def bulk_mode_leases(self, conn: Any) -> list[tuple[str, str, float]]:
        rows = conn.execute(
            sql.SQL("SELECT token, holder, expires_at FROM {}.bulk_mode_leases").format(_S)
        ).fetchall()
        return [(r[0], r[1], float(r[2])) for r in rows]

    def put_bulk_mode_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.bulk_mode_leases (token, holder, expires_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (token) DO UPDATE SET expires_at = EXCLUDED.expires_at"
            ).format(_S),
            (token, holder, expires_at),
        )

    def delete_bulk_mode_leases(self, conn: Any, tokens: list[str]) -> None:
        if tokens:
            conn.execute(
                sql.SQL("DELETE FROM {}.bulk_mode_leases WHERE token = ANY(%s)").format(_S),
                (tokens,),
            )

    def saved_server_settings(self, conn: Any) -> list[SavedSetting]:
        rows = conn.execute(
            sql.SQL(
                "SELECT name, original, position FROM {}.bulk_mode_settings ORDER BY position"
            ).format(_S)
        ).fetchall()
        return [SavedSetting(r[0], r[1], r[2]) for r in rows]

    def save_server_setting(self, conn: Any, name: str, position: int) -> None:
        row = conn.execute(
            "SELECT setting FROM pg_catalog.pg_file_settings"
            " WHERE name = %s AND right(sourcefile, 20) = 'postgresql.auto.conf'"
            " ORDER BY seqno DESC LIMIT 1",
            (name,),
        ).fetchone()
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.bulk_mode_settings (name, original, position) VALUES (%s, %s, %s)"
                " ON CONFLICT (name) DO NOTHING"
            ).format(_S),
            (name, None if row is None else str(row[0]), position),
        )

    def forget_saved_server_settings(self, conn: Any) -> None:
        conn.execute(sql.SQL("DELETE FROM {}.bulk_mode_settings").format(_S))

    def check_server_setting(self, conn: Any, name: str) -> None:
        row = conn.execute(
            "SELECT context FROM pg_catalog.pg_settings WHERE name = %s", (name,)
        ).fetchone()
        if row is None:
            raise BulkModeRefusedError(f"PostgreSQL has no setting {name!r}")
        if row[0] not in _RELOADABLE_CONTEXTS:
            raise BulkModeRefusedError(
                f"PostgreSQL setting {name} has context {row[0]!r}: it only changes with a server "
                "restart, which bulk mode never does on a self-managed server"
            )

    def set_server_setting(self, conn: Any, name: str, value: str) -> None:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
        )

    def restore_server_setting(self, conn: Any, saved: SavedSetting) -> None:
        if saved.original is None:
            conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(saved.name)))
        else:
            self.set_server_setting(conn, saved.name, saved.original)

    def apply_server_settings(self, conn: Any) -> None:
        """Reload and wait until this session has re-read the configuration.

        The reload is asynchronous; ``pg_conf_load_time()`` moves once the session has.
        """
        before = conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()[0]
        conn.execute("SELECT pg_catalog.pg_reload_conf()")
        for _ in range(100):
            if conn.execute("SELECT pg_catalog.pg_conf_load_time()").fetchone()[0] > before:
                break
            time.sleep(0.05)
        else:
            raise BulkModeStateError("PostgreSQL did not reload its configuration within 5 s")
        errors = conn.execute(
            "SELECT name, error FROM pg_catalog.pg_file_settings WHERE error IS NOT NULL"
        ).fetchall()
        if errors:
            raise BulkModeStateError(f"PostgreSQL configuration has errors after reload: {errors}")

    def show_server_setting(self, conn: Any, name: str) -> str:
        return str(conn.execute("SELECT pg_catalog.current_setting(%s)", (name,)).fetchone()[0])
