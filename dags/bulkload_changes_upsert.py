"""Nightly change feed: the day's new and changed customers, merged into the table by key.

The upstream system writes every customer created or changed during the day to
``s3://<input bucket>/customers/<ds>/`` (one row per customer, the latest version).
``mode="upsert"`` loads the files in parallel into a work table, then merges it into the target
in batches: a row whose primary key is in the table replaces that row, the others are added, and
columns the files do not carry keep their values. Every input row is checked in the table
afterwards; a retry or a re-run merges to the same table. ``upsert_keys`` would merge on another
unique key (NOT NULL columns) instead of the primary key.

Works on MySQL and PostgreSQL alike: the engine follows the connection. An input that holds a key
twice is refused before anything is merged (which version is the latest is the export's call).

Environment variables (defaults in brackets): ``BULKLOAD_EXAMPLE_CHANGES_CONN`` [bulkload_mysql],
``BULKLOAD_EXAMPLE_CHANGES_TABLE`` [customers], ``BULKLOAD_EXAMPLE_CHANGES_FOLDER`` [customers],
``BULKLOAD_EXAMPLE_INPUT`` [s3://bulkload-input], ``BULKLOAD_EXAMPLE_STAGING``
[s3://bulkload-staging], ``BULKLOAD_EXAMPLE_CHUNK_SIZE`` [256MB], ``BULKLOAD_EXAMPLE_BULK_MODE``
[auto].
"""

from __future__ import annotations

import os

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.assets import create_asset
from airflow_bulkload.pipeline import bulk_load_table

CONN_ID = os.environ.get("BULKLOAD_EXAMPLE_CHANGES_CONN", "bulkload_mysql")
TABLE = os.environ.get("BULKLOAD_EXAMPLE_CHANGES_TABLE", "customers")
FOLDER = os.environ.get("BULKLOAD_EXAMPLE_CHANGES_FOLDER", "customers")
INPUT = os.environ.get("BULKLOAD_EXAMPLE_INPUT", "s3://bulkload-input").rstrip("/")
STAGING = os.environ.get("BULKLOAD_EXAMPLE_STAGING", "s3://bulkload-staging").rstrip("/")
CHUNK_SIZE = os.environ.get("BULKLOAD_EXAMPLE_CHUNK_SIZE", "256MB")
BULK_MODE = os.environ.get("BULKLOAD_EXAMPLE_BULK_MODE", "auto")

with DAG(
    dag_id="bulkload_changes_upsert",
    description="Nightly change feed -> merged into the table by key (mode='upsert')",
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    # merges apply in date order: one run at a time
    max_active_runs=1,
    user_defined_macros={"input_root": INPUT, "folder": FOLDER},
    tags=["bulkload", "upsert"],
) as dag:
    bulk_load_table(
        table=TABLE,
        conn_id=CONN_ID,
        mode="upsert",
        source="{{ input_root }}/{{ folder }}/{{ ds }}/",
        staging=STAGING,
        file_format={"format": "csv", "header": True},
        chunk_size=CHUNK_SIZE,
        bulk_mode=BULK_MODE,
        outlets=[create_asset(conn_id=CONN_ID, table=TABLE)],
    )
