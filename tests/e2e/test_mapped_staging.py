"""The pipeline stages an input larger than a group in mapped ``stage_group`` tasks and loads it
exactly once, on both engines; a re-run of the same date stages and loads nothing again."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.harness import MotoServer, TestDatabase, run_dag_source

DAG_ID = "bulkload_mapped_staging"
DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG, Asset

from airflow_bulkload.pipeline import bulk_load_table

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    bulk_load_table(
        table="events",
        conn_id={conn_id!r},
        source="s3://{bucket}/events/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={{"format": "csv", "header": True}},
        chunk_size="2KB",
        stage_group_size="3KB",
        sort_by_primary_key="auto",
        direct=False,  # PostgreSQL would load these parts as stored: this is the staged path
        parallelism=2,
        outlets=[Asset("bulkload://test/events")],
    )
"""
PARTS, ROWS_PER_PART = 4, 150


def test_a_large_input_is_staged_by_one_task_per_group_and_loaded_exactly_once(
    any_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
) -> None:
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    any_db.query("CREATE TABLE events (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL)")
    any_db.query("CREATE INDEX events_name ON events (name)")
    s3 = moto_server.client("s3")
    ids = [(n * 7919) % (PARTS * ROWS_PER_PART) for n in range(PARTS * ROWS_PER_PART)]
    for part in range(PARTS):
        rows = ids[part * ROWS_PER_PART : (part + 1) * ROWS_PER_PART]
        body = "id,name\n" + "".join(f"{i},name {i:05d}\n" for i in rows)
        s3.put_object(
            Bucket=s3_bucket, Key=f"events/2026-11-21/part-{part}.csv", Body=body.encode()
        )
    source = DAG_SOURCE.format(dag_id=DAG_ID, conn_id=any_db.conn_id, bucket=s3_bucket)

    first_names: set[tuple[str, int, Any]] = set()
    for attempt in range(2):  # the second run of the same date finds every chunk loaded
        run = run_dag_source(source, DAG_ID, tmp_path / "dags", logical_date=datetime(2026, 11, 21))
        if attempt == 0:
            first_names = {
                (ti.task_id.rsplit(".", 1)[-1], ti.map_index, ti.rendered_map_index)
                for ti in run.get_task_instances()
            }
        assert run.state == DagRunState.SUCCESS
        states = [(ti.task_id.rsplit(".", 1)[-1], str(ti.state)) for ti in run.get_task_instances()]
        # the re-run finds the input's manifest: no group is staged again
        staged_groups = states.count(("stage_group", "success"))
        assert staged_groups == (PARTS if attempt == 0 else 0), states
        total = PARTS * ROWS_PER_PART
        assert any_db.query("SELECT count(*), sum(id), count(DISTINCT name) FROM events") == [
            (total, total * (total - 1) // 2, total)
        ]
    # the UI names mapped tasks by their chunk and group
    names = {(task, name) for task, index, name in first_names if index >= 0}
    assert ("stage_group", "group 0: part-0.csv") in names, names
    assert any(task == "load" and "chunk-" in (name or "") for task, name in names), names
    # the Asset events carry the load's numbers
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        extras = session.scalars(select(AssetEvent.extra).order_by(AssetEvent.id)).all()
    extra = [e for e in extras if e and e.get("table") == "events"][-2]
    assert extra["rows"] == total and extra["chunks_loaded"] == extra["chunks"] > 0
    assert extra["verified"] and extra["manifest"].endswith("/manifest.json")
    assert extra["logical_date"].startswith("2026-11-21")
    staged = s3.list_objects_v2(Bucket=s3_bucket, Prefix="staging/").get("Contents", [])
    group_manifests = {o["Key"].rsplit("/", 1)[-1] for o in staged if "/group-" in o["Key"]}
    assert {f"group-{n:05d}-manifest.json" for n in range(PARTS)} <= group_manifests
