"""MySQL/MariaDB: server settings and bulk-mode leases (self-managed servers).

To be folded into ``dialects/mysql.py`` (section "server settings and bulk-mode leases"), where
``quote_identifier`` should become that module's one checked quoting helper.
``SET GLOBAL`` changes are not persisted, so a server restart also brings the configured values
back; the saved original is the global value before bulk mode.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import closing, contextmanager
from typing import Any

from airflow_bulkload.dialects.base import SavedSetting, ServerSettings
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

# state tables (fixed names, written quoted in the SQL below): bulkload_bulk_mode_leases,
# bulkload_bulk_mode_settings
_LOCK_NAME = "bulkload.bulk_mode"
_VARIABLE_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
_INTEGER = re.compile(r"^-?\d+$")
_UNKNOWN_VARIABLE = 1193
_READ_ONLY_VARIABLE = 1238


def quote_identifier(name: str) -> str:
    if not name or "\0" in name or len(name) > 64:
        raise BulkModeRefusedError(f"invalid MySQL identifier {name!r}")
    return "`" + name.replace("`", "``") + "`"


def _variable(name: str) -> str:
    if not _VARIABLE_NAME.match(name):
        raise BulkModeRefusedError(f"{name!r} is not a MySQL system variable name")
    return quote_identifier(name)


def _value(value: str) -> int | str:
    # numeric variables refuse a quoted string ("Incorrect argument type")
    return int(value) if _INTEGER.match(value) else value


def _run(conn: Any, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    with closing(conn.cursor()) as cur:
        cur.execute(statement, params)
        return list(cur.fetchall()) if cur.description else []


class MySqlServerSettings(ServerSettings):
    def ensure_state(self, conn: Any) -> None:
        _run(
            conn,
            "CREATE TABLE IF NOT EXISTS `bulkload_bulk_mode_leases` ("
            " token VARCHAR(64) PRIMARY KEY, holder VARCHAR(512) NOT NULL,"
            " expires_at DOUBLE NOT NULL) ENGINE=InnoDB",
        )
        _run(
            conn,
            "CREATE TABLE IF NOT EXISTS `bulkload_bulk_mode_settings` ("
            " name VARCHAR(64) PRIMARY KEY, original TEXT NULL, position INT NOT NULL,"
            " saved_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP) ENGINE=InnoDB",
        )

    @contextmanager
    def lock(self, conn: Any) -> Iterator[None]:
        got = _run(conn, "SELECT GET_LOCK(%s, 60)", (_LOCK_NAME,))
        if not got or got[0][0] != 1:
            raise BulkModeStateError("another bulk-mode enter/exit held the server lock for 60 s")
        try:
            yield
        finally:
            _run(conn, "SELECT RELEASE_LOCK(%s)", (_LOCK_NAME,))

    def leases(self, conn: Any) -> list[tuple[str, str, float]]:
        rows = _run(conn, "SELECT token, holder, expires_at FROM `bulkload_bulk_mode_leases`")
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    def put_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        _run(
            conn,
            "INSERT INTO `bulkload_bulk_mode_leases` (token, holder, expires_at)"
            " VALUES (%s, %s, %s) ON DUPLICATE KEY UPDATE expires_at = VALUES(expires_at)",
            (token, holder[:512], expires_at),
        )

    def delete_leases(self, conn: Any, tokens: list[str]) -> None:
        for token in tokens:
            _run(conn, "DELETE FROM `bulkload_bulk_mode_leases` WHERE token = %s", (token,))

    def saved_settings(self, conn: Any) -> list[SavedSetting]:
        rows = _run(
            conn,
            "SELECT name, original, position FROM `bulkload_bulk_mode_settings` ORDER BY position",
        )
        return [
            SavedSetting(str(r[0]), None if r[1] is None else str(r[1]), int(r[2])) for r in rows
        ]

    def save_setting(self, conn: Any, name: str, position: int) -> None:
        _run(
            conn,
            "INSERT IGNORE INTO `bulkload_bulk_mode_settings` (name, original, position)"
            " VALUES (%s, %s, %s)",
            (name, self.show(conn, name), position),
        )

    def forget_saved_settings(self, conn: Any) -> None:
        _run(conn, "DELETE FROM `bulkload_bulk_mode_settings`")

    def check_setting(self, conn: Any, name: str) -> None:
        import MySQLdb

        try:
            self.show(conn, name)
        except MySQLdb.OperationalError as exc:
            if exc.args and exc.args[0] == _UNKNOWN_VARIABLE:
                raise BulkModeRefusedError(f"MySQL has no system variable {name!r}") from exc
            raise
        # a read-only variable is refused by the server on SET; probe with its own value
        try:
            _run(conn, f"SET GLOBAL {_variable(name)} = @@GLOBAL.{_variable(name)}")
        except MySQLdb.OperationalError as exc:
            if exc.args and exc.args[0] == _READ_ONLY_VARIABLE:
                raise BulkModeRefusedError(
                    f"MySQL variable {name} is read-only: it changes only with a restart, which "
                    "bulk mode never does on a self-managed server"
                ) from exc
            raise

    def set_setting(self, conn: Any, name: str, value: str) -> None:
        _run(conn, f"SET GLOBAL {_variable(name)} = %s", (_value(value),))

    def restore_setting(self, conn: Any, saved: SavedSetting) -> None:
        if saved.original is not None:
            self.set_setting(conn, saved.name, saved.original)

    def apply(self, conn: Any) -> None:
        """SET GLOBAL takes effect at once (new sessions see it); nothing to do."""

    def show(self, conn: Any, name: str) -> str:
        rows = _run(conn, f"SELECT @@GLOBAL.{_variable(name)}")
        return str(rows[0][0])
