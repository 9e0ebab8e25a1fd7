"""bulk_load_table into Aurora MySQL with the server-side method: no data through the workers."""

import pendulum
from airflow.sdk import DAG
from airflow.timetables.interval import CronDataIntervalTimetable

from airflow_bulkload.pipeline import bulk_load_table

with DAG(
    dag_id="bulkload_orders_aurora",
    # the midnight run's ds is the day that ended (see the quick start)
    schedule=CronDataIntervalTimetable("@daily", timezone="UTC"),
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
) as dag:
    bulk_load_table(
        table="shop.orders",
        conn_id="bulkload_mysql",
        source="s3://my-input/orders/{{ ds }}/",
        staging="s3://my-staging/bulkload",
        file_format={"format": "csv", "header": True},
        method="aurora_s3",  # staged uncompressed: Aurora cannot read gzip
        rds_cluster="orders-cluster",  # pre-flight reads the writer's class and groups
        rds_instance="orders-cluster-writer",  # bulk mode changes its DB parameter group
        fail_on="error",
    )
