"""Real-server test harness: PostgreSQL, MariaDB, a moto S3/RDS server and a throwaway Airflow home.

Imported by ``tests/conftest.py`` before anything imports Airflow, so the environment it sets
(AIRFLOW_HOME, dags folder, fake AWS credentials) is what Airflow reads at import time.
Connection settings can be pointed elsewhere with the ``BULKLOAD_TEST_*`` variables.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
IN_CI = os.environ.get("CI", "").lower() == "true"


def configure_process_environment() -> Path:
    """Point Airflow at a throwaway home and AWS SDKs at fake credentials. Idempotent."""
    home = os.environ.get("BULKLOAD_TEST_AIRFLOW_HOME")
    if not home:
        home = tempfile.mkdtemp(prefix="bulkload-airflow-home-")
        os.environ["BULKLOAD_TEST_AIRFLOW_HOME"] = home
        # Only the process that made it removes it; subprocesses inherit the variable.
        atexit.register(shutil.rmtree, home, ignore_errors=True)
    os.environ["AIRFLOW_HOME"] = home
    defaults = {
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
        "AIRFLOW__CORE__ALLOWED_DESERIALIZATION_CLASSES_REGEXP": r"airflow_bulkload\..*",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SECURITY_TOKEN": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "MOTO_ALLOW_NONEXISTENT_REGION": "true",
    }
    for key, value in defaults.items():
        os.environ[key] = value if key.startswith("AWS_") else os.environ.get(key, value)
    return Path(home)


def unavailable(reason: str) -> None:
    """Skip locally, but fail in CI: there a missing server is a broken build, not an excuse."""
    import pytest

    if IN_CI:
        pytest.fail(f"{reason} (CI=true: integration servers must be up)", pytrace=False)
    pytest.skip(reason)


def free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def unique_name(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


@dataclass(frozen=True)
class ServerSettings:
    host: str
    port: int
    user: str
    password: str
    admin_database: str

    @classmethod
    def postgres(cls) -> ServerSettings:
        env = os.environ.get
        return cls(
            host=env("BULKLOAD_TEST_PG_HOST", "127.0.0.1"),
            port=int(env("BULKLOAD_TEST_PG_PORT", "5432")),
            user=env("BULKLOAD_TEST_PG_USER", "postgres"),
            password=env("BULKLOAD_TEST_PG_PASSWORD", ""),
            admin_database=env("BULKLOAD_TEST_PG_DATABASE", "postgres"),
        )

    @classmethod
    def mysql(cls) -> ServerSettings:
        env = os.environ.get
        return cls(
            host=env("BULKLOAD_TEST_MYSQL_HOST", "127.0.0.1"),
            port=int(env("BULKLOAD_TEST_MYSQL_PORT", "3306")),
            user=env("BULKLOAD_TEST_MYSQL_USER", "root"),
            password=env("BULKLOAD_TEST_MYSQL_PASSWORD", ""),
            admin_database=env("BULKLOAD_TEST_MYSQL_DATABASE", "test"),
        )


@dataclass
class TestDatabase:
    """A fresh database on a real server, with an Airflow connection id that points at it."""

    __test__ = False  # a fixture value, not a test class

    engine: str  # "postgres" | "mysql"
    server: ServerSettings
    name: str
    conn_id: str
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def airflow_conn(self) -> str:
        return json.dumps(
            {
                "conn_type": self.engine,
                "host": self.server.host,
                "port": self.server.port,
                "login": self.server.user,
                "password": self.server.password,
                "schema": self.name,
                "extra": self.extra,
            }
        )

    def connect(self, **kwargs: Any) -> Any:
        """A direct driver connection (psycopg 3 or MySQLdb), autocommit on unless told otherwise."""
        if self.engine == "postgres":
            import psycopg

            kwargs.setdefault("autocommit", True)
            return psycopg.connect(
                host=self.server.host,
                port=self.server.port,
                user=self.server.user,
                password=self.server.password or None,
                dbname=self.name,
                **kwargs,
            )
        import MySQLdb

        conn = MySQLdb.connect(
            host=self.server.host,
            port=self.server.port,
            user=self.server.user,
            password=self.server.password,
            database=self.name,
            charset="utf8mb4",
            **kwargs,
        )
        conn.autocommit(True)
        return conn

    def query(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement on a short-lived connection and return its rows (tests only)."""
        with closing(self.connect()) as conn:
            cur = conn.cursor()
            cur.execute(sql, params)
            rows = cur.fetchall() if cur.description else []
            cur.close()
            return [tuple(r) for r in rows]


def _pg_admin(server: ServerSettings) -> Any:
    import psycopg

    return psycopg.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password or None,
        dbname=server.admin_database,
        autocommit=True,
        connect_timeout=5,
    )


def _mysql_admin(server: ServerSettings) -> Any:
    import MySQLdb

    conn = MySQLdb.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=server.admin_database,
        connect_timeout=5,
    )
    conn.autocommit(True)
    return conn


def check_server(engine: str) -> ServerSettings:
    server = ServerSettings.postgres() if engine == "postgres" else ServerSettings.mysql()
    admin = _pg_admin if engine == "postgres" else _mysql_admin
    try:
        with closing(admin(server)):
            pass
    except Exception as exc:  # any driver error means the same thing here: no server
        unavailable(f"{engine} server at {server.host}:{server.port} is not reachable: {exc}")
    return server


@contextmanager
def fresh_database(
    engine: str, server: ServerSettings, *, prefix: str | None = None, keep: bool = False
) -> Iterator[TestDatabase]:
    """Create a uniquely named database and drop it afterwards (unless ``keep``), whatever the
    test did. Its name starts with ``prefix``, default ``BULKLOAD_TEST_DB_PREFIX`` or ``bl_test``
    (on a shared server, a prefix of your own tells your test databases from everyone else's)."""
    prefix = prefix or os.environ.get("BULKLOAD_TEST_DB_PREFIX") or "bl_test"
    if not re.fullmatch(r"[a-z][a-z0-9_]{0,40}", prefix):
        raise ValueError(
            f"BULKLOAD_TEST_DB_PREFIX must be lowercase letters, digits, _: {prefix!r}"
        )
    name = unique_name(prefix)
    conn_id = unique_name("bl_conn")
    if engine == "postgres":
        with closing(_pg_admin(server)) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        db = TestDatabase("postgres", server, name, conn_id)
    else:
        with closing(_mysql_admin(server)) as admin:
            admin.cursor().execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4")
        db = TestDatabase("mysql", server, name, conn_id, extra={"charset": "utf8mb4"})
    os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = db.airflow_conn
    try:
        yield db
    finally:
        os.environ.pop(f"AIRFLOW_CONN_{conn_id.upper()}", None)
        if not keep:
            _drop_database(engine, server, name)


def _drop_database(engine: str, server: ServerSettings, name: str) -> None:
    if engine == "postgres":
        with closing(_pg_admin(server)) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        with closing(_mysql_admin(server)) as admin:
            admin.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")


@dataclass
class MotoServer:
    """moto in server mode on 127.0.0.1: reachable by other processes (database servers, airflow CLI)."""

    endpoint_url: str
    region: str = "us-east-1"

    def client(self, service: str) -> Any:
        import boto3

        return boto3.client(service, endpoint_url=self.endpoint_url, region_name=self.region)

    def airflow_conn(self) -> str:
        return json.dumps(
            {
                "conn_type": "aws",
                "login": "testing",
                "password": "testing",
                "extra": {"endpoint_url": self.endpoint_url, "region_name": self.region},
            }
        )

    def reset(self) -> None:
        import requests

        requests.post(f"{self.endpoint_url}/moto-api/reset", timeout=10)


AWS_S3_STAND_IN_SQL = REPO_ROOT / "tests" / "fixtures" / "aws_s3_stand_in.sql"


def install_aws_s3_stand_in(db: TestDatabase, moto: MotoServer) -> None:
    """Install the test stand-in for RDS's ``aws_s3`` extension into ``db``, pointed at ``moto``.

    The server fetches objects itself (``COPY ... FROM PROGRAM 'curl --aws-sigv4 ...'``), so the
    exact SQL a load sends to ``aws_s3.table_import_from_s3`` runs on the real server.
    """
    with closing(db.connect()) as conn:
        conn.execute(AWS_S3_STAND_IN_SQL.read_text())
        conn.execute(
            "INSERT INTO aws_s3.stand_in_settings (endpoint_url, access_key, secret_key)"
            " VALUES (%s, %s, %s) ON CONFLICT (only_row) DO UPDATE"
            " SET endpoint_url = EXCLUDED.endpoint_url, access_key = EXCLUDED.access_key,"
            " secret_key = EXCLUDED.secret_key",
            (
                moto.endpoint_url,
                os.environ["AWS_ACCESS_KEY_ID"],
                os.environ["AWS_SECRET_ACCESS_KEY"],
            ),
        )


def put_chunk(
    moto: MotoServer,
    bucket: str,
    key: str,
    data: bytes,
    *,
    rows: int | None = None,
    compression: str = "gzip",
    content_encoding: bool = True,
    file_format: dict[str, Any] | None = None,
    columns: list[str] | None = None,
    truncate_to: int | None = None,
) -> dict[str, Any]:
    """Store ``data`` as a staged chunk (gzipped unless ``compression="none"``) and return its
    manifest entry. Gzip objects carry ``Content-Encoding: gzip`` unless told otherwise, as
    staging writes them (RDS's aws_s3 decompresses only those). ``truncate_to`` cuts the stored
    object to that many bytes, to fake a broken upload."""
    import gzip
    import hashlib

    body = gzip.compress(data, mtime=0, compresslevel=1) if compression == "gzip" else data
    if truncate_to is not None:
        body = body[:truncate_to]
    extra = {"ContentEncoding": "gzip"} if compression == "gzip" and content_encoding else {}
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body, **extra)
    return {
        "uri": f"s3://{bucket}/{key}",
        "checksum": hashlib.sha256(body).hexdigest(),
        "rows": rows,
        "bytes": len(body),
        "raw_bytes": len(data),
        "compression": compression,
        "file_format": file_format or {},
        "columns": columns,
    }


def register_dag(dag: Any) -> None:
    """Write a DAG defined in a test to the metadata DB, as the DAG processor would, so that
    ``dag.test()`` (which only runs serialized DAGs) accepts it."""
    from airflow import settings
    from airflow.dag_processing.bundles.manager import DagBundlesManager
    from airflow.dag_processing.collection import update_dag_parsing_results_in_db
    from airflow.serialization.serialized_objects import LazyDeserializedDAG

    session = settings.Session()
    try:
        manager = DagBundlesManager()
        manager.sync_bundles_to_db(session=session)
        session.commit()
        bundle_name = next(iter(manager.get_all_dag_bundles())).name
        update_dag_parsing_results_in_db(
            bundle_name, None, [LazyDeserializedDAG.from_dag(dag)], {}, None, set(), session
        )
        session.commit()
    finally:
        session.close()


def run_dag_source(source: str, dag_id: str, dags_dir: Path, **test_kwargs: Any) -> Any:
    """Run the DAG ``dag_id`` defined by Python ``source`` with ``dag.test()``; returns the DagRun.

    Airflow 3.3's ``dag.test()`` only runs DAGs that a bundle holds (it syncs the bundle to the
    metadata DB first), so the source is written to ``dags_dir``, which serves as the dags-folder
    bundle for the call. Needs the ``airflow_db`` fixture.
    """
    import runpy

    from airflow import settings

    dags_dir.mkdir(parents=True, exist_ok=True)
    path = dags_dir / f"{dag_id}.py"
    path.write_text(source)
    saved = settings.DAGS_FOLDER
    settings.DAGS_FOLDER = str(dags_dir)
    try:
        namespace = runpy.run_path(str(path))
        dag = next(v for v in namespace.values() if getattr(v, "dag_id", None) == dag_id)
        return dag.test(**test_kwargs)
    finally:
        settings.DAGS_FOLDER = saved
