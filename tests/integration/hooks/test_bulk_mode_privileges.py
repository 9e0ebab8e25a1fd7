"""Self-managed bulk mode as a user without the privileges it needs: the error says what bulk
mode needs and the ways out (a privileged connection, RDS parameter groups, ``bulk_mode='off'``),
not only the server's bare "permission denied"."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest

from airflow_bulkload.bulk_mode import BulkModeTarget
from airflow_bulkload.bulk_mode.policy import LeaseKey
from airflow_bulkload.exceptions import InsufficientPrivilegeError
from airflow_bulkload.hooks.bulk_mode import BulkModeHook
from tests.harness import TestDatabase

KEY = LeaseKey.of("dag", "events", "2026-11-21")


@pytest.fixture
def unprivileged_conn(any_db: TestDatabase, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A login with every right on the test database and nothing server-wide."""
    user = f"loader_{uuid.uuid4().hex[:8]}"
    if any_db.engine == "postgres":
        any_db.query(f'CREATE ROLE "{user}" LOGIN NOSUPERUSER')
        any_db.query(f'GRANT ALL ON DATABASE "{any_db.name}" TO "{user}"')
        any_db.query(f'GRANT ALL ON SCHEMA public TO "{user}"')
    else:
        any_db.query(f"CREATE USER '{user}'@'%'")
        any_db.query(f"GRANT ALL ON `{any_db.name}`.* TO '{user}'@'%'")
    conn = json.loads(any_db.airflow_conn) | {"login": user, "password": ""}
    monkeypatch.setenv("AIRFLOW_CONN_UNPRIVILEGED", json.dumps(conn))
    yield "unprivileged"
    if any_db.engine == "postgres":
        any_db.query(f'DROP OWNED BY "{user}"')
        any_db.query(f'DROP ROLE "{user}"')
    else:
        any_db.query(f"DROP USER '{user}'@'%'")


def test_entering_bulk_mode_without_the_privilege_says_what_it_needs_and_the_ways_out(
    any_db: TestDatabase, unprivileged_conn: str
) -> None:
    hook = BulkModeHook(BulkModeTarget(conn_id=unprivileged_conn))
    with pytest.raises(InsufficientPrivilegeError) as refused:
        hook.enter(KEY)
    message = str(refused.value)
    assert message.startswith("unprivileged: cannot enter bulk mode")
    assert "ALTER SYSTEM" in message and "SET GLOBAL" in message
    assert "bulk_mode='off'" in message and "rds_instance" in message
    assert "Server said:" in message  # the server's own words stay
    with pytest.raises(InsufficientPrivilegeError, match="cannot exit bulk mode"):
        hook.exit(KEY)
