"""LoadChunkOperator mapped over a manifest, run for real with dag.test()."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from airflow_bulkload.operators import LoadChunkOperator
from tests.harness import MotoServer, TestDatabase, put_chunk, register_dag


def test_mapped_load_through_dag_test_is_exactly_once_across_runs(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    from airflow.sdk import DAG
    from airflow.utils.state import DagRunState

    pg_db.query("CREATE TABLE events (id int PRIMARY KEY, kind text)")
    chunks = [
        put_chunk(moto_server, s3_bucket, f"run/events/chunk-{i}.csv.gz", data, rows=2)
        for i, data in enumerate([b"1,a\n2,b\n", b"3,c\n4,d\n"])
    ]
    with DAG(
        dag_id="bulkload_test_load_chunk_pg", schedule=None, start_date=datetime(2025, 1, 1)
    ) as dag:
        LoadChunkOperator.partial(
            task_id="load", table="public.events", conn_id=pg_db.conn_id
        ).expand(chunk=chunks)

    register_dag(dag)
    first = dag.test(run_after=datetime(2025, 1, 2))
    second = dag.test(run_after=datetime(2025, 1, 3))  # a second run of the same manifest

    assert first.state == DagRunState.SUCCESS and second.state == DagRunState.SUCCESS
    assert pg_db.query("SELECT id, kind FROM events ORDER BY id") == [
        (1, "a"),
        (2, "b"),
        (3, "c"),
        (4, "d"),
    ]
    assert pg_db.query("SELECT count(*), sum(rows) FROM bulkload.chunk_ledger") == [(2, 4)]
    assert {load_id for (load_id,) in pg_db.query("SELECT load_id FROM bulkload.chunk_ledger")} == {
        f"bulkload_test_load_chunk_pg/{first.run_id}"
    }


def test_the_connection_may_come_from_a_param(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    from airflow.sdk import DAG, Param
    from airflow.utils.state import DagRunState

    pg_db.query("CREATE TABLE events (id int PRIMARY KEY, kind text)")
    chunk = put_chunk(moto_server, s3_bucket, "run/events/chunk-0.csv.gz", b"1,a\n2,b\n", rows=2)
    with DAG(
        dag_id="bulkload_test_load_chunk_conn_param",
        schedule=None,
        start_date=datetime(2025, 1, 1),
        params={"conn": Param("no_such_connection", type="string")},
    ) as dag:
        LoadChunkOperator(
            task_id="load", table="public.events", conn_id="{{ params.conn }}", chunk=chunk
        )

    register_dag(dag)
    run = dag.test(run_after=datetime(2025, 1, 2), run_conf={"conn": pg_db.conn_id})

    assert run.state == DagRunState.SUCCESS
    assert pg_db.query("SELECT id, kind FROM events ORDER BY id") == [(1, "a"), (2, "b")]
