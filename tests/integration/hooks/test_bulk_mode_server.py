"""Self-managed bulk mode on the real PostgreSQL and MariaDB servers.

These tests change server-wide settings on servers other suites share: the ``restore_globals``
fixture puts every touched setting back exactly as it was, whatever the test did.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing

import pytest
from psycopg import sql

from airflow_bulkload.bulk_mode import BulkModeTarget
from airflow_bulkload.bulk_mode.policy import (
    MYSQL_BULK_SETTINGS,
    SERVER_POSTGRES_BULK_SETTINGS,
    LeaseKey,
)
from airflow_bulkload.exceptions import BulkModeRefusedError
from airflow_bulkload.hooks.bulk_mode import BulkModeHook
from tests.harness import REPO_ROOT, TestDatabase, fresh_database

PG_BULK_SHOWN = {
    "maintenance_work_mem": "1GB",
    "max_wal_size": "4GB",
    "checkpoint_timeout": "30min",
}


def _show(db: TestDatabase, name: str) -> str:
    if db.engine == "postgres":
        return str(db.query(f"SHOW {name}")[0][0])
    return str(db.query(f"SELECT @@GLOBAL.{name}")[0][0])


def _names(db: TestDatabase) -> list[str]:
    return list(SERVER_POSTGRES_BULK_SETTINGS if db.engine == "postgres" else MYSQL_BULK_SETTINGS)


@pytest.fixture
def restore_globals(any_db: TestDatabase) -> Iterator[TestDatabase]:
    """Snapshot the settings bulk mode touches and put them back afterwards, test pass or fail."""
    db = any_db
    if db.engine == "postgres":
        saved = {
            name: db.query(
                "SELECT setting FROM pg_file_settings WHERE name = %s"
                " AND right(sourcefile, 20) = 'postgresql.auto.conf' ORDER BY seqno DESC LIMIT 1",
                (name,),
            )
            for name in _names(db)
        }
    else:
        saved_mysql = {name: _show(db, name) for name in _names(db)}
    shown = {name: _show(db, name) for name in _names(db)}
    try:
        yield db
    finally:
        if db.engine == "postgres":
            with closing(db.connect()) as conn:
                for name, rows in saved.items():
                    if rows:
                        conn.execute(
                            sql.SQL("ALTER SYSTEM SET {} = {}").format(
                                sql.Identifier(name), sql.Literal(rows[0][0])
                            )
                        )
                    else:
                        conn.execute(sql.SQL("ALTER SYSTEM RESET {}").format(sql.Identifier(name)))
                conn.execute("SELECT pg_reload_conf()")
            for _ in range(100):
                if {n: _show(db, n) for n in shown} == shown:
                    break
                time.sleep(0.05)
        else:
            with closing(db.connect()) as conn:
                cur = conn.cursor()
                cur.execute("SET GLOBAL innodb_io_capacity_max = 40000")
                cur.execute(
                    "SET GLOBAL innodb_io_capacity = %s", (int(saved_mysql["innodb_io_capacity"]),)
                )
                cur.execute(
                    "SET GLOBAL innodb_io_capacity_max = %s",
                    (int(saved_mysql["innodb_io_capacity_max"]),),
                )


def _bulk_shown(db: TestDatabase) -> dict[str, str]:
    if db.engine == "postgres":
        return PG_BULK_SHOWN
    return dict(MYSQL_BULK_SETTINGS)


def _wait_shown(db: TestDatabase, expected: dict[str, str]) -> dict[str, str]:
    """A reload reaches other sessions asynchronously; a fresh session sees it once applied."""
    for _ in range(100):
        now = {n: _show(db, n) for n in expected}
        if now == expected:
            return now
        time.sleep(0.05)
    return {n: _show(db, n) for n in expected}


def test_enter_sets_bulk_values_and_exit_restores_them(restore_globals: TestDatabase) -> None:
    db = restore_globals
    before = {n: _show(db, n) for n in _names(db)}
    hook = BulkModeHook(BulkModeTarget(conn_id=db.conn_id))
    key = LeaseKey.of("dag", "public.events", "2024-01-01")
    assert hook.enter(key) is None
    assert _wait_shown(db, _bulk_shown(db)) == _bulk_shown(db)
    hook.exit(key)
    assert _wait_shown(db, before) == before


def test_exit_without_enter_changes_nothing(restore_globals: TestDatabase) -> None:
    db = restore_globals
    before = {n: _show(db, n) for n in _names(db)}
    BulkModeHook(BulkModeTarget(conn_id=db.conn_id)).exit(LeaseKey.of("dag", "t", "2024-01-01"))
    assert {n: _show(db, n) for n in _names(db)} == before


def test_two_overlapping_leases_restore_only_when_the_last_goes(
    restore_globals: TestDatabase,
) -> None:
    db = restore_globals
    before = {n: _show(db, n) for n in _names(db)}
    hook = BulkModeHook(BulkModeTarget(conn_id=db.conn_id))
    nightly = LeaseKey.of("nightly", "events", "2024-01-02")
    backfill = LeaseKey.of("backfill", "orders", "2023-12-01")
    hook.enter(nightly)
    hook.enter(backfill)
    hook.exit(nightly)
    assert _wait_shown(db, _bulk_shown(db)) == _bulk_shown(db), "first exit must leave bulk values"
    hook.exit(backfill)
    assert _wait_shown(db, before) == before


def test_loads_into_two_databases_of_one_server_share_one_set_of_leases(
    restore_globals: TestDatabase,
) -> None:
    """Server settings are server-wide: a load into another database must neither restore them
    under this one nor save this one's bulk values as its "originals"."""
    db = restore_globals
    before = {n: _show(db, n) for n in _names(db)}
    with fresh_database(db.engine, db.server) as other:
        here, there = (
            BulkModeHook(BulkModeTarget(conn_id=db.conn_id)),
            BulkModeHook(BulkModeTarget(conn_id=other.conn_id)),
        )
        first = LeaseKey.of("nightly", "events", "2024-01-02")
        second = LeaseKey.of("nightly", "orders", "2024-01-02")
        here.enter(first)
        there.enter(second)
        here.exit(first)
        assert _wait_shown(db, _bulk_shown(db)) == _bulk_shown(db), "the other load still runs"
        there.exit(second)
    assert _wait_shown(db, before) == before


def test_killed_run_is_restored_by_its_rerun_exit(restore_globals: TestDatabase) -> None:
    db = restore_globals
    before = {n: _show(db, n) for n in _names(db)}
    script = (
        "import sys, time\n"
        "from tests.harness import configure_process_environment\n"
        "configure_process_environment()\n"
        "from airflow_bulkload.bulk_mode.policy import LeaseKey\n"
        "from airflow_bulkload.bulk_mode import BulkModeTarget\n"
        "from airflow_bulkload.hooks.bulk_mode import BulkModeHook\n"
        f"BulkModeHook(BulkModeTarget(conn_id={db.conn_id!r}))"
        ".enter(LeaseKey.of('dag', 'events', '2024-01-03'))\n"
        "print('ENTERED', flush=True)\n"
        "time.sleep(600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        text=True,
    )
    output: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # ends at EOF if the child dies before entering
            output.append(line)
            if line.startswith("ENTERED"):
                break
        assert output and output[-1].startswith("ENTERED"), "".join(output)
    finally:
        proc.send_signal(signal.SIGKILL)  # kill -9 right after enter: no exit, no cleanup
        proc.wait(timeout=30)
    assert _wait_shown(db, _bulk_shown(db)) == _bulk_shown(db)
    # the re-run of the same DAG run: its exit re-claims the lease and restores at once
    BulkModeHook(BulkModeTarget(conn_id=db.conn_id)).exit(
        LeaseKey.of("dag", "events", "2024-01-03")
    )
    assert _wait_shown(db, before) == before


def test_expired_lease_of_a_crashed_run_is_restored_by_a_later_enter_exit(
    restore_globals: TestDatabase,
) -> None:
    db = restore_globals
    before = {n: _show(db, n) for n in _names(db)}
    clock: list[float] = [1_000_000.0]

    def now() -> float:
        return clock[0]

    hook = BulkModeHook(BulkModeTarget(conn_id=db.conn_id), clock=now)
    hook.enter(LeaseKey.of("crashed", "events", "2024-01-04"), ttl=60)  # never exits
    clock[0] += 61
    later = LeaseKey.of("nightly", "events", "2024-01-05")
    hook.enter(later)
    hook.exit(later)
    assert _wait_shown(db, before) == before


def test_renew_keeps_a_lease_alive(restore_globals: TestDatabase) -> None:
    db = restore_globals
    clock: list[float] = [1_000_000.0]
    hook = BulkModeHook(BulkModeTarget(conn_id=db.conn_id), clock=lambda: clock[0])
    long_load = LeaseKey.of("big", "events", "2024-01-06")
    hook.enter(long_load, ttl=60)
    clock[0] += 50
    assert hook.renew(long_load, ttl=60)
    clock[0] += 50  # past the first expiry, within the renewed one
    other = LeaseKey.of("other", "events", "2024-01-06")
    hook.enter(other)
    hook.exit(other)
    assert _wait_shown(db, _bulk_shown(db)) == _bulk_shown(db)
    hook.exit(long_load)
    assert not hook.renew(long_load, ttl=60)


def test_restart_only_setting_is_refused_before_any_change(restore_globals: TestDatabase) -> None:
    db = restore_globals
    static = (
        {"shared_buffers": "1GB"}
        if db.engine == "postgres"
        else {"innodb_log_file_size": "1073741824"}
    )
    touched = [*_names(db), *static]
    before = {n: _show(db, n) for n in touched}
    with pytest.raises(BulkModeRefusedError, match="restart"):
        BulkModeHook(BulkModeTarget(conn_id=db.conn_id), settings=static).enter(
            LeaseKey.of("d", "t", "x")
        )
    assert {n: _show(db, n) for n in touched} == before


def test_doublewrite_off_is_refused(mysql_db: TestDatabase) -> None:
    hook = BulkModeHook(
        BulkModeTarget(conn_id=mysql_db.conn_id), settings={"innodb_doublewrite": "OFF"}
    )
    with pytest.raises(BulkModeRefusedError, match="doublewrite"):
        hook.enter(LeaseKey.of("d", "t", "x"))


DURABILITY_BREAKING = {
    "postgres": [
        {"synchronous_commit": "off"},
        {"fsync": "off", "full_page_writes": "off"},
        {"FSYNC": "False"},
        {"Full-Page-Writes": 0},
    ],
    "mysql": [
        {"innodb_flush_log_at_trx_commit": 0},
        {"INNODB_FLUSH_LOG_AT_TRX_COMMIT": "2"},
        {"innodb_doublewrite": "off"},
    ],
}


def test_durability_breaking_settings_are_refused_before_any_change(
    restore_globals: TestDatabase,
) -> None:
    db = restore_globals
    names = ["synchronous_commit", "fsync", "full_page_writes"]
    if db.engine == "mysql":
        names = ["innodb_flush_log_at_trx_commit", "innodb_doublewrite"]
    touched = [*_names(db), *names]
    before = {n: _show(db, n) for n in touched}
    for settings in DURABILITY_BREAKING[db.engine]:
        hook = BulkModeHook(BulkModeTarget(conn_id=db.conn_id), settings=settings)
        with pytest.raises(BulkModeRefusedError, match="refusing"):
            hook.enter(LeaseKey.of("d", "t", "x"))
    assert {n: _show(db, n) for n in touched} == before
