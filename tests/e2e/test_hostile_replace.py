"""Hostile whole-pipeline regression tests for ``mode="replace"``: ``bulk_load_table`` under
``dag.test()``, bulk mode off, on both engines. Each FAILS on the code as it was when written
(commit 1d44ae5) and passes once the break is fixed.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.harness import MotoServer, TestDatabase, run_dag_source

DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    bulk_load_table(
        table="items",
        conn_id={conn_id!r},
        mode="replace",
        source="s3://{bucket}/in/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={{"format": "csv", "header": True}},
        chunk_size="2KB",
        parallelism=2,
        bulk_mode="off",
        load_retries=0,
    )
"""


@pytest.fixture(params=["postgres", "mysql"])
def db(request: pytest.FixtureRequest, airflow_db: Path) -> TestDatabase:
    return request.getfixturevalue("pg_db" if request.param == "postgres" else "mysql_db")


def test_a_replace_with_an_empty_input_is_not_a_green_run_over_the_old_table(
    db: TestDatabase, moto_server: MotoServer, s3_bucket: str, tmp_path: Path
) -> None:
    """What the user did: the nightly snapshot export came out empty (header only) and the
    replace DAG ran over it (no ``wait_for_input``).

    What happened: the run is green and the report verified, yet the table still holds the
    100 rows of yesterday's snapshot: an empty input maps no load task, which skips
    finalize_table, so nothing is swapped, and the report is happy with "input empty". The
    hook-level path (prepare, finalize) does the opposite: it swaps in an empty table. The
    docs' table says replace leaves "exactly the input".

    What should happen: one of the two, said out loud -- the run fails (an empty snapshot
    refused, the table untouched), or the table becomes the (empty) input and the report says
    so. Never a green, verified run whose table is not the input.
    """
    import pendulum

    db.query("CREATE TABLE items (id int PRIMARY KEY, name varchar(40) NOT NULL)")
    db.query(
        "INSERT INTO items (id, name) VALUES "
        + ", ".join(f"({i}, 'old {i}')" for i in range(1, 101))
    )
    moto_server.client("s3").put_object(
        Bucket=s3_bucket, Key="in/2026-11-21/part-1.csv", Body=b"id,name\n"
    )
    dag_id = f"hostile_replace_{uuid.uuid4().hex[:8]}"
    source = DAG_SOURCE.format(dag_id=dag_id, conn_id=db.conn_id, bucket=s3_bucket)
    dagrun = run_dag_source(
        source, dag_id, tmp_path / "dags", logical_date=pendulum.datetime(2026, 11, 21)
    )
    states = {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in dagrun.get_task_instances()}
    rows = db.query("SELECT count(*) FROM items")[0][0]
    if str(dagrun.state) == "success":
        report: Any = next(
            ti for ti in dagrun.get_task_instances() if ti.task_id.endswith(".report")
        ).xcom_pull(task_ids="load_items.report")
        summary = report if isinstance(report, dict) else json.loads(report)
        assert rows == 0, (
            f"green run ({states}), report verified={summary['verification']['verified']},"
            f" but the table holds {rows} old rows and the input none"
        )
    else:
        assert rows == 100
