"""The whole pipeline with mode as a DAG Param: a replace, then an upsert, on both engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.harness import MotoServer, TestDatabase, run_dag_source

DAG_ID = "bulkload_modes"
DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.assets import create_asset
from airflow_bulkload.pipeline import bulk_load_table, mode_param

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         params={{"mode": mode_param()}}) as dag:
    bulk_load_table(
        table="items",
        conn_id={conn_id!r},
        source="s3://{bucket}/items/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={{"format": "csv", "header": True}},
        chunk_size="2KB",
        parallelism=2,
        bulk_mode="off",
        mode="{{{{ params.mode }}}}",
        outlets=[create_asset(conn_id={conn_id!r}, table="items")],
    )
"""


def _put(moto: MotoServer, bucket: str, ds: str, rows: dict[int, str]) -> None:
    body = "id,name,qty\n" + "".join(f"{i},{name},{i % 7}\n" for i, name in sorted(rows.items()))
    moto.client("s3").put_object(Bucket=bucket, Key=f"items/{ds}/part-1.csv", Body=body.encode())


def _rows(db: TestDatabase) -> dict[int, str]:
    return dict(db.query("SELECT id, name FROM items"))  # type: ignore[arg-type]


def _indexes(db: TestDatabase) -> list[tuple[object, ...]]:
    if db.engine == "postgres":
        return db.query(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'items' ORDER BY 1"
        )
    return db.query(
        "SELECT INDEX_NAME, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS"
        " WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'items' ORDER BY 1, SEQ_IN_INDEX"
    )


@pytest.mark.parametrize("engine", ["postgres", "mysql"])
def test_replace_then_upsert_through_the_pipeline(
    engine: str,
    request: pytest.FixtureRequest,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
) -> None:
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    db: TestDatabase = request.getfixturevalue("pg_db" if engine == "postgres" else "mysql_db")
    db.query("CREATE TABLE items (id int PRIMARY KEY, name varchar(40) NOT NULL, qty int)")
    db.query("CREATE INDEX items_name ON items (name)")
    db.query(
        "INSERT INTO items (id, name, qty) VALUES "
        + ", ".join(f"({i}, 'stale {i}', 0)" for i in range(1000, 1100))
    )
    indexes = _indexes(db)
    source = DAG_SOURCE.format(dag_id=DAG_ID, conn_id=db.conn_id, bucket=s3_bucket)

    snapshot = {i: f"item {i}" for i in range(1, 401)}
    _put(moto_server, s3_bucket, "2026-11-21", snapshot)
    events = _asset_events()
    run = run_dag_source(
        source,
        DAG_ID,
        tmp_path / "dags",
        logical_date=datetime(2026, 11, 21),
        run_conf={"mode": "replace"},
    )
    assert run.state == DagRunState.SUCCESS
    assert _rows(db) == snapshot  # the stale rows went with the old table
    assert _asset_events() == events + 1
    assert _indexes(db) == indexes

    changes = {i: f"changed {i}" for i in range(390, 421)}
    _put(moto_server, s3_bucket, "2026-11-22", changes)
    for _attempt in range(2):  # a re-run of the same date merges to the same table
        run = run_dag_source(
            source,
            DAG_ID,
            tmp_path / "dags",
            logical_date=datetime(2026, 11, 22),
            run_conf={"mode": "upsert"},
        )
        assert run.state == DagRunState.SUCCESS
        assert _rows(db) == snapshot | changes
        assert _indexes(db) == indexes
    report = next(
        ti for ti in run.get_task_instances() if ti.task_id.endswith(".report")
    ).xcom_pull(task_ids="load_items.report")
    summary = report if isinstance(report, dict) else json.loads(report)
    assert summary["mode"] == "upsert" and summary["verification"]["verified"]


def _asset_events() -> int:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import func, select

    with create_session() as session:
        return int(session.scalar(select(func.count()).select_from(AssetEvent)) or 0)


def test_an_empty_snapshot_fails_the_run_replaces_nothing_and_announces_nothing(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, airflow_db: Path, tmp_path: Path
) -> None:
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    pg_db.query("CREATE TABLE items (id int PRIMARY KEY, name varchar(40) NOT NULL, qty int)")
    pg_db.query("INSERT INTO items VALUES (1, 'kept', 1)")
    _put(moto_server, s3_bucket, "2026-11-23", {})  # a header, no rows: the export failed
    source = DAG_SOURCE.format(dag_id=DAG_ID + "_empty", conn_id=pg_db.conn_id, bucket=s3_bucket)
    events = _asset_events()
    run = run_dag_source(
        source,
        DAG_ID + "_empty",
        tmp_path / "dags",
        logical_date=datetime(2026, 11, 23),
        run_conf={"mode": "replace"},
    )
    # a green run would claim the table holds the (empty) input: it fails, the table untouched
    assert run.state == DagRunState.FAILED
    assert _rows(pg_db) == {1: "kept"}
    assert pg_db.query("SELECT tablename FROM pg_tables WHERE schemaname = 'public'") == [
        ("items",)
    ]
    assert _asset_events() == events
    states = {ti.task_id.rsplit(".", 1)[-1]: ti.state for ti in run.get_task_instances()}
    # loaded as stored, the header-only object is a chunk of no rows: finalize counts the work
    # table's rows and refuses the swap (a staged input of no chunks fails in the report)
    assert states["finalize_table"] == "failed" and states["restore_table"] == "success"
    assert states["report"] != "success"
