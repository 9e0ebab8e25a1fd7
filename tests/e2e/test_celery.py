"""The pipeline on a CeleryExecutor deployment: two workers, Redis, PostgreSQL metadata.

One deployment (``tests/e2e/celery_cluster.py``) serves the module; each test writes a DAG of its
own (``@once``, unpaused: it runs as soon as the dag-processor has parsed it), loads fresh tables
in fresh databases and checks the end state as the other e2e tests do (``ExampleLoad``): rows and
checksum equal the input, indexes, table options and server settings as before, every staged chunk
in the ledger once, no bulk-mode lease left.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.celery_cluster import CeleryCluster, check_redis
from tests.e2e.example_load import ExampleLoad
from tests.harness import MotoServer, ServerSettings, TestDatabase, unique_name

pytestmark = pytest.mark.celery

DS = "2026-01-01"  # the @once run's logical date
RUN_TIMEOUT = 240
DAG_SOURCE = """
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table

with DAG({dag_id!r}, schedule="@once", start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    for kwargs in {tables!r}:
        bulk_load_table(
            file_format={{"format": "csv", "header": True}},
            load_retry_delay=timedelta(seconds=1),
            **kwargs,
        )
"""


@pytest.fixture(scope="module")
def celery_cluster(
    tmp_path_factory: pytest.TempPathFactory, pg_server: ServerSettings, moto_server: MotoServer
) -> Iterator[CeleryCluster]:
    """The deployment, started once for the module (about 45 s on two cores)."""
    check_redis()
    workdir = tmp_path_factory.mktemp("celery")
    (workdir / "dags").mkdir()
    cluster = CeleryCluster(workdir, dict(os.environ), pg=pg_server, dags_folder=workdir / "dags")
    try:
        cluster.start()
        cluster.wait_for_api()
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster(celery_cluster: CeleryCluster) -> CeleryCluster:
    """The deployment with both workers up (a test before may have killed one)."""
    missing = [name for name in celery_cluster.worker_names if name not in celery_cluster.procs]
    for name in missing:
        celery_cluster.start_worker(name)
    for name in missing:
        celery_cluster.wait_for_worker(name)
    return celery_cluster


def _example(
    db: TestDatabase, moto: MotoServer, workdir: Path, dag_id: str, **kw: Any
) -> ExampleLoad:
    bucket = unique_name("bl-celery").replace("_", "-")
    example = ExampleLoad(
        db=db,
        moto=moto,
        workdir=workdir / db.engine,
        input_bucket=bucket + "-in",
        staging_bucket=bucket + "-stage",
        dag=dag_id,
        **kw,
    )
    example.create_table()
    example.add_input(DS)
    return example


def _deploy(
    cluster: CeleryCluster, dag_id: str, loads: list[tuple[ExampleLoad, dict[str, Any]]]
) -> None:
    """Write a DAG loading each example's input into its table (with more arguments per table)
    and add their connections; the scheduler runs it once the dag-processor has parsed it."""
    tables = []
    for example, extra in loads:
        cluster.add_connection(example.db.conn_id, example.db.airflow_conn)
        tables.append(
            {
                "table": example.table,
                "conn_id": example.db.conn_id,
                "source": f"s3://{example.input_bucket}/{example.input_folder}/" + "{{ ds }}/",
                "staging": f"s3://{example.staging_bucket}",
                "chunk_size": example.chunk_size,
                "method": "client",
                **extra,
            }
        )
    source = DAG_SOURCE.format(dag_id=dag_id, tables=tables)
    (cluster.dags_folder / f"{dag_id}.py").write_text(source)


def _wait_for_run(cluster: CeleryCluster, dag_id: str, timeout: float = RUN_TIMEOUT) -> str:
    def ended() -> str | None:
        rows = cluster.query("SELECT run_id, state FROM dag_run WHERE dag_id = ?", (dag_id,))
        if rows and rows[0][1] == "failed":
            raise AssertionError(f"{dag_id} failed:\n{cluster.diagnostics(dag_id)}")
        return rows[0][0] if rows and rows[0][1] == "success" else None

    started = time.monotonic()
    run_id = cluster.wait_for(f"the run of {dag_id}", ended, timeout, interval=1)
    print(f"{dag_id}: the run took {time.monotonic() - started:.0f} s after deploying")
    return str(run_id)


def _load_instances(cluster: CeleryCluster, dag_id: str) -> list[tuple[Any, ...]]:
    """(task_id, map_index, state, hostname, try_number) of the run's mapped loads."""
    return cluster.query(
        "SELECT task_id, map_index, state, hostname, try_number FROM task_instance"
        " WHERE dag_id = ? AND task_id LIKE '%.load' AND map_index >= 0"
        " ORDER BY task_id, map_index",
        (dag_id,),
    )


def test_a_two_engine_load_spreads_its_chunks_over_both_workers_and_ends_exact(
    cluster: CeleryCluster,
    pg_db: TestDatabase,
    mysql_db: TestDatabase,
    moto_server: MotoServer,
    tmp_path: Path,
) -> None:
    dag_id = unique_name("celery_two_tables")
    examples = [
        _example(db, moto_server, tmp_path, dag_id, rows=9_000, files=2, chunk_size="48KB")
        for db in (pg_db, mysql_db)
    ]
    before = [example.snapshot() for example in examples]
    _deploy(cluster, dag_id, [(example, {"parallelism": 2}) for example in examples])
    _wait_for_run(cluster, dag_id)

    for example, snapshot in zip(examples, before, strict=True):
        example.assert_loaded_once(snapshot)  # rows, checksum, catalog, settings, ledger, leases
        assert len(example.ledger()) >= 8, example.ledger()

    loads = _load_instances(cluster, dag_id)
    by_table: dict[str, set[str]] = {}
    for task_id, _, state, hostname, _ in loads:
        assert state == "success", loads
        by_table.setdefault(task_id, set()).add(hostname)
    print(f"load tasks per table and worker: {by_table}")
    assert len(loads) == sum(len(e.ledger()) for e in examples)
    assert set().union(*by_table.values()) == {cluster.hostname(w) for w in cluster.worker_names}
