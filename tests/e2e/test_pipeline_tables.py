"""Two tables in one DAG, one without a primary key and one with a composite key: both load
exactly once, side by side, and a re-run of the same date changes nothing."""

from __future__ import annotations

from pathlib import Path

from tests.harness import MotoServer, TestDatabase, run_dag_source

DAG_ID = "bulkload_two_tables"
DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    for table in ("public.no_key", "public.two_part_key"):
        bulk_load_table(
            table=table,
            conn_id={conn_id!r},
            source="s3://{bucket}/" + table.split(".")[1] + "/{{{{ ds }}}}/",
            staging="s3://{bucket}/staging",
            file_format={{"format": "csv", "header": True}},
            chunk_size="2KB",
            parallelism=2,
        )
"""
ROWS = 400


def _put_inputs(moto: MotoServer, bucket: str, ds: str) -> None:
    s3 = moto.client("s3")
    no_key = "a,b\n" + "".join(f"{i % 50},row {i}\n" for i in range(ROWS))  # duplicates allowed
    two_part = "k1,k2,v\n" + "".join(f"{i // 20},{i % 20},value {i}\n" for i in range(ROWS))
    s3.put_object(Bucket=bucket, Key=f"no_key/{ds}/part-1.csv", Body=no_key.encode())
    s3.put_object(Bucket=bucket, Key=f"two_part_key/{ds}/part-1.csv", Body=two_part.encode())


def _state(db: TestDatabase) -> tuple[object, ...]:
    return (
        db.query("SELECT count(*), sum(a), count(DISTINCT b) FROM no_key")[0],
        db.query("SELECT count(*), count(DISTINCT (k1, k2)), sum(k1 * 100 + k2) FROM two_part_key")[
            0
        ],
        db.query(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'two_part_key'"
            " ORDER BY indexname"
        ),
    )


def test_tables_without_or_with_a_composite_key_load_once_side_by_side(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, airflow_db: Path, tmp_path: Path
) -> None:
    pg_db.query("CREATE TABLE no_key (a int NOT NULL, b text)")
    pg_db.query(
        "CREATE TABLE two_part_key (k1 int, k2 int, v text NOT NULL, PRIMARY KEY (k1, k2));"
        " CREATE INDEX two_part_key_v ON two_part_key (v)"
    )
    indexes_before = _state(pg_db)[2]
    ds = "2026-11-21"
    _put_inputs(moto_server, s3_bucket, ds)
    source = DAG_SOURCE.format(dag_id=DAG_ID, conn_id=pg_db.conn_id, bucket=s3_bucket)
    from airflow.utils.state import DagRunState
    from pendulum import datetime

    for _attempt in range(2):  # the second run of the same date finds every chunk loaded
        run = run_dag_source(source, DAG_ID, tmp_path / "dags", logical_date=datetime(2026, 11, 21))
        assert run.state == DagRunState.SUCCESS

        no_key, two_part, indexes = _state(pg_db)
        assert no_key == (ROWS, sum(i % 50 for i in range(ROWS)), ROWS)
        assert two_part == (ROWS, ROWS, sum((i // 20) * 100 + i % 20 for i in range(ROWS)))
        assert indexes == indexes_before
