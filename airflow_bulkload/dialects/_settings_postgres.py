"""PostgreSQL: server settings and bulk-mode leases (self-managed servers).

To be folded into ``dialects/postgres.py`` (section "server settings and bulk-mode leases").
Settings change through ``ALTER SYSTEM`` (postgresql.auto.conf) and ``pg_reload_conf()``; the
original is the value that was in postgresql.auto.conf, so a restore leaves the file exactly as
it was (``ALTER SYSTEM RESET`` when the setting was not there).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from psycopg import sql

from airflow_bulkload.dialects.base import SavedSetting, ServerSettings
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

STATE_SCHEMA = "bulkload"
_LOCK_SQL = "SELECT pg_advisory_lock(hashtext('bulkload.bulk_mode'))"
_UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtext('bulkload.bulk_mode'))"
#: contexts a reload (SIGHUP) applies; 'postmaster' needs a restart, 'internal' never changes
_RELOADABLE_CONTEXTS = frozenset({"sighup", "superuser", "user"})


class PostgresServerSettings(ServerSettings):
    def ensure_state(self, conn: Any) -> None:
        schema = sql.Identifier(STATE_SCHEMA)
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(schema))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.bulk_mode_leases ("
                " token text PRIMARY KEY, holder text NOT NULL,"
                " expires_at double precision NOT NULL)"
            ).format(schema)
        )
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.bulk_mode_settings ("
                " name text PRIMARY KEY, original text, position integer NOT NULL,"
                " saved_at timestamptz NOT NULL DEFAULT now())"
            ).format(schema)
        )

    @contextmanager
    def lock(self, conn: Any) -> Iterator[None]:
        conn.execute(_LOCK_SQL)
        try:
            yield
        finally:
            conn.execute(_UNLOCK_SQL)

    def leases(self, conn: Any) -> list[tuple[str, str, float]]:
        rows = conn.execute(
            sql.SQL("SELECT token, holder, expires_at FROM {}.bulk_mode_leases").format(
                sql.Identifier(STATE_SCHEMA)
            )
        ).fetchall()
        return [(r[0], r[1], float(r[2])) for r in rows]

    def put_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.bulk_mode_leases (token, holder, expires_at) VALUES (%s, %s, %s)"
                " ON CONFLICT (token) DO UPDATE SET expires_at = EXCLUDED.expires_at"
            ).format(sql.Identifier(STATE_SCHEMA)),
            (token, holder, expires_at),
        )

    def delete_leases(self, conn: Any, tokens: list[str]) -> None:
        if tokens:
            conn.execute(
                sql.SQL("DELETE FROM {}.bulk_mode_leases WHERE token = ANY(%s)").format(
                    sql.Identifier(STATE_SCHEMA)
                ),
                (tokens,),
            )

    def saved_settings(self, conn: Any) -> list[SavedSetting]:
        rows = conn.execute(
            sql.SQL(
                "SELECT name, original, position FROM {}.bulk_mode_settings ORDER BY position"
            ).format(sql.Identifier(STATE_SCHEMA))
        ).fetchall()
        return [SavedSetting(r[0], r[1], r[2]) for r in rows]

    def _auto_conf_value(self, conn: Any, name: str) -> str | None:
        row = conn.execute(
            "SELECT setting FROM pg_file_settings"
            " WHERE name = %s AND right(sourcefile, 20) = 'postgresql.auto.conf'"
            " ORDER BY seqno DESC LIMIT 1",
            (name,),
        ).fetchone()
        return None if row is None else str(row[0])

    def save_setting(self, conn: Any, name: str, position: int) -> None:
        conn.execute(
            sql.SQL(
                "INSERT INTO {}.bulk_mode_settings (name, original, position) VALUES (%s, %s, %s)"
                " ON CONFLICT (name) DO NOTHING"
            ).format(sql.Identifier(STATE_SCHEMA)),
            (name, self._auto_conf_value(conn, name), position),
        )

    def forget_saved_settings(self, conn: Any) -> None:
        conn.execute(
            sql.SQL("DELETE FROM {}.bulk_mode_settings").format(sql.Identifier(STATE_SCHEMA))
        )

    def check_setting(self, conn: Any, name: str) -> None:
        row = conn.execute("SELECT context FROM pg_settings WHERE name = %s", (name,)).fetchone()
        if row is None:
            raise BulkModeRefusedError(f"PostgreSQL has no setting {name!r}")
        if row[0] not in _RELOADABLE_CONTEXTS:
            raise BulkModeRefusedError(
                f"PostgreSQL setting {name} has context {row[0]!r}: it only changes with a server "
                "restart, which bulk mode never does on a self-managed server"
            )

    def set_setting(self, conn: Any, name: str, value: str) -> None:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value))
        )

    def restore_setting(self, conn: Any, saved: SavedSetting) -> None:
        if saved.original is None:
            conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(saved.name)))
        else:
            self.set_setting(conn, saved.name, saved.original)

    def apply(self, conn: Any) -> None:
        """Reload the configuration and wait until this session has re-read it (the reload is
        asynchronous; ``pg_conf_load_time()`` moves when the session has)."""
        before = conn.execute("SELECT pg_conf_load_time()").fetchone()[0]
        conn.execute("SELECT pg_reload_conf()")
        for _ in range(100):
            if conn.execute("SELECT pg_conf_load_time()").fetchone()[0] > before:
                break
            time.sleep(0.05)
        else:
            raise BulkModeStateError("PostgreSQL did not reload its configuration within 5 s")
        errors = conn.execute(
            "SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL"
        ).fetchall()
        if errors:
            raise BulkModeStateError(f"PostgreSQL configuration has errors after reload: {errors}")

    def show(self, conn: Any, name: str) -> str:
        return str(conn.execute("SELECT current_setting(%s)", (name,)).fetchone()[0])
