"""Fixtures for whole-DAG runs: an example load per engine on the real servers and moto."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.airflow_cluster import AirflowCluster
from tests.e2e.example_load import ExampleLoad, install_kill_points
from tests.harness import MotoServer, TestDatabase, unique_name


@pytest.fixture(scope="session")
def e2e_airflow_home(airflow_db: Path) -> Path:
    install_kill_points(airflow_db)
    return airflow_db


def _example(db: TestDatabase, moto: MotoServer, workdir: Path) -> ExampleLoad:
    bucket = unique_name("bl-e2e").replace("_", "-")
    example = ExampleLoad(
        db=db,
        moto=moto,
        workdir=workdir,
        input_bucket=bucket + "-in",
        staging_bucket=bucket + "-stage",
    )
    example.create_table()
    return example


@pytest.fixture
def pg_example(
    pg_db: TestDatabase, moto_server: MotoServer, tmp_path: Path, e2e_airflow_home: Path
) -> ExampleLoad:
    """The PostgreSQL example DAG's table (PK, two indexes, fillfactor) in a fresh database."""
    return _example(pg_db, moto_server, tmp_path)


@pytest.fixture
def mysql_example(
    mysql_db: TestDatabase, moto_server: MotoServer, tmp_path: Path, e2e_airflow_home: Path
) -> ExampleLoad:
    """The MySQL example DAG's table (PK, two indexes) in a fresh MariaDB database."""
    return _example(mysql_db, moto_server, tmp_path)


#: how many chunk loads the example DAG runs at once under ``scheduled_example``
SCHEDULED_PARALLELISM = 2


@pytest.fixture
def scheduled_example(
    pg_db: TestDatabase, moto_server: MotoServer, tmp_path: Path
) -> Iterator[tuple[ExampleLoad, AirflowCluster]]:
    """The PostgreSQL example with small chunks (2 input files, 96KB chunks) and parallelism 2,
    plus a running api-server, scheduler and dag-processor with that example's settings, on an
    Airflow home and SQLite database of their own (not the session's). Killed afterwards."""
    example = _example(pg_db, moto_server, tmp_path)
    example.files = 2
    example.chunk_size = "96KB"
    env = example.env() | {"BULKLOAD_EXAMPLE_PARALLELISM": str(SCHEDULED_PARALLELISM)}
    cluster = AirflowCluster(tmp_path / "cluster", env)
    try:
        cluster.start()
        yield example, cluster
    finally:
        cluster.stop()
