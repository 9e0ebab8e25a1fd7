"""Server-side loads: the database reads the chunks from S3 itself, not the worker."""

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.operators import LoadChunkOperator, StageToS3Operator

with DAG(
    dag_id="bulkload_server_side",
    # the midnight run's ds is the day that ended (see the quick start)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    # RDS / Aurora PostgreSQL: aws_s3.table_import_from_s3 reads gzip chunks
    # (staging sets Content-Encoding: gzip on them).
    pg_chunks = StageToS3Operator(
        task_id="stage_pg",
        source="s3://my-input/events/{{ ds }}/",
        staging="s3://my-staging/bulkload",
        table="public.events",
        file_format={"format": "csv", "header": True},
        load_method="rds_s3",
    )
    LoadChunkOperator.partial(
        task_id="load_pg", table="public.events", conn_id="bulkload_postgres", method="rds_s3"
    ).expand(chunk=pg_chunks.output)

    # Aurora MySQL: LOAD DATA FROM S3 cannot read gzip, so load_method="aurora_s3" stages the
    # chunks uncompressed.
    mysql_chunks = StageToS3Operator(
        task_id="stage_mysql",
        source="s3://my-input/orders/{{ ds }}/",
        staging="s3://my-staging/bulkload",
        table="shop.orders",
        file_format={"format": "csv", "header": True},
        load_method="aurora_s3",
    )
    LoadChunkOperator.partial(
        task_id="load_mysql", table="shop.orders", conn_id="bulkload_mysql", method="aurora_s3"
    ).expand(chunk=mysql_chunks.output)
