"""Nightly ingest of one day's order files from S3 into Aurora MySQL, server side.

Aurora MySQL reads the staged chunks itself with ``LOAD DATA FROM S3`` (``method="aurora_s3"``):
the data never passes through the Airflow workers. Staging writes those chunks uncompressed,
because Aurora cannot read gzip. Aurora needs an IAM role that can read the staging bucket in the
cluster parameter ``aws_default_s3_role`` and the ``AWS_LOAD_S3_ACCESS`` privilege for the
connection's user (see docs/server-side-s3.md).

On a MySQL server that is not Aurora, set ``BULKLOAD_EXAMPLE_MYSQL_METHOD=client``: the worker
then streams each chunk into ``LOAD DATA LOCAL INFILE``.

Environment variables (defaults in brackets): ``BULKLOAD_EXAMPLE_MYSQL_CONN`` [bulkload_mysql],
``BULKLOAD_EXAMPLE_MYSQL_METHOD`` [aurora_s3], ``BULKLOAD_EXAMPLE_INPUT`` [s3://bulkload-input],
``BULKLOAD_EXAMPLE_STAGING`` [s3://bulkload-staging], ``BULKLOAD_EXAMPLE_CHUNK_SIZE`` [256MB], ``BULKLOAD_EXAMPLE_PARALLELISM`` [auto], ``BULKLOAD_EXAMPLE_RDS_INSTANCE`` [none],
``BULKLOAD_EXAMPLE_MYSQL_TABLE`` [orders].
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.assets import create_asset
from airflow_bulkload.pipeline import bulk_load_table, reload_param

CONN_ID = os.environ.get("BULKLOAD_EXAMPLE_MYSQL_CONN", "bulkload_mysql")
METHOD = os.environ.get("BULKLOAD_EXAMPLE_MYSQL_METHOD", "aurora_s3")
INPUT = os.environ.get("BULKLOAD_EXAMPLE_INPUT", "s3://bulkload-input").rstrip("/")
STAGING = os.environ.get("BULKLOAD_EXAMPLE_STAGING", "s3://bulkload-staging").rstrip("/")
RDS_INSTANCE = os.environ.get("BULKLOAD_EXAMPLE_RDS_INSTANCE") or None
CHUNK_SIZE = os.environ.get("BULKLOAD_EXAMPLE_CHUNK_SIZE", "256MB")
PARALLELISM = os.environ.get("BULKLOAD_EXAMPLE_PARALLELISM", "auto")
TABLE = os.environ.get("BULKLOAD_EXAMPLE_MYSQL_TABLE", "orders")

with DAG(
    dag_id="bulkload_nightly_aurora_mysql",
    description="Nightly S3 -> Aurora MySQL bulk load (LOAD DATA FROM S3)",
    # a run starting at midnight loads the day that just ended: with the data-interval
    # timetable its logical date (ds) is that day, not the day starting (as "@daily" gives)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    # one run at a time per table: a backfill's dates load one after another
    max_active_runs=1,
    user_defined_macros={"input_root": INPUT},
    tags=["bulkload", "mysql", "aurora"],
    params={
        "source": Param(
            None,
            type=["null", "string"],
            pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[A-Za-z0-9!_.*'()/=-]*$",
            description="Override the input (an S3 prefix ending in / or one object). A date "
            "that already loaded from another input is refused unless 'reload' is on.",
        ),
        "reload": reload_param(),
    },
) as dag:
    bulk_load_table(
        table=TABLE,
        conn_id=CONN_ID,
        reload="{{ params.reload }}",
        source="{{ params.source or input_root ~ '/orders/' ~ ds ~ '/' }}",
        staging=STAGING,
        file_format={"format": "csv", "header": True},
        chunk_size=CHUNK_SIZE,
        parallelism=int(PARALLELISM) if PARALLELISM.isdigit() else "auto",
        method=METHOD,
        rds_instance=RDS_INSTANCE,
        outlets=[create_asset(conn_id=CONN_ID, table=TABLE)],
    )
