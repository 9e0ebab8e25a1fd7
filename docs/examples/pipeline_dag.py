import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.pipeline import bulk_load_table

with DAG(
    dag_id="bulkload_events",
    # the midnight run's ds is the day that ended (see the quick start)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    bulk_load_table(
        table="public.events",
        conn_id="bulkload_postgres",
        source="s3://my-input/events/{{ ds }}/",
        staging="s3://my-staging/bulkload",
        file_format={"format": "csv", "header": True},
    )
