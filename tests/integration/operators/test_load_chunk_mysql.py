"""LoadChunkOperator with a MySQL connection, run by Airflow for real (dag.test())."""

from __future__ import annotations

import pendulum

from airflow_bulkload.operators.load_chunk import LoadChunkOperator
from tests.harness import MotoServer, TestDatabase, put_chunk, register_dag


def test_dag_loads_mapped_chunks_once_each(
    airflow_db, tmp_path, mysql_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    from airflow.sdk import DAG

    mysql_db.query("CREATE TABLE events (id INT PRIMARY KEY, kind VARCHAR(10) NOT NULL)")
    chunks = [
        put_chunk(moto_server, s3_bucket, "run/events/00000.csv.gz", b"1,a\n2,b\n", rows=2),
        put_chunk(moto_server, s3_bucket, "run/events/00001.csv.gz", b"3,c\n", rows=1),
    ]
    with DAG(
        dag_id="test_load_chunk_mysql",
        schedule=None,
        start_date=pendulum.datetime(2024, 1, 1, tz="UTC"),
        catchup=False,
    ) as dag:
        LoadChunkOperator.partial(task_id="load", table="events", conn_id=mysql_db.conn_id).expand(
            chunk=chunks
        )

    register_dag(dag)
    run = dag.test()
    assert run.state == "success"
    assert dag.test().state == "success"  # a second run: every chunk is in the ledger
    assert mysql_db.query("SELECT id, kind FROM events ORDER BY id") == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
    ]
    assert mysql_db.query(
        "SELECT chunk_key, row_count FROM bulkload_chunk_ledger ORDER BY chunk_key"
    ) == [("run/events/00000.csv.gz", 2), ("run/events/00001.csv.gz", 1)]
