"""BulkModeHook: server-wide bulk-load settings, entered and always restored, with leases.

Two backends behind one interface:

- **RDS/Aurora** (a :class:`~airflow_bulkload.bulk_mode.target.BulkModeTarget` with
  ``db_instance_identifier`` and/or ``db_cluster_identifier``): parameter-group
  changes (Aurora cluster-level parameters in the DB cluster parameter group), see
  :mod:`airflow_bulkload.bulk_mode`; state in tags on the parameter group.
- **Self-managed** (a ``postgres``/``mysql`` connection): PostgreSQL ``ALTER SYSTEM`` +
  ``pg_reload_conf()``, MySQL ``SET GLOBAL``; state in tables next to the data (PostgreSQL schema
  ``bulkload``, MySQL ``bulkload_bulk_mode_*`` tables in the connection's database). Server
  settings are server-wide, so every pipeline that loads into one server should point bulk mode
  at the same database.

Leases: each holder (dag id, table, logical date) takes one on enter and drops it on exit; the
original values come back when the last live lease goes. A lease expires after its TTL (renew it
with :meth:`BulkModeHook.renew` during long loads), so a crashed run's settings are restored by the
next enter/exit of anyone; a re-run of the same DAG run re-claims its own lease.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import closing, contextmanager
from datetime import timedelta
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook

from airflow_bulkload.bulk_mode.policy import (
    KNOWN_STATIC_SETTINGS,
    BulkModeOptions,
    LeaseKey,
    check_reboot_policy,
    resolve_bulk_settings,
    ttl_seconds,
)
from airflow_bulkload.bulk_mode.rds import RdsBulkModeBackend
from airflow_bulkload.bulk_mode.status import WaitSpec
from airflow_bulkload.bulk_mode.target import BulkModeTarget
from airflow_bulkload.dialects import Dialect, dialect_for
from airflow_bulkload.exceptions import BulkModeRefusedError, InsufficientPrivilegeError

log = logging.getLogger(__name__)

DEFAULT_LEASE_TTL = timedelta(hours=6)


class SelfManagedBulkModeBackend:
    """Bulk mode on a PostgreSQL or MySQL server we reach through an Airflow connection."""

    def __init__(
        self,
        conn_id: str,
        *,
        settings: Mapping[str, Any] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.conn_id = conn_id
        self.setting_overrides = settings
        self.clock = clock

    @cached_property
    def _engine_dialect(self) -> Dialect:
        """The connection's dialect before its state database is known: its name and defaults."""
        conn_type = str(BaseHook.get_connection(self.conn_id).conn_type).lower()
        try:
            return dialect_for(conn_type)
        except ValueError:
            raise ValueError(
                f"bulk mode needs a postgres or mysql connection, got {conn_type!r}"
            ) from None

    @property
    def engine(self) -> str:
        return self._engine_dialect.name

    @cached_property
    def state_database(self) -> str:
        """The database holding this server's bulk-mode state.

        The connection's extra ``bulkload_bulk_mode_database``, else the engine's default
        (``postgres`` on PostgreSQL, ``bulkload`` on MySQL).
        """
        extra = BaseHook.get_connection(self.conn_id).extra_dejson
        return str(
            extra.get("bulkload_bulk_mode_database") or self._engine_dialect.default_state_database
        )

    @cached_property
    def sql(self) -> Dialect:
        return dialect_for(self.engine, state_schema=self.state_database)

    def connect(self) -> Any:
        """An autocommit connection for bulk mode's state and the server's settings."""
        return self.sql.connect_server(self.conn_id, self.state_database)

    @contextmanager
    def _privileges_explained(self, action: str) -> Iterator[None]:
        """Turn the server's bare "permission denied" into what bulk mode needs and the ways out."""
        try:
            yield
        except Exception as exc:
            if not self.sql.is_privilege_error(exc):
                raise
            raise InsufficientPrivilegeError(
                f"{self.conn_id}: cannot {action} bulk mode: on a self-managed server it changes "
                "server-wide settings (ALTER SYSTEM on PostgreSQL, SET GLOBAL on MySQL) and keeps "
                f"its leases and the original values in database {self.state_database!r}, which "
                "needs a superuser (PostgreSQL) or SUPER / SYSTEM_VARIABLES_ADMIN with rights on "
                "that database (MySQL). Use such a connection for bulk mode, give rds_instance / "
                "rds_cluster on RDS (parameter groups), or pass bulk_mode='off'. "
                f"Server said: {str(exc).strip()}"
            ) from exc

    def _live_leases(self, conn: Any, keep: str | None = None) -> list[tuple[str, str, float]]:
        now = self.clock()
        leases = self.sql.bulk_mode_leases(conn)
        expired = [lease for lease in leases if lease[2] <= now and lease[0] != keep]
        for _token, holder, _ in expired:
            log.warning("bulk mode on %s: lease of %s expired; dropping it", self.conn_id, holder)
        self.sql.delete_bulk_mode_leases(conn, [lease[0] for lease in expired])
        return [lease for lease in leases if lease not in expired]

    def enter(self, key: LeaseKey, ttl: float) -> None:
        settings = resolve_bulk_settings(self.engine, self.setting_overrides, rds=False)
        with self._privileges_explained("enter"), closing(self.connect()) as conn:
            self.sql.ensure_state_schema(conn)
            with self.sql.bulk_mode_lock(conn):
                for name in settings:
                    if name in KNOWN_STATIC_SETTINGS:
                        # some servers resize these online, but they are restart-class settings
                        # (RDS treats them as static); bulk mode never touches them on a server
                        raise BulkModeRefusedError(
                            f"{name} is a restart-class setting; bulk mode changes only dynamic "
                            "settings on a self-managed server"
                        )
                    self.sql.check_server_setting(conn, name)
                live = self._live_leases(conn, keep=key.token)
                self.sql.put_bulk_mode_lease(conn, key.token, key.describe(), self.clock() + ttl)
                saved = {s.name: s for s in self.sql.saved_server_settings(conn)}
                others = [lease for lease in live if lease[0] != key.token]
                changes = {n: v for n, v in settings.items() if n not in saved}
                if others:
                    log.info("%s: %d other holder(s) in bulk mode", self.conn_id, len(others))
                position = max((s.position for s in saved.values()), default=0)
                for name, value in changes.items():
                    position += 1
                    # saved first: dying after this line still leaves exit what to put back
                    self.sql.save_server_setting(conn, name, position)
                    self.sql.set_server_setting(conn, name, value)
                if changes:
                    self.sql.apply_server_settings(conn)
                log.info(
                    "%s: in bulk mode (%s); now %s",
                    self.conn_id,
                    key.describe(),
                    {n: self.sql.show_server_setting(conn, n) for n in settings},
                )

    def renew(self, key: LeaseKey, ttl: float) -> bool:
        with self._privileges_explained("renew the lease of"), closing(self.connect()) as conn:
            self.sql.ensure_state_schema(conn)
            with self.sql.bulk_mode_lock(conn):
                if not any(lease[0] == key.token for lease in self.sql.bulk_mode_leases(conn)):
                    return False
                self.sql.put_bulk_mode_lease(conn, key.token, key.describe(), self.clock() + ttl)
                return True

    def exit(self, key: LeaseKey) -> None:
        with self._privileges_explained("exit"), closing(self.connect()) as conn:
            self.sql.ensure_state_schema(conn)
            with self.sql.bulk_mode_lock(conn):
                self.sql.delete_bulk_mode_leases(conn, [key.token])
                live = self._live_leases(conn)
                if live:
                    log.info(
                        "%s: %d other holder(s) still in bulk mode (%s); leaving settings on",
                        self.conn_id,
                        len(live),
                        ", ".join(lease[1] for lease in live),
                    )
                    return
                saved = self.sql.saved_server_settings(conn)
                if not saved:
                    log.info("%s: not in bulk mode; nothing to restore", self.conn_id)
                    return
                for setting in reversed(saved):
                    self.sql.restore_server_setting(conn, setting)
                self.sql.apply_server_settings(conn)
                # forget only after the restore took: dying before this means a later exit redoes it
                self.sql.forget_saved_server_settings(conn)
                log.info(
                    "%s: bulk mode exited; restored %s",
                    self.conn_id,
                    {s.name: self.sql.show_server_setting(conn, s.name) for s in saved},
                )


class BulkModeHook(BaseHook):
    """Enter/exit bulk mode on an RDS/Aurora instance or a self-managed server.

    :param target: which server: the RDS/Aurora instance and/or cluster (the RDS backend), else
        the ``postgres``/``mysql`` connection of a self-managed server.
    :param settings: overrides of the default bulk settings (``None`` as a value drops a default).
        RDS values use the parameter's unit (e.g. ``max_wal_size`` in MB); self-managed PostgreSQL
        accepts units (``4GB``).
    :param strategy: RDS only: ``auto``, ``modify-in-place`` or ``swap``.
    :param reboot_policy: RDS only: ``never`` (default) or ``allowed``.
    :param expected_load_duration: RDS only: warn when the maintenance window falls within it.
    """

    conn_name_attr = "conn_id"
    default_conn_name = "postgres_default"
    #: a self-managed server is reached through a postgres or mysql provider connection
    supported_conn_types: tuple[str, ...] = ("postgres", "mysql")

    def __init__(
        self,
        target: BulkModeTarget,
        *,
        settings: dict[str, Any] | None = None,
        strategy: str = "auto",
        reboot_policy: str = "never",
        expected_load_duration: timedelta | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.target = target.validate()
        self.options = BulkModeOptions(
            settings, strategy, check_reboot_policy(reboot_policy), expected_load_duration
        )
        self.clock = clock

    @property
    def conn_id(self) -> str | None:
        return self.target.conn_id

    @property
    def is_rds(self) -> bool:
        return self.target.is_rds

    @cached_property
    def rds(self) -> RdsBulkModeBackend:
        if not self.is_rds:
            raise ValueError(
                "not an RDS bulk mode (no db_instance_identifier/db_cluster_identifier)"
            )
        return RdsBulkModeBackend(self.target, self.options, clock=self.clock)

    @cached_property
    def server(self) -> SelfManagedBulkModeBackend:
        if not self.conn_id:
            raise ValueError("not a self-managed bulk mode (no conn_id)")
        return SelfManagedBulkModeBackend(
            self.conn_id, settings=self.options.settings, clock=self.clock
        )

    def enter(self, key: LeaseKey, ttl: timedelta | float = DEFAULT_LEASE_TTL) -> WaitSpec | None:
        """Take ``key``'s lease and put the bulk values in place.

        Returns what to wait for (RDS), or ``None`` when the values are already in effect.
        """
        seconds = ttl_seconds(ttl)
        if self.is_rds:
            return self.rds.enter(key, seconds)
        self.server.enter(key, seconds)
        return None

    def exit(self, key: LeaseKey) -> WaitSpec | None:
        """Release ``key``'s lease; restore the originals if it was the last live one."""
        if self.is_rds:
            return self.rds.exit(key)
        self.server.exit(key)
        return None

    def renew(self, key: LeaseKey, ttl: timedelta | float = DEFAULT_LEASE_TTL) -> bool:
        """Extend ``key``'s lease (call it during long loads); ``False`` if it holds none."""
        seconds = ttl_seconds(ttl)
        return self.rds.renew(key, seconds) if self.is_rds else self.server.renew(key, seconds)

    def wait(self, spec: WaitSpec, *, delay: float = 30, max_attempts: int = 60) -> None:
        """Block until the RDS change is in effect (the non-deferrable path)."""
        self.rds.wait(spec, delay=delay, max_attempts=max_attempts)
