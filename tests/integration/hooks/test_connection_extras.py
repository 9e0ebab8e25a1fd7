"""The connection extras the docs name for this provider never reach the driver."""

from __future__ import annotations

import json

import pytest

from airflow_bulkload.bulk_mode import BulkModeTarget
from airflow_bulkload.bulk_mode.policy import LeaseKey
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.hooks.bulk_mode import BulkModeHook
from tests.harness import MotoServer, TestDatabase, put_chunk


def test_our_extras_do_not_break_loads_or_bulk_mode(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    default_state = "postgres" if any_db.engine == "postgres" else "bulkload"
    extras = {"bulkload_bulk_mode_database": default_state}
    if any_db.engine == "mysql":
        extras["bulkload_state_schema"] = any_db.name
    conn = json.loads(any_db.airflow_conn)
    conn["extra"] = {**conn.get("extra", {}), **extras}
    monkeypatch.setenv("AIRFLOW_CONN_WITH_EXTRAS", json.dumps(conn))
    text = "text" if any_db.engine == "postgres" else "VARCHAR(20)"
    any_db.query(f"CREATE TABLE notes (id int PRIMARY KEY, note {text})")
    chunk = put_chunk(moto_server, s3_bucket, "c0.csv.gz", b"1,a\n2,b\n", rows=2)

    assert BulkLoadHook(conn_id="with_extras").load_chunk("notes", chunk).rows == 2
    bulk = BulkModeHook(BulkModeTarget(conn_id="with_extras"), settings={})
    key = LeaseKey.of("extras", "notes", "x")
    bulk.enter(key)
    bulk.exit(key)
    assert any_db.query("SELECT count(*) FROM notes") == [(2,)]
