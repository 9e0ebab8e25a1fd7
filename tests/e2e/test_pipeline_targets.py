"""Targets users have, through the whole pipeline (``bulk_load_table`` under ``dag.test()``): a
range-partitioned PostgreSQL table with bulk mode on, and a loader role without the CHECKPOINT
privilege (and without the right to change server settings), which ends green with a warning."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness import MotoServer, TestDatabase, run_dag_source
from tests.integration.hooks.test_bulk_mode_server import (
    _bulk_shown,
    _show,
    restore_globals,  # noqa: F401 (fixture)
)
from tests.integration.operators.test_partitioned_postgres import SCHEMA, catalog

DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    bulk_load_table(
        table="public.events",
        conn_id={conn_id!r},
        source="s3://{bucket}/events/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={{"format": "csv", "header": True}},
        chunk_size="4KB",
        parallelism=2,
        bulk_mode={bulk_mode!r},
    )
"""
ROWS = 900


def _put_input(moto: MotoServer, bucket: str, ds: str) -> None:
    days = ("2026-01-15", "2026-02-15", "2026-03-15")
    body = "id,day,note\n" + "".join(f"{i},{days[i % 3]},note {i}\n" for i in range(1, ROWS + 1))
    moto.client("s3").put_object(Bucket=bucket, Key=f"events/{ds}/part-1.csv", Body=body.encode())


def _run(db: TestDatabase, conn_id: str, bucket: str, tmp_path: Path, bulk_mode: str) -> Any:
    from pendulum import datetime

    dag_id = f"bulkload_target_{uuid.uuid4().hex[:8]}"
    source = DAG_SOURCE.format(dag_id=dag_id, conn_id=conn_id, bucket=bucket, bulk_mode=bulk_mode)
    return run_dag_source(source, dag_id, tmp_path / "dags", logical_date=datetime(2026, 11, 21))


def _states(run: Any) -> dict[str, str]:
    return {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}


@pytest.mark.parametrize("any_db", ["postgres"], indirect=True)
def test_a_range_partitioned_table_loads_exactly_with_bulk_mode_on(
    restore_globals: TestDatabase,  # noqa: F811
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
) -> None:
    from airflow.utils.state import DagRunState

    db = restore_globals
    db.query(SCHEMA)
    before = catalog(db)
    settings_before = {n: _show(db, n) for n in _bulk_shown(db)}
    _put_input(moto_server, s3_bucket, "2026-11-21")

    run = _run(db, db.conn_id, s3_bucket, tmp_path, "auto")

    states = _states(run)
    assert run.state == DagRunState.SUCCESS, states
    assert states["enter_bulk_mode"] == "success" and states["exit_bulk_mode"] == "success"
    assert db.query("SELECT count(*), count(DISTINCT id), sum(id) FROM events") == [
        (ROWS, ROWS, ROWS * (ROWS + 1) // 2)
    ]
    assert db.query(
        "SELECT tableoid::regclass::text, count(*) FROM events GROUP BY 1 ORDER BY 1"
    ) == [
        ("events_2026_01", ROWS // 3),
        ("events_2026_02", ROWS // 3),
        ("events_2026_03", ROWS // 3),
    ]
    assert catalog(db) == before
    assert {n: _show(db, n) for n in _bulk_shown(db)} == settings_before


@pytest.fixture
def loader_conn(pg_db: TestDatabase, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A role that owns its table and schema rights, but is no superuser: no CHECKPOINT, no
    ALTER SYSTEM."""
    role = f"loader_{uuid.uuid4().hex[:8]}"
    pg_db.query(f'CREATE ROLE "{role}" LOGIN NOSUPERUSER')
    pg_db.query(f'GRANT ALL ON SCHEMA public TO "{role}"')
    pg_db.query(f'GRANT CREATE ON DATABASE "{pg_db.name}" TO "{role}"')
    conn = json.loads(pg_db.airflow_conn) | {"login": role, "password": None}
    monkeypatch.setenv("AIRFLOW_CONN_LEAST_PRIVILEGE", json.dumps(conn))
    yield role
    pg_db.query(f'DROP OWNED BY "{role}"')
    pg_db.query(f'DROP ROLE "{role}"')


def test_a_loader_without_checkpoint_privilege_ends_green_and_the_report_says_so(
    pg_db: TestDatabase,
    loader_conn: str,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from airflow.utils.state import DagRunState

    pg_db.query(
        "CREATE TABLE events (id bigint PRIMARY KEY, day date NOT NULL, note text);"
        " CREATE INDEX events_note ON events (note);"
        f' ALTER TABLE events OWNER TO "{loader_conn}"'
    )
    _put_input(moto_server, s3_bucket, "2026-11-21")

    run = _run(pg_db, "least_privilege", s3_bucket, tmp_path, "off")

    states = _states(run)
    assert run.state == DagRunState.SUCCESS, states
    assert pg_db.query("SELECT count(*), sum(id) FROM events") == [(ROWS, ROWS * (ROWS + 1) // 2)]
    report = next(ti for ti in run.get_task_instances() if ti.task_id.endswith(".report"))
    summary = report.xcom_pull(task_ids=report.task_id, map_indexes=-1)
    assert str(summary["checkpoint"]).startswith("skipped: CHECKPOINT needs a superuser")
