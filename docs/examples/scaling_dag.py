"""Bounding a load's concurrency: an Airflow pool, a per-run cap, and server-side load slots."""

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.operators import LoadChunkOperator, StageToS3Operator

with DAG(
    dag_id="bulkload_scaled",
    # the midnight run's ds is the day that ended (see the quick start)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    stage = StageToS3Operator(
        task_id="stage",
        source="s3://my-input/events/{{ ds }}/",
        staging="s3://my-staging/bulkload",
        table="public.events",
        file_format={"format": "csv", "header": True},
        chunk_size="512MB",
        temp_dir="/mnt/scratch",  # about 1x the uncompressed input free (2x when sorting)
    )
    LoadChunkOperator.partial(
        task_id="load",
        table="public.events",
        conn_id="bulkload_postgres",
        pool="prod_pg_loads",  # worker slots across all DAGs loading into this server
        max_active_tis_per_dagrun=7,  # at most 7 chunk tasks of one run at once
        max_concurrent_loads=7,  # at most 7 loads into the table, enforced by the server
        retries=3,  # safe: the chunk ledger makes a retry of a committed chunk a no-op
    ).expand(chunk=stage.output)
