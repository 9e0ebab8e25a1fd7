"""Fixtures for whole-DAG runs: an example load per engine on the real servers and moto."""

from __future__ import annotations

from pathlib import Path

import pytest

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
