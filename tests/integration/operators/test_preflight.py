"""PreflightCheckOperator through a real Airflow run (dag.test())."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.advice import PreflightReport, Severity
from airflow_bulkload.operators import PreflightCheckOperator
from tests.harness import MotoServer, TestDatabase, register_dag, unique_name
from tests.integration.advice.test_preflight_tables import TABLES


def _run(operator_kwargs: dict[str, Any]) -> tuple[str, Any]:
    """Run a one-task DAG with dag.test(); return the task's state and its XCom report."""
    from airflow.models.xcom import XComModel
    from airflow.sdk import DAG
    from airflow.utils.session import create_session

    dag_id = unique_name("preflight")
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2025, 1, 1)) as dag:
        PreflightCheckOperator(task_id="preflight", **operator_kwargs)
    register_dag(dag)
    dag_run = dag.test(run_after=datetime(2025, 1, 2))
    with create_session() as session:
        ti = next(t for t in dag_run.get_task_instances(session=session))
        key = "return_value" if ti.state == "success" else "report"
        row = session.scalars(
            XComModel.get_many(run_id=dag_run.run_id, key=key, dag_ids=dag_id, task_ids="preflight")
        ).first()
        return str(ti.state), None if row is None else row.value


def _xcom(ti_state: str, value: Any) -> PreflightReport:
    assert value is not None, f"no report in XCom (task {ti_state})"
    data = json.loads(value) if isinstance(value, str) else value
    return PreflightReport.from_dict(data)


def test_operator_reports_manifest_findings_and_plan(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    for statement in TABLES["postgres"]["three_indexes"]:
        pg_db.query(statement)
    chunks = [
        {
            "uri": f"s3://{s3_bucket}/run/part-{i}.csv.gz",
            "checksum": "x",
            "bytes": 5_000_000,
            "rows": 1000,
            "index": i,
        }
        for i in range(60)
    ]
    moto_server.client("s3").put_object(
        Bucket=s3_bucket,
        Key="run/manifest.json",
        Body=json.dumps(
            {
                "input_fingerprint": "fp",
                "file_format": {},
                "columns": None,
                "chunks": chunks,
                "sort_key": None,
                "total_rows": 60000,
                "total_bytes": 300_000_000,
                "created_at": "",
                "version": 1,
            }
        ),
    )
    state, value = _run(
        {
            "table": "public.three_indexes",
            "conn_id": pg_db.conn_id,
            "manifest": f"s3://{s3_bucket}/run/manifest.json",
            "vcpus": 8,
            "parallelism": 16,
        }
    )
    assert state == "success"
    report = _xcom(state, value)
    assert {"secondary_indexes", "chunk_size", "parallelism"} <= report.rules()
    # the author's explicit parallelism is what runs; the advice (7) warns and is kept beside it
    assert report.plan.parallelism == 16 and report.plan.drop_indexes
    assert report.recommended is not None and report.recommended.parallelism == 7
    assert "set by the DAG author" in report.plan.rationale["parallelism"]


def test_operator_fails_on_chosen_severity(airflow_db: Path, mysql_db: TestDatabase) -> None:
    for statement in TABLES["mysql"]["no_pk"]:
        mysql_db.query(statement)
    state, value = _run(
        {"table": "no_pk", "conn_id": mysql_db.conn_id, "vcpus": 4, "fail_on": "warn"}
    )
    assert state == "failed"
    report = _xcom(state, value)
    assert [f.severity for f in report.findings if f.rule == "no_primary_key"] == [Severity.WARN]

    # the same table passes with the default fail_on="error"
    state, _ = _run({"table": "no_pk", "conn_id": mysql_db.conn_id, "vcpus": 4})
    assert state == "success"


def test_operator_refuses_unknown_fail_on() -> None:
    with pytest.raises(ValueError):
        PreflightCheckOperator(task_id="p", table="t", conn_id="c", fail_on="fatal").validate()


def _types_of(parallelism: Any, drop_indexes: Any, index_build_parallelism: Any) -> dict[str, str]:
    values = {
        "parallelism": parallelism,
        "drop_indexes": drop_indexes,
        "index_build_parallelism": index_build_parallelism,
    }
    return {name: type(value).__name__ for name, value in values.items()}


def test_plan_knobs_reach_other_tasks_as_native_values(
    airflow_db: Path, pg_db: TestDatabase
) -> None:
    from airflow.models.xcom import XComModel
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG
    from airflow.utils.session import create_session

    for statement in TABLES["postgres"]["three_indexes"]:
        pg_db.query(statement)
    dag_id = unique_name("plan_values")
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2025, 1, 1)) as dag:
        preflight = PreflightCheckOperator(
            task_id="preflight",
            table="public.three_indexes",
            conn_id=pg_db.conn_id,
            input_bytes=5_000_000,
            vcpus=4,
            fail_on=None,
        )
        PythonOperator(
            task_id="use_plan",
            python_callable=_types_of,
            op_kwargs={
                "parallelism": preflight.planned("parallelism"),
                "drop_indexes": preflight.planned("drop_indexes"),
                "index_build_parallelism": preflight.planned("index_build_parallelism"),
            },
        )
    register_dag(dag)
    dag_run = dag.test(run_after=datetime(2025, 1, 2))
    with create_session() as session:
        row = session.scalars(
            XComModel.get_many(
                run_id=dag_run.run_id, key="return_value", dag_ids=dag_id, task_ids="use_plan"
            )
        ).first()
    assert row is not None, "use_plan did not run"
    value = json.loads(row.value) if isinstance(row.value, str) else row.value
    assert value == {"parallelism": "int", "drop_indexes": "bool", "index_build_parallelism": "int"}


def test_preflight_collects_staging_groups_into_the_manifest_it_plans_from(
    airflow_db: Path, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """The pipeline has no collect_staging task: pre-flight writes the input's manifest from the
    groups' (once, as collect_staging would) and deals its chunks into load batches."""
    from airflow_bulkload.staging.manifest import read_manifest
    from tests.integration.test_hostile_mapped import notes, put, stage_groups

    pg_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text)")
    s3 = moto_server.client("s3")
    for part in range(3):
        put(s3, s3_bucket, f"in/part-{part}.csv", notes(part * 100, part * 100 + 99))
    plan = stage_groups(s3, s3_bucket, f"s3://{s3_bucket}/in/")
    assert len(plan.groups) == 3 and plan.manifest is None
    assert read_manifest(s3, plan.manifest_uri) is None  # nothing collected yet
    groups = [group.to_dict() for group in plan.groups]
    common = {"table": "public.notes", "conn_id": pg_db.conn_id, "staging_groups": groups}

    state, batches = _run(common | {"manifest": plan.manifest_uri, "load_batch_size": "1GB"})
    assert state == "success"
    manifest = read_manifest(s3, plan.manifest_uri, required=True)
    assert manifest.total_rows == 300
    dealt = json.loads(batches) if isinstance(batches, str) else batches
    assert sorted(c["uri"] for batch in dealt for c in batch) == sorted(
        c.uri for c in manifest.chunks
    )
    # a manifest URI the groups do not write is refused, not read or written
    elsewhere = f"s3://{s3_bucket}/other/manifest.json"
    state, _ = _run(common | {"manifest": elsewhere, "load_batch_size": "1GB"})
    assert state == "failed"
    assert read_manifest(s3, elsewhere) is None
