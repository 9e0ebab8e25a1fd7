"""MySQL server settings for bulk mode (the ServerSettings role).

``SET GLOBAL`` under a named lock, leases and saved originals.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from airflow_bulkload.catalog import SavedSetting
from airflow_bulkload.dialects.mysql.quoting import quote_identifier
from airflow_bulkload.dialects.mysql.session import (
    MySqlSession,
    _cursor,
    _execute,
    _fetch_all,
    _scalar,
)
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

#: GET_LOCK name serialising bulk-mode enter/exit on a server
BULK_MODE_LOCK = "bulkload_bulk_mode"

_SYSTEM_VARIABLE = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")

_INTEGER_VALUE = re.compile(r"^-?\d+$")

_ER_UNKNOWN_SYSTEM_VARIABLE = 1193

_ER_READ_ONLY_VARIABLE = 1238
# denied: a database, SUPER / SYSTEM_VARIABLES_ADMIN, a table, a column
_ER_PRIVILEGE_DENIED = {1044, 1227, 1142, 1143}


def system_variable(name: str) -> str:
    """A global system variable name, checked (lower-case word) and quoted."""
    if not isinstance(name, str) or not _SYSTEM_VARIABLE.match(name):
        raise BulkModeRefusedError(f"{name!r} is not a MySQL system variable name")
    return quote_identifier(name, "system variable")


def system_variable_value(value: str) -> int | str:
    """Numeric variables refuse a quoted string ("Incorrect argument type"): pass ints as ints."""
    return int(value) if _INTEGER_VALUE.match(value) else value


class MySqlSettings(MySqlSession):
    """Server-wide ``SET GLOBAL`` values; the originals are kept in the state tables."""

    default_state_database = "bulkload"

    def is_privilege_error(self, exc: BaseException) -> bool:
        import MySQLdb

        return (
            isinstance(exc, MySQLdb.Error)
            and bool(exc.args)
            and exc.args[0] in _ER_PRIVILEGE_DENIED
        )

    def connect_server(self, conn_id: str, state_database: str) -> Any:
        """A connection as the Airflow connection has it; each statement names the state database."""
        from airflow.providers.mysql.hooks.mysql import MySqlHook

        conn: Any = MySqlHook(mysql_conn_id=conn_id).get_conn()
        conn.autocommit(True)
        return conn

    # SET GLOBAL is not persisted: a server restart also brings the configured values back.
    @contextmanager
    def bulk_mode_lock(self, conn: Any) -> Iterator[None]:
        if _scalar(conn, "SELECT GET_LOCK(%s, 60)", (BULK_MODE_LOCK,)) != 1:
            raise BulkModeStateError("another bulk-mode enter/exit held the server lock for 60 s")
        try:
            yield
        finally:
            _scalar(conn, "SELECT RELEASE_LOCK(%s)", (BULK_MODE_LOCK,))

    def bulk_mode_leases(self, conn: Any) -> list[tuple[str, str, float]]:
        rows = _fetch_all(
            conn,
            "SELECT `token`, `holder`, `expires_at` "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_bulk_mode_leases')}",
        )
        return [(str(r[0]), str(r[1]), float(r[2])) for r in rows]

    def put_bulk_mode_lease(self, conn: Any, token: str, holder: str, expires_at: float) -> None:
        _execute(
            conn,
            f"INSERT INTO {self._state_table(conn, 'bulkload_bulk_mode_leases')} "  # noqa: S608 (quoted)
            "(`token`, `holder`, `expires_at`) VALUES (%s, %s, %s) "
            "ON DUPLICATE KEY UPDATE `expires_at` = VALUES(`expires_at`)",
            (token, holder[:512], expires_at),
        )

    def delete_bulk_mode_leases(self, conn: Any, tokens: list[str]) -> None:
        with _cursor(conn) as cur:
            for token in tokens:
                cur.execute(
                    f"DELETE FROM {self._state_table(conn, 'bulkload_bulk_mode_leases')} "  # noqa: S608 (quoted)
                    "WHERE `token` = %s",
                    (token,),
                )

    def saved_server_settings(self, conn: Any) -> list[SavedSetting]:
        rows = _fetch_all(
            conn,
            "SELECT `name`, `original`, `position` "  # noqa: S608 (quoted)
            f"FROM {self._state_table(conn, 'bulkload_bulk_mode_settings')} "
            "ORDER BY `position`",
        )
        return [
            SavedSetting(str(r[0]), None if r[1] is None else str(r[1]), int(r[2])) for r in rows
        ]

    def save_server_setting(self, conn: Any, name: str, position: int) -> None:
        original = self.show_server_setting(conn, name)
        _execute(
            conn,
            f"INSERT IGNORE INTO {self._state_table(conn, 'bulkload_bulk_mode_settings')} "  # noqa: S608 (quoted)
            "(`name`, `original`, `position`) VALUES (%s, %s, %s)",
            (name, original, position),
        )

    def forget_saved_server_settings(self, conn: Any) -> None:
        _execute(conn, f"DELETE FROM {self._state_table(conn, 'bulkload_bulk_mode_settings')}")  # noqa: S608 (quoted)

    def check_server_setting(self, conn: Any, name: str) -> None:
        import MySQLdb

        variable = system_variable(name)
        try:
            _scalar(conn, f"SELECT @@GLOBAL.{variable}")
        except MySQLdb.OperationalError as exc:
            if exc.args and exc.args[0] == _ER_UNKNOWN_SYSTEM_VARIABLE:
                raise BulkModeRefusedError(f"MySQL has no system variable {name!r}") from exc
            raise
        try:  # a read-only variable is refused on SET; probe by setting it to its own value
            _scalar(conn, f"SET GLOBAL {variable} = @@GLOBAL.{variable}")
        except MySQLdb.OperationalError as exc:
            if exc.args and exc.args[0] == _ER_READ_ONLY_VARIABLE:
                raise BulkModeRefusedError(
                    f"MySQL variable {name} is read-only: it changes only with a restart, which "
                    "bulk mode never does on a self-managed server"
                ) from exc
            raise

    def set_server_setting(self, conn: Any, name: str, value: str) -> None:
        _scalar(conn, f"SET GLOBAL {system_variable(name)} = %s", (system_variable_value(value),))

    def restore_server_setting(self, conn: Any, saved: SavedSetting) -> None:
        if saved.original is not None:
            self.set_server_setting(conn, saved.name, saved.original)

    def apply_server_settings(self, conn: Any) -> None:
        """SET GLOBAL takes effect at once for new sessions; nothing to wait for."""

    def show_server_setting(self, conn: Any, name: str) -> str:
        return str(_scalar(conn, f"SELECT @@GLOBAL.{system_variable(name)}"))
