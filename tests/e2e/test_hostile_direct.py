"""Hostile whole-pipeline regression tests for direct chunks (issue 21): ``bulk_load_table``
under ``dag.test()`` on PostgreSQL, bulk mode off. Each FAILS on the code as it was when
written and passes once the break is fixed.
"""

from __future__ import annotations

import gzip
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.harness import MotoServer, TestDatabase, run_dag_source

DAG_SOURCE = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table

with DAG({dag_id!r}, schedule="@daily", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    bulk_load_table(
        table={table!r},
        conn_id={conn_id!r},
        source="s3://{bucket}/in/{{{{ ds }}}}/",
        staging="s3://{bucket}/staging",
        file_format={{"format": "csv", "header": True}},
        chunk_size={chunk_size!r},
        parallelism=2,
        bulk_mode="off",
        load_retries=0,
        **{extra!r},
    )
"""


def _run(
    db: TestDatabase,
    bucket: str,
    tmp_path: Path,
    table: str,
    *,
    chunk_size: str = "4KB",
    extra: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, str]]:
    from pendulum import datetime

    dag_id = f"hostile_direct_{uuid.uuid4().hex[:8]}"
    source = DAG_SOURCE.format(
        dag_id=dag_id,
        table=table,
        conn_id=db.conn_id,
        bucket=bucket,
        chunk_size=chunk_size,
        extra=extra or {},
    )
    run = run_dag_source(source, dag_id, tmp_path / "dags", logical_date=datetime(2026, 11, 21))
    return run, {ti.task_id.rsplit(".", 1)[-1]: str(ti.state) for ti in run.get_task_instances()}


def test_an_input_of_more_gzip_parts_than_max_map_length_loads(
    pg_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the user did: loaded a Spark export, many small gzip parts (here 6 parts of 10
    rows with ``core.max_map_length`` = 4, standing for 2,000 parts and the default 1024).

    What happened: direct planning makes one chunk per gzip object and ignores
    ``max_map_length`` (staging checks it, and merges small inputs into chunk_size chunks):
    the stage task fails with Airflow's ``unmappable_return_value_length: pushed value is too
    large to map as a downstream's dependency``; chunk_size and grow_chunk_size cannot help.

    What should happen: the run is green and the table holds the 60 rows, as with the staged
    path (which merges the small parts into chunk_size chunks: one chunk here).
    """
    from airflow.utils.state import DagRunState

    monkeypatch.setenv("AIRFLOW__CORE__MAX_MAP_LENGTH", "4")
    pg_db.query("CREATE TABLE parts (id int PRIMARY KEY, note text)")
    s3 = moto_server.client("s3")
    for part in range(6):
        body = "id,note\n" + "".join(f"{part * 10 + i},part {part}\n" for i in range(10))
        s3.put_object(
            Bucket=s3_bucket,
            Key=f"in/2026-11-21/part-{part:05d}.csv.gz",
            Body=gzip.compress(body.encode()),
        )

    run, states = _run(pg_db, s3_bucket, tmp_path, "public.parts")

    assert run.state == DagRunState.SUCCESS, states
    assert pg_db.query("SELECT count(*), sum(id) FROM parts") == [(60, sum(range(60)))]


@pytest.mark.parametrize("knob", [{"quoted_newlines": True}, {"direct": False}])
def test_bulk_load_table_takes_the_knobs_the_errors_and_docs_name(
    pg_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
    knob: dict[str, Any],
) -> None:
    """What the user did: their pipeline (bulk_load_table, the documented entry point) failed
    on a customers file whose quoted addresses hold line ends: ``... end inside a quoted
    value ... run the load with quoted_newlines=True``. docs/how-it-works.md also offers
    ``direct=False`` (keep a staged copy). They added the knob to bulk_load_table.

    What happened: ``TypeError: bulk_load_table() got an unexpected keyword argument``:
    neither ``quoted_newlines`` nor ``direct`` reaches StageToS3Operator from the pipeline,
    so a pipeline user cannot follow the error's advice, nor fall back to staging.

    What should happen: bulk_load_table accepts the knob and the run loads the 199
    customers exactly.
    """
    from airflow.utils.state import DagRunState

    pg_db.query("CREATE TABLE customers (name text PRIMARY KEY, address text, country text)")
    rows = [
        (
            f"Customer number {i:04d} of the shop",
            f"{i} Main Street Apartment {i} Building B\nSpringfield {i}, IL, 6{i:04d}",
            "US",
        )
        for i in range(1, 200)
    ]
    body = "name,address,country\n" + "".join(f'{a},"{b}",{c}\n' for a, b, c in rows)
    moto_server.client("s3").put_object(
        Bucket=s3_bucket, Key="in/2026-11-21/customers.csv", Body=body.encode()
    )

    run, states = _run(pg_db, s3_bucket, tmp_path, "public.customers", chunk_size="1KB", extra=knob)

    assert run.state == DagRunState.SUCCESS, states
    assert sorted(pg_db.query("SELECT name, address, country FROM customers")) == rows


@pytest.mark.parametrize("order", [False, "presorted"], ids=["unsorted", "presorted"])
def test_a_mysql_pipeline_that_does_not_sort_loads_as_stored_exactly(
    mysql_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    airflow_db: Path,
    tmp_path: Path,
    order: Any,
) -> None:
    """MySQL without a sort (``sort_by_primary_key=False`` or ``"presorted"``): the whole
    pipeline loads the objects as stored, writes no chunk under the staging prefix, and the
    table holds what CSV says: NULL for an unquoted empty field, an empty string for a quoted
    one, the text NULL for the word, no CR from CRLF line ends."""
    from airflow.utils.state import DagRunState

    mysql_db.query("CREATE TABLE notes (id int PRIMARY KEY, note text, tag varchar(8))")
    s3 = moto_server.client("s3")
    rows = []
    for part in range(3):
        lines = ["id,note,tag"]
        for i in range(part * 300, part * 300 + 300):
            note = ["", '""', "NULL", f'"n {i}, ""q"""', f"n {i}"][i % 5]
            lines.append(f"{i},{note},{'t' if i % 2 else ''}")
            rows.append(
                (
                    i,
                    [None, "", "NULL", f'n {i}, "q"', f"n {i}"][i % 5],
                    "t" if i % 2 else None,
                )
            )
        body = ("\r\n" if part == 1 else "\n").join(lines) + "\n"
        data = gzip.compress(body.encode()) if part == 2 else body.encode()
        name = f"part-{part:05d}.csv" + (".gz" if part == 2 else "")
        s3.put_object(Bucket=s3_bucket, Key=f"in/2026-11-21/{name}", Body=data)

    run, states = _run(mysql_db, s3_bucket, tmp_path, "notes", extra={"sort_by_primary_key": order})

    assert run.state == DagRunState.SUCCESS, states
    assert mysql_db.query("SELECT id, note, tag FROM notes ORDER BY id") == rows
    listed = s3.list_objects_v2(Bucket=s3_bucket, Prefix="staging/")
    written = [o["Key"].rsplit("/", 1)[-1] for o in listed.get("Contents", [])]
    assert written == ["manifest.json"], written
