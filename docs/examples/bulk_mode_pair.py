"""Bulk mode around a load: enter as a setup task, exit as its teardown (runs whatever failed)."""

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.operators import (
    BulkModeTarget,
    EnterBulkModeOperator,
    ExitBulkModeOperator,
    LoadChunkOperator,
    StageToS3Operator,
)

TABLE = "public.events"
# Give enter and exit the same arguments: the lease is keyed by (DAG id, table, logical date).
BULK_MODE = {
    "table": TABLE,
    "target": BulkModeTarget(db_instance_identifier="prod-pg"),
    "deferrable": True,
}

with DAG(
    dag_id="bulkload_with_bulk_mode",
    # the midnight run's ds is the day that ended (see the quick start)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    stage = StageToS3Operator(
        task_id="stage",
        source="s3://my-input/events/{{ ds }}/",
        staging="s3://my-staging/bulkload",
        table=TABLE,
        file_format={"format": "csv", "header": True},
    )
    enter = EnterBulkModeOperator(task_id="enter_bulk_mode", **BULK_MODE)
    load = LoadChunkOperator.partial(
        task_id="load", table=TABLE, conn_id="bulkload_postgres"
    ).expand(chunk=stage.output)
    exit_ = ExitBulkModeOperator(task_id="exit_bulk_mode", **BULK_MODE)

    stage >> enter.as_setup() >> load >> exit_.as_teardown(setups=enter)
