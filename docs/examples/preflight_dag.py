"""Pre-flight on its own: advice about a table and an RDS instance before anything is staged."""

import pendulum
from airflow.sdk import DAG

from airflow_bulkload.operators import PreflightCheckOperator

with DAG(
    dag_id="bulkload_preflight",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
) as dag:
    PreflightCheckOperator(
        task_id="preflight",
        table="public.events",
        conn_id="bulkload_postgres",
        db_instance_identifier="prod-pg",  # reads class (vCPUs), storage, maintenance window
        input_bytes=40_000_000_000,  # an estimate, until a manifest exists
        method="rds_s3",
        fail_on="warn",  # fail the task on any warning or error ...
        ignore_rules=["triggers"],  # ... except findings of these rule ids
    )
