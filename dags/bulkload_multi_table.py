"""Several tables in one DAG: one bulk_load_table() group per table, loading side by side.

Bulk-mode leases are reference-counted per server, so the first group to finish does not take
the server out of bulk mode under the other: the last one out restores the settings.

Environment variables: ``BULKLOAD_EXAMPLE_PG_CONN`` [bulkload_postgres],
``BULKLOAD_EXAMPLE_INPUT`` [s3://bulkload-input], ``BULKLOAD_EXAMPLE_STAGING``
[s3://bulkload-staging].
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.assets import create_asset
from airflow_bulkload.pipeline import bulk_load_table, reload_param

CONN_ID = os.environ.get("BULKLOAD_EXAMPLE_PG_CONN", "bulkload_postgres")
INPUT = os.environ.get("BULKLOAD_EXAMPLE_INPUT", "s3://bulkload-input").rstrip("/")
STAGING = os.environ.get("BULKLOAD_EXAMPLE_STAGING", "s3://bulkload-staging").rstrip("/")
TABLES = {"public.customers": "customers", "public.orders": "orders"}

with DAG(
    dag_id="bulkload_multi_table",
    description="Nightly S3 -> PostgreSQL load of several tables",
    # a run starting at midnight loads the day that just ended: with the data-interval
    # timetable its logical date (ds) is that day, not the day starting (as "@daily" gives)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["bulkload", "postgres"],
    params={
        "reload": reload_param(),
    },
) as dag:
    for table, folder in TABLES.items():
        bulk_load_table(
            table=table,
            conn_id=CONN_ID,
            source=f"{INPUT}/{folder}/" + "{{ ds }}/",
            reload="{{ params.reload }}",
            staging=STAGING,
            file_format={"format": "csv", "header": True},
            outlets=[create_asset(conn_id=CONN_ID, table=table)],
        )
