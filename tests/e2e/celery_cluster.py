"""A CeleryExecutor deployment for the e2e tests: the LocalExecutor cluster's services plus two
Celery workers, as a user deploys the pipeline to scale out.

:class:`CeleryCluster` extends :class:`~tests.e2e.airflow_cluster.AirflowCluster`:

- Airflow's metadata (and Celery's result backend) in a database of its own on the local
  PostgreSQL, ``airflow_celery_<random>``, created at start and dropped at teardown;
- Redis as the broker, on a database index of its own that it claims at start (a marker key set
  only if absent, in an empty index) and flushes at teardown, touching no other index;
- api-server, scheduler, dag-processor, and two ``airflow celery worker`` processes with distinct
  Celery hostnames, task-instance hostnames (``[core] hostname_callable``), ``HOME``, ``TMPDIR``,
  Airflow home and log folder, so nothing passes between tasks except through S3 and the
  databases;
- a short task-instance heartbeat timeout, so the task of a worker killed with ``kill -9`` is
  found lost within seconds and retried on the other worker;
- connections in a JSON file read by Airflow's ``LocalFilesystemBackend`` on every lookup, so a
  test adds its databases' connections to the running deployment (:meth:`add_connection`).
"""

from __future__ import annotations

import json
import os
import random
import re
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote

import psycopg

from tests.e2e.airflow_cluster import PRELOAD_SETTINGS, AirflowCluster
from tests.harness import ServerSettings, _pg_admin, unavailable, unique_name

#: the Redis server the tests use as broker (a database index of it is picked at start)
REDIS_URL = os.environ.get("BULKLOAD_TEST_REDIS_URL", "redis://127.0.0.1:6379")
WORKER_HOSTNAME = "BULKLOAD_TEST_WORKER_HOSTNAME"
#: set in one Redis database index while a cluster uses it
CLAIM_KEY = "bulkload-e2e-celery-cluster"
#: seconds a task may stay queued before the scheduler queues it again (see ``env``)
QUEUED_TIMEOUT_SECONDS = 60


def worker_hostname() -> str:
    """``[core] hostname_callable`` of the test workers: the name the worker was given, so the
    task instances of two workers on one machine say which ran them."""
    return os.environ[WORKER_HOSTNAME]


def check_redis(url: str = REDIS_URL) -> None:
    """Skip locally, fail in CI, when the redis client or the Redis server is missing."""
    try:
        import redis
    except ImportError as exc:
        unavailable(f"the redis client is not installed (pip install '.[celery]'): {exc}")
        return
    try:
        redis.Redis.from_url(url, socket_connect_timeout=5).ping()
    except redis.RedisError as exc:
        unavailable(f"Redis at {url} is not reachable: {exc}")


@dataclass
class CeleryCluster(AirflowCluster):
    """api-server, scheduler, dag-processor and :attr:`worker_names` Celery workers, with
    PostgreSQL metadata and a Redis broker."""

    pg: ServerSettings = field(default_factory=ServerSettings.postgres)
    redis_url: str = REDIS_URL
    worker_names: tuple[str, ...] = ("worker-a", "worker-b")
    concurrency: int = 2
    heartbeat_timeout: int = 10
    token: str = field(default_factory=lambda: unique_name("c").removeprefix("c_"))
    redis_db: int | None = None
    #: the deployment recommendation of docs/scaling.md: each worker imports the provider once
    local_settings: str = PRELOAD_SETTINGS

    executor: ClassVar[str] = "CeleryExecutor"
    transient_errors: ClassVar[tuple[type[Exception], ...]] = (
        psycopg.errors.UndefinedTable,
        psycopg.OperationalError,
    )

    # -- configuration ----------------------------------------------------------------------
    @property
    def metadata_db(self) -> str:
        return f"airflow_celery_{self.token}"

    def _pg_url(self, scheme: str) -> str:
        auth = quote(self.pg.user, safe="")
        if self.pg.password:
            auth += ":" + quote(self.pg.password, safe="")
        return f"{scheme}://{auth}@{self.pg.host}:{self.pg.port}/{self.metadata_db}"

    @property
    def metadata_url(self) -> str:
        # Airflow 3.3's sync driver for PostgreSQL is psycopg 3 (psycopg2 works too)
        return self._pg_url("postgresql+psycopg")

    @property
    def connections_file(self) -> Path:
        return self.workdir / "connections.json"

    @property
    def queue(self) -> str:
        """The default queue of this deployment (the workers listen to it only)."""
        return f"bulkload_{self.token}"

    @property
    def env(self) -> dict[str, str]:
        return super().env | {
            "AIRFLOW__CELERY__BROKER_URL": f"{self.redis_url}/{self.redis_db}",
            "AIRFLOW__CELERY__RESULT_BACKEND": "db+" + self._pg_url("postgresql+psycopg"),
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": str(self.concurrency),
            "AIRFLOW__OPERATORS__DEFAULT_QUEUE": self.queue,
            # longer than any task here: a message still unacknowledged after it is delivered
            # again, to a second worker, while the first still runs it
            "AIRFLOW__CELERY_BROKER_TRANSPORT_OPTIONS__VISIBILITY_TIMEOUT": "3600",
            # a task whose worker died is found lost after heartbeat_timeout seconds
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT": str(self.heartbeat_timeout),
            "AIRFLOW__SCHEDULER__TASK_INSTANCE_HEARTBEAT_TIMEOUT_DETECTION_INTERVAL": "1",
            "AIRFLOW__WORKERS__MIN_HEARTBEAT_INTERVAL": "2",
            # a task a killed worker had received but not started never runs there, and its
            # message is not delivered again before the visibility timeout: the scheduler finds
            # it stuck in queued after this long and queues it again (Airflow's default: 600 s,
            # checked every 120 s), without spending a try
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": str(QUEUED_TIMEOUT_SECONDS),
            "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT_CHECK_INTERVAL": "5",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__SECRETS__BACKEND": "airflow.secrets.local_filesystem.LocalFilesystemBackend",
            "AIRFLOW__SECRETS__BACKEND_KWARGS": json.dumps(
                {"connections_file_path": str(self.connections_file)}
            ),
        }

    def worker_dir(self, name: str) -> Path:
        return self.workdir / name

    def worker_env(self, name: str) -> dict[str, str]:
        """The cluster's environment with a home, temp dir, Airflow home, log folder, log server
        port and task-instance hostname of the worker's own."""
        from tests.harness import free_port

        root = self.worker_dir(name)
        return self.env | {
            "HOME": str(root / "home"),
            "TMPDIR": str(root / "tmp"),
            "AIRFLOW_HOME": str(root / "airflow-home"),
            "AIRFLOW__LOGGING__BASE_LOG_FOLDER": str(root / "logs"),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": f"{__name__}.worker_hostname",
            WORKER_HOSTNAME: self.hostname(name),
        }

    def hostname(self, worker: str) -> str:
        """The worker's Celery hostname, also its task instances' ``hostname``."""
        return f"{worker}-{self.token}"

    @property
    def log_folders(self) -> list[Path]:
        return [self.worker_dir(name) / "logs" for name in self.worker_names]

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        check_redis(self.redis_url)
        self.redis_db = self._claim_redis_db()
        with closing(_pg_admin(self.pg)) as admin:
            admin.execute(f'CREATE DATABASE "{self.metadata_db}"')
        self.connections_file.parent.mkdir(parents=True, exist_ok=True)
        self.connections_file.write_text("{}")
        super().start()
        # deferred waits (a load slot, a table claim, an RDS change) run here
        self.spawn("triggerer", ["triggerer"])
        for name in self.worker_names:
            self.start_worker(name)
        for name in self.worker_names:
            self.wait_for_worker(name)

    def start_worker(self, name: str) -> None:
        for sub in ("home", "tmp", "airflow-home", "logs"):
            (self.worker_dir(name) / sub).mkdir(parents=True, exist_ok=True)
        self.write_local_settings(self.worker_dir(name) / "airflow-home")
        self.spawn(
            name,
            ["celery", "worker", "--celery-hostname", self.hostname(name), "--queues", self.queue],
            self.worker_env(name),
        )

    def wait_for_worker(self, name: str, timeout: float = 180) -> None:
        """Until the worker has connected to the broker and is ready for tasks."""
        ready = re.compile(rf"@{re.escape(self.hostname(name))} ready\.")
        self.wait_for(
            f"Celery worker {name}",
            lambda: ready.search(self.log(name).read_text(errors="replace")),
            timeout,
            interval=0.5,
        )

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            self._release_redis_db()
            with closing(_pg_admin(self.pg)) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{self.metadata_db}" WITH (FORCE)')

    def _redis(self, db: int) -> Any:
        import redis

        return redis.Redis.from_url(f"{self.redis_url}/{db}", socket_connect_timeout=5)

    def _claim_redis_db(self) -> int:
        """An empty Redis database index (1-15; 0 is everyone's default), marked as ours."""
        for db in random.sample(range(1, 16), 15):
            client = self._redis(db)
            if client.dbsize() == 0 and client.set(CLAIM_KEY, self.token, nx=True):
                if client.dbsize() == 1:  # nobody else started using it in between
                    return db
                client.delete(CLAIM_KEY)
        raise AssertionError(f"no empty Redis database index left on {self.redis_url}")

    def _release_redis_db(self) -> None:
        if self.redis_db is not None:
            client = self._redis(self.redis_db)
            if client.get(CLAIM_KEY) == self.token.encode():
                client.flushdb()
            self.redis_db = None

    # -- talking to it ----------------------------------------------------------------------
    def add_connection(self, conn_id: str, conn_json: str) -> None:
        """Make connection ``conn_id`` (Airflow's JSON form) known to every service at once."""
        connections = json.loads(self.connections_file.read_text())
        connections[conn_id] = json.loads(conn_json)
        tmp = self.connections_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(connections))
        tmp.replace(self.connections_file)

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Read the metadata database (``?`` placeholders, as for the SQLite cluster)."""
        with psycopg.connect(
            self._pg_url("postgresql"), autocommit=True, connect_timeout=10
        ) as conn:
            sql = sql.replace("%", "%%").replace("?", "%s")
            return [tuple(r) for r in conn.execute(sql, tuple(params)).fetchall()]
