"""A loader role without CHECKPOINT privilege: pre-flight says so, the checkpoint is skipped with
a warning, and the load ends green."""

from __future__ import annotations

import json
import uuid

import pytest

from airflow_bulkload.hooks import BulkLoadHook, TableStateHook
from airflow_bulkload.operators.table import CheckpointOperator
from tests.harness import TestDatabase


@pytest.fixture
def loader_conn(pg_db: TestDatabase, monkeypatch: pytest.MonkeyPatch) -> str:
    role = f"loader_{uuid.uuid4().hex[:8]}"
    pg_db.query(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER')
    pg_db.query(f'GRANT ALL ON SCHEMA public TO "{role}"')
    conn = json.loads(pg_db.airflow_conn) | {"login": role, "password": None}
    monkeypatch.setenv("AIRFLOW_CONN_LEAST_PRIVILEGE", json.dumps(conn))
    yield "least_privilege"
    pg_db.query(f'DROP OWNED BY "{role}"')
    pg_db.query(f'DROP ROLE "{role}"')


def test_a_loader_without_checkpoint_privilege_is_warned_and_skips_it(
    pg_db: TestDatabase, loader_conn: str
) -> None:
    facts = BulkLoadHook(conn_id=loader_conn).server_facts()
    assert facts.can_checkpoint is False
    assert BulkLoadHook(conn_id=pg_db.conn_id).server_facts().can_checkpoint is True

    done = CheckpointOperator(task_id="checkpoint", conn_id=loader_conn).execute({})
    assert done.startswith("skipped: CHECKPOINT needs a superuser")
    with pytest.raises(Exception, match="pg_checkpoint"):
        TableStateHook(conn_id=loader_conn).checkpoint(skip_without_privilege=False)
