"""Dry runs: a chunk through the engine's parser into a scratch copy, and nothing changed.

The table, its ledger and its load slots stay as they were whether the chunk is good or bad; a
bad value is named with its line, as the real load would name it. The whole pipeline with
``dry_run=True`` runs stage, pre-flight, the trials and the report under ``dag.test()``.
"""

from __future__ import annotations

from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.hooks import BulkLoadHook
from tests.harness import MotoServer, TestDatabase, put_chunk, register_dag, unique_name


def create_events(db: TestDatabase) -> None:
    """The table with a row, and the state tables (an empty ledger) as a load leaves them."""
    db.query("CREATE TABLE events (id int PRIMARY KEY, kind varchar(10) NOT NULL, n int)")
    db.query("INSERT INTO events VALUES (1, 'before', 1)")
    hook = BulkLoadHook(conn_id=db.conn_id)
    with closing(hook.get_conn()) as conn:
        hook.dialect.ensure_state_schema(conn)
        conn.commit()


def untouched(db: TestDatabase) -> None:
    assert db.query("SELECT id, kind, n FROM events") == [(1, "before", 1)]
    ledger = "bulkload.chunk_ledger" if db.engine == "postgres" else "bulkload_chunk_ledger"
    assert db.query(f"SELECT count(*) FROM {ledger}")[0][0] == 0


def test_a_good_chunk_is_counted_and_nothing_is_written(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_events(any_db)
    data = b"".join(b"%d,k%d,%d\n" % (i, i, i) for i in range(2, 502))
    chunk = put_chunk(moto_server, s3_bucket, "run/chunk-0.csv.gz", data, rows=500)

    result = BulkLoadHook(conn_id=any_db.conn_id).try_chunk("events", chunk)

    assert (result.rows, result.method, result.skipped) == (500, "dry_run", False)
    untouched(any_db)


@pytest.mark.parametrize(
    ("bad", "says"),
    [(b"7,seven,not-a-number\n", "n"), (b"8,a-kind-too-long-for-it,8\n", "kind")],
    ids=["type", "length"],
)
def test_a_value_the_column_does_not_take_fails_naming_its_line_and_nothing_is_written(
    bad: bytes, says: str, any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_events(any_db)
    data = b"2,two,2\n3,three,3\n" + bad + b"9,nine,9\n"
    chunk = put_chunk(moto_server, s3_bucket, "run/chunk-0.csv.gz", data, rows=4)

    with pytest.raises(ChunkLoadError) as failure:
        BulkLoadHook(conn_id=any_db.conn_id).try_chunk("events", chunk)

    assert failure.value.line == 3 and says in str(failure.value)
    untouched(any_db)


def test_the_pipelines_dry_run_stages_trials_and_reports_without_touching_the_table(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    from airflow.sdk import DAG
    from airflow.utils.state import DagRunState

    from airflow_bulkload.pipeline import bulk_load_table

    create_events(pg_db)
    body = b"id,kind,n\n" + b"".join(b"%d,k%d,%d\n" % (i, i, i) for i in range(2, 3002))
    moto_server.client("s3").put_object(Bucket=s3_bucket, Key="in/2026-11-21/a.csv", Body=body)
    with DAG(unique_name("dry"), schedule=None, start_date=datetime(2026, 1, 1)) as dag:
        bulk_load_table(
            table="public.events",
            conn_id=pg_db.conn_id,
            source=f"s3://{s3_bucket}/in/{{{{ ds }}}}/",
            staging=f"s3://{s3_bucket}/staging",
            file_format={"format": "csv", "header": True},
            chunk_size="20KB",
            dry_run=True,
        )
    register_dag(dag)
    run = dag.test(logical_date=datetime(2026, 11, 21, tzinfo=UTC))

    assert run.state == DagRunState.SUCCESS
    [report] = [ti for ti in run.get_task_instances() if ti.task_id.endswith(".report")]
    assert report.state == "success"
    assert pg_db.query("SELECT id, kind, n FROM events") == [(1, "before", 1)]
    assert pg_db.query("SELECT count(*) FROM bulkload.chunk_ledger") == [(0,)]
