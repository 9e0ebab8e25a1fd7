"""Shared fixtures. See tests/harness.py for what each one talks to."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.harness import configure_process_environment

AIRFLOW_HOME = configure_process_environment()

import pytest  # noqa: E402

from tests.harness import (  # noqa: E402
    MotoServer,
    ServerSettings,
    TestDatabase,
    check_server,
    free_port,
    fresh_database,
    install_aws_s3_stand_in,
    unavailable,
    unique_name,
)


@pytest.fixture(scope="session")
def pg_server() -> ServerSettings:
    return check_server("postgres")


@pytest.fixture(scope="session")
def mysql_server() -> ServerSettings:
    return check_server("mysql")


@pytest.fixture
def pg_db(pg_server: ServerSettings) -> Iterator[TestDatabase]:
    """A fresh PostgreSQL database; ``pg_db.conn_id`` is an Airflow connection id for it."""
    with fresh_database("postgres", pg_server) as db:
        yield db


@pytest.fixture
def mysql_db(mysql_server: ServerSettings) -> Iterator[TestDatabase]:
    """A fresh MariaDB database; ``mysql_db.conn_id`` is an Airflow connection id for it."""
    with fresh_database("mysql", mysql_server) as db:
        yield db


@pytest.fixture(params=["postgres", "mysql"])
def any_db(request: pytest.FixtureRequest) -> Iterator[TestDatabase]:
    """Runs the test once per engine."""
    server = check_server(request.param)
    with fresh_database(request.param, server) as db:
        yield db


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    """A moto server on a free 127.0.0.1 port; ``aws_default`` points at it for the session."""
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    try:
        server.start()
    except Exception as exc:
        unavailable(f"moto server could not start: {exc}")
    moto = MotoServer(endpoint_url=f"http://127.0.0.1:{port}")
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = moto.airflow_conn()
    os.environ["BULKLOAD_TEST_S3_ENDPOINT"] = moto.endpoint_url
    try:
        yield moto
    finally:
        os.environ.pop("AIRFLOW_CONN_AWS_DEFAULT", None)
        server.stop()


@pytest.fixture
def s3_bucket(moto_server: MotoServer) -> str:
    """A fresh, empty bucket on the moto server."""
    name = unique_name("bl-test").replace("_", "-")
    moto_server.client("s3").create_bucket(Bucket=name)
    return name


@pytest.fixture
def pg_aws_s3(pg_db: TestDatabase, moto_server: MotoServer) -> TestDatabase:
    """``pg_db`` with the test stand-in for RDS's ``aws_s3`` extension, reading from moto."""
    install_aws_s3_stand_in(pg_db, moto_server)
    return pg_db


@pytest.fixture
def aws_in_process() -> Iterator[Any]:
    """moto in-process (mock_aws) for AWS calls made by this process only (RDS, unit-level S3)."""
    from moto import mock_aws

    saved = os.environ.pop("AIRFLOW_CONN_AWS_DEFAULT", None)
    os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = (
        '{"conn_type": "aws", "extra": {"region_name": "us-east-1"}}'
    )
    try:
        with mock_aws() as mock:
            yield mock
    finally:
        if saved is None:
            os.environ.pop("AIRFLOW_CONN_AWS_DEFAULT", None)
        else:
            os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = saved


@pytest.fixture
def rds_model(monkeypatch: pytest.MonkeyPatch) -> Any:
    """moto's RDS plus documented apply semantics (pending-reboot, applying, in-use groups);
    see tests/support/rds_model.py. Combine with ``aws_in_process`` or ``moto_server``."""
    from tests.support.rds_model import RdsApplyModel

    return RdsApplyModel(monkeypatch).install()


@pytest.fixture(scope="session")
def airflow_db() -> Path:
    """Airflow's SQLite metadata database, migrated once per session (dag.test() needs it)."""
    result = subprocess.run(
        [sys.executable, "-m", "airflow", "db", "migrate"],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(f"airflow db migrate failed:\n{result.stdout}\n{result.stderr}")
    return AIRFLOW_HOME


#: integration modules that change server-wide settings (bulk mode) or compare them with a
#: snapshot; every e2e test does too (the example DAGs enter bulk mode)
SERVER_SETTINGS_MODULES = frozenset(
    {
        "test_bulk_mode_server.py",
        "test_bulk_mode_operators.py",
        "test_teardowns.py",
        "test_connection_extras.py",
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark tests by folder so `-m unit` / `-m integration` / `-m e2e` select them.

    The tests that change or compare the servers' own settings are also marked
    ``server_settings``: ``make test`` runs them in one pytest process and the rest (each in a
    database of its own) in a second process beside it (scripts/run_tests.sh).
    """
    for item in items:
        path = Path(str(item.fspath))
        for marker in ("unit", "integration", "e2e"):
            if marker in path.parts:
                item.add_marker(getattr(pytest.mark, marker))
        if "e2e" in path.parts or path.name in SERVER_SETTINGS_MODULES:
            item.add_marker(pytest.mark.server_settings)
