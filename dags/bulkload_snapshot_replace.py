"""Nightly full snapshot of a catalogue table: the day's export replaces the table at once.

The upstream system exports the whole ``products`` table every night to
``s3://<input bucket>/products/<ds>/``. ``mode="replace"`` loads it into a work table built from
the target's definition, with its indexes dropped for the load and rebuilt after (the fastest
path there is), then swaps it in: queries see yesterday's catalogue until the swap and today's
after it, never a half-loaded table. A failed run leaves yesterday's catalogue as it was.

The table may not have views, foreign keys or triggers bound to it (pre-flight refuses: a swap
would leave them on the old table; see docs/modes.md). Works on PostgreSQL and MySQL alike: the
engine follows the connection.

Environment variables (defaults in brackets): ``BULKLOAD_EXAMPLE_SNAPSHOT_CONN``
[bulkload_postgres], ``BULKLOAD_EXAMPLE_SNAPSHOT_TABLE`` [public.products],
``BULKLOAD_EXAMPLE_SNAPSHOT_FOLDER`` [products], ``BULKLOAD_EXAMPLE_INPUT`` [s3://bulkload-input],
``BULKLOAD_EXAMPLE_STAGING`` [s3://bulkload-staging], ``BULKLOAD_EXAMPLE_CHUNK_SIZE`` [256MB],
``BULKLOAD_EXAMPLE_BULK_MODE`` [auto].
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.assets import create_asset
from airflow_bulkload.pipeline import bulk_load_table

CONN_ID = os.environ.get("BULKLOAD_EXAMPLE_SNAPSHOT_CONN", "bulkload_postgres")
TABLE = os.environ.get("BULKLOAD_EXAMPLE_SNAPSHOT_TABLE", "public.products")
FOLDER = os.environ.get("BULKLOAD_EXAMPLE_SNAPSHOT_FOLDER", "products")
INPUT = os.environ.get("BULKLOAD_EXAMPLE_INPUT", "s3://bulkload-input").rstrip("/")
STAGING = os.environ.get("BULKLOAD_EXAMPLE_STAGING", "s3://bulkload-staging").rstrip("/")
CHUNK_SIZE = os.environ.get("BULKLOAD_EXAMPLE_CHUNK_SIZE", "256MB")
BULK_MODE = os.environ.get("BULKLOAD_EXAMPLE_BULK_MODE", "auto")

with DAG(
    dag_id="bulkload_snapshot_replace",
    description="Nightly full export -> the table, swapped in at once (mode='replace')",
    # the run at midnight loads the snapshot of the day that ended (its ds)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    user_defined_macros={"input_root": INPUT, "folder": FOLDER},
    tags=["bulkload", "replace"],
) as dag:
    bulk_load_table(
        table=TABLE,
        conn_id=CONN_ID,
        mode="replace",
        source="{{ input_root }}/{{ folder }}/{{ ds }}/",
        staging=STAGING,
        file_format={"format": "csv", "header": True},
        chunk_size=CHUNK_SIZE,
        bulk_mode=BULK_MODE,
        # an empty export would make an empty table: wait for it instead (at most 6 hours)
        wait_for_input=pendulum.duration(hours=6),
        outlets=[create_asset(conn_id=CONN_ID, table=TABLE)],
    )
