"""bulk_load_table(wait_for_input=...): the sensor before staging, run by Airflow against S3."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow_bulkload.pipeline import bulk_load_table
from tests.harness import MotoServer, register_dag, unique_name


def run_the_wait(source: str, wait: timedelta, params: dict[str, Any] | None = None) -> str:
    """Only a ``bulk_load_table`` group's ``wait_for_input`` task over ``source``, for the
    logical date 2026-11-21; its end state."""
    from airflow.sdk import DAG

    with DAG(
        unique_name("wait"), schedule=None, start_date=datetime(2026, 1, 1), params=params or {}
    ) as dag:
        bulk_load_table(
            table="public.events",
            conn_id="unused",
            source=source,
            staging="s3://unused-staging/staging",
            wait_for_input=wait,
        )
    only_the_wait = dag.partial_subset(
        "load_public_events.wait_for_input", include_downstream=False
    )
    register_dag(only_the_wait)
    run = only_the_wait.test(logical_date=datetime(2026, 11, 21, tzinfo=UTC))
    [ti] = run.get_task_instances()
    return str(ti.state)


def _run_the_wait(bucket: str, wait: timedelta) -> str:
    return run_the_wait(f"s3://{bucket}/events/{{{{ ds }}}}/", wait)


def test_the_wait_passes_once_the_days_folder_has_an_object(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str
) -> None:
    moto_server.client("s3").put_object(
        Bucket=s3_bucket, Key="events/2026-11-21/part-0.csv.gz", Body=b"x"
    )
    assert _run_the_wait(s3_bucket, timedelta(minutes=5)) == "success"


def test_the_wait_fails_the_run_when_the_input_never_comes(
    airflow_db: Path, moto_server: MotoServer, s3_bucket: str
) -> None:
    # another day's input and a neighbour's folder do not count
    for key in ("events/2026-11-20/part-0.csv.gz", "events/2026-11-210/part-0.csv.gz"):
        moto_server.client("s3").put_object(Bucket=s3_bucket, Key=key, Body=b"x")
    assert _run_the_wait(s3_bucket, timedelta(seconds=2)) == "failed"
