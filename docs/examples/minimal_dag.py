"""The smallest DAG that loads a file: stage it into chunks, then load each chunk exactly once."""

import pendulum
from airflow.sdk import DAG

from airflow_bulkload.operators import LoadChunkOperator, StageToS3Operator

with DAG(
    dag_id="bulkload_minimal",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
) as dag:
    stage = StageToS3Operator(
        task_id="stage",
        source="s3://my-input/events/2026-01-01.csv.gz",
        staging="s3://my-staging/bulkload",
        table="public.events",
        file_format={"format": "csv", "header": True},
    )
    LoadChunkOperator.partial(
        task_id="load", table="public.events", conn_id="bulkload_postgres", retries=2
    ).expand(chunk=stage.output)
