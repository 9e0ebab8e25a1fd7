"""Nightly ingest of one day's event files from S3 into PostgreSQL (RDS, Aurora or your own).

Each night loads ``s3://<input bucket>/events/<ds>/`` into ``public.events``. Backfills work
(``catchup`` via the CLI or the UI's backfill): every logical date stages under its own prefix and
its chunks are loaded exactly once. A run triggered from the UI may override the input prefix;
the value is validated here and never reaches SQL.

Configure with environment variables (defaults in brackets):
``BULKLOAD_EXAMPLE_PG_CONN`` [bulkload_postgres], ``BULKLOAD_EXAMPLE_INPUT`` [s3://bulkload-input],
``BULKLOAD_EXAMPLE_STAGING`` [s3://bulkload-staging], ``BULKLOAD_EXAMPLE_CHUNK_SIZE`` [256MB], ``BULKLOAD_EXAMPLE_PARALLELISM`` [auto], ``BULKLOAD_EXAMPLE_RDS_INSTANCE`` [none:
a self-managed server], ``BULKLOAD_EXAMPLE_PG_TABLE`` [public.events], ``BULKLOAD_EXAMPLE_BULK_MODE``
[auto; ``off`` leaves the server's settings alone].
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG, Param
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.assets import create_asset
from airflow_bulkload.pipeline import bulk_load_table, reload_param

CONN_ID = os.environ.get("BULKLOAD_EXAMPLE_PG_CONN", "bulkload_postgres")
INPUT = os.environ.get("BULKLOAD_EXAMPLE_INPUT", "s3://bulkload-input").rstrip("/")
STAGING = os.environ.get("BULKLOAD_EXAMPLE_STAGING", "s3://bulkload-staging").rstrip("/")
RDS_INSTANCE = os.environ.get("BULKLOAD_EXAMPLE_RDS_INSTANCE") or None
CHUNK_SIZE = os.environ.get("BULKLOAD_EXAMPLE_CHUNK_SIZE", "256MB")
PARALLELISM = os.environ.get("BULKLOAD_EXAMPLE_PARALLELISM", "auto")
TABLE = os.environ.get("BULKLOAD_EXAMPLE_PG_TABLE", "public.events")
BULK_MODE = os.environ.get("BULKLOAD_EXAMPLE_BULK_MODE", "auto")

with DAG(
    dag_id="bulkload_nightly_postgres",
    description="Nightly S3 -> PostgreSQL bulk load of the day's event files",
    # a run starting at midnight loads the day that just ended: with the data-interval
    # timetable its logical date (ds) is that day, not the day starting (as "@daily" gives)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    # one run at a time per table: a backfill's dates load one after another
    max_active_runs=1,
    user_defined_macros={"input_root": INPUT},
    tags=["bulkload", "postgres"],
    params={
        "source": Param(
            None,
            type=["null", "string"],
            pattern=r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/[A-Za-z0-9!_.*'()/=-]*$",
            description="Override the input (an S3 prefix ending in / or one object); "
            "default: the logical date's folder. A date that already loaded from another "
            "input is refused unless 'reload' is on.",
        ),
        "reload": reload_param(),
    },
) as dag:
    bulk_load_table(
        table=TABLE,
        conn_id=CONN_ID,
        reload="{{ params.reload }}",
        source="{{ params.source or input_root ~ '/events/' ~ ds ~ '/' }}",
        staging=STAGING,
        file_format={"format": "csv", "header": True},
        chunk_size=CHUNK_SIZE,
        parallelism=int(PARALLELISM) if PARALLELISM.isdigit() else "auto",
        rds_instance=RDS_INSTANCE,
        bulk_mode=BULK_MODE,
        outlets=[create_asset(conn_id=CONN_ID, table=TABLE)],
    )
