"""A real Airflow deployment for the e2e tests: api-server, scheduler and dag-processor.

:class:`AirflowCluster` runs the three as subprocesses (each in its own process group) over a
throwaway Airflow home with its own SQLite metadata database, the LocalExecutor, short parsing
intervals and a shared JWT secret. It reads the metadata database directly (sqlite3) to follow
DAG runs, and on teardown kills every process it started, task processes included (the task
supervisor gives each task its own process group, so killing the groups alone is not enough).
Subclasses change the metadata database, the executor and the services (see
``tests/e2e/celery_cluster.py``: PostgreSQL metadata, Redis, two Celery workers).
"""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterable
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from tests.harness import REPO_ROOT, free_port

SERVICES = {
    "api-server": ["api-server", "--host", "127.0.0.1", "--port", "{port}"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
}
#: the deployment recommendation of docs/scaling.md: workers import the provider once
PRELOAD_SETTINGS = "import airflow_bulkload.preload  # noqa: F401\n"


def write_local_settings(airflow_home: Path, text: str) -> None:
    """Make ``text`` the ``config/airflow_local_settings.py`` of ``airflow_home``."""
    config = airflow_home / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "airflow_local_settings.py").write_text(text)


def kill_process_trees(pids: Iterable[int]) -> None:
    """SIGKILL each process of ``pids``, its process group (each was started in a session of
    its own) and every descendant (task processes run in process groups of their own); wait."""
    import psutil

    pids = list(pids)
    victims: list[psutil.Process] = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            victims += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            pass
    for pid in pids:
        with suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    for victim in victims:
        with suppress(psutil.NoSuchProcess):
            victim.kill()
    psutil.wait_procs(victims, timeout=10)


def tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-chars:]
    except OSError as exc:
        return f"<{exc}>"


@dataclass
class AirflowCluster:
    """api-server + scheduler + dag-processor on a fresh Airflow home under ``workdir``."""

    workdir: Path
    base_env: dict[str, str]
    port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    dags_folder: Path = REPO_ROOT / "dags"
    #: the Airflow home's ``config/airflow_local_settings.py`` (none when empty)
    local_settings: str = ""

    executor: ClassVar[str] = "LocalExecutor"
    #: errors a poll of the metadata database may meet before it is ready (then it polls again)
    transient_errors: ClassVar[tuple[type[Exception], ...]] = (sqlite3.OperationalError,)

    @property
    def home(self) -> Path:
        return self.workdir / "airflow-home"

    @property
    def db_path(self) -> Path:
        return self.home / "airflow.db"

    @property
    def metadata_url(self) -> str:
        return f"sqlite:///{self.db_path}"

    @property
    def env(self) -> dict[str, str]:
        return self.base_env | {
            "PYTHONPATH": str(REPO_ROOT),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.metadata_url,
            "AIRFLOW__CORE__EXECUTOR": self.executor,
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags_folder),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.port}/execution/",
            "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{self.port}",
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": self._jwt_secret,
            "AIRFLOW__API__SECRET_KEY": self._jwt_secret,
            # parse the dags folder at once, then leave the CPU to the tasks (2-core machines)
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "600",
            "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": "0.5",
        }

    def __post_init__(self) -> None:
        self._jwt_secret = secrets.token_urlsafe(32)

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)  # workdir too: the services' logs go there
        self.write_local_settings(self.home)
        migrate = self.cli("db", "migrate", timeout=180)
        if migrate.returncode != 0:
            raise AssertionError(f"airflow db migrate failed:\n{migrate.stdout[-6000:]}")
        for name, args in SERVICES.items():
            self.spawn(name, [a.format(port=self.port) for a in args])

    def write_local_settings(self, airflow_home: Path) -> None:
        """Give ``airflow_home`` the cluster's :attr:`local_settings`, if any."""
        if self.local_settings:
            write_local_settings(airflow_home, self.local_settings)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> None:
        """Start ``airflow <argv>`` as service ``name`` in a session of its own, logging to
        :meth:`log`."""
        with open(self.log(name), "ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "airflow", *argv],
                env=env or self.env,
                cwd=REPO_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self, name: str) -> None:
        """SIGKILL service ``name`` with every process under it (its tasks too); it is no
        longer checked for being alive."""
        proc = self.procs.pop(name)
        kill_process_trees([proc.pid])
        proc.wait(timeout=10)

    def stop(self) -> None:
        """Kill everything started here: the services' process groups and every descendant
        (task processes run in process groups of their own)."""
        kill_process_trees(proc.pid for proc in self.procs.values())
        for proc in self.procs.values():
            proc.wait(timeout=10)

    def log(self, name: str) -> Path:
        return self.workdir / f"{name}.log"

    def check_alive(self) -> None:
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                raise AssertionError(
                    f"airflow {name} exited with {proc.returncode}:\n{tail(self.log(name))}"
                )

    # -- talking to it ----------------------------------------------------------------------
    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "airflow", *args],
            env=self.env,
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def cli_ok(self, *args: str, attempts: int = 3) -> str:
        """``airflow <args>``'s output; fails with the services' logs unless it exits 0. A
        command that found the SQLite metadata database locked by the services (its writes
        roll back) is run again, up to ``attempts`` times."""
        for attempt in range(1, attempts + 1):
            result = self.cli(*args)
            if result.returncode == 0:
                return result.stdout
            output = f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            if "database is locked" not in output or attempt == attempts:
                break
            time.sleep(2)
        raise AssertionError(
            self.failure(f"airflow {' '.join(args)} failed ({result.returncode}):\n{output}")
        )

    def query(self, sql: str, params: Any = ()) -> list[tuple[Any, ...]]:
        """Read the metadata database (read-only, so it never holds a write lock)."""
        uri = f"file:{self.db_path}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=30)) as conn:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]

    def wait_for(self, what: str, check: Any, timeout: float, interval: float = 1.0) -> Any:
        """Poll ``check()`` until it returns something truthy; fail with the services' logs."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive()
            try:
                value = check()
            except self.transient_errors:  # locked, or a table not migrated yet
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    self.failure(f"timed out after {timeout} s waiting for {what}")
                )
            time.sleep(interval)

    def wait_for_dag(self, dag_id: str, timeout: float = 120) -> None:
        """Until the dag-processor has parsed and serialized ``dag_id``."""
        self.wait_for(
            f"the dag-processor to serialize {dag_id}",
            lambda: self.query("SELECT 1 FROM serialized_dag WHERE dag_id = ?", (dag_id,)),
            timeout,
        )

    def wait_for_api(self, timeout: float = 120) -> None:
        import requests

        def healthy() -> bool:
            try:
                return requests.get(f"{self.base_url}/api/v2/monitor/health", timeout=5).ok
            except requests.RequestException:
                return False

        self.wait_for("the api-server", healthy, timeout)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_folders(self) -> list[Path]:
        """Where task logs are written (the workers' base log folders)."""
        return [self.home / "logs"]

    def task_logs(self, dag_id: str, run_id: str | None = None) -> list[Path]:
        pattern = f"run_id={run_id}/**/*.log" if run_id else "**/*.log"
        found = [p for root in self.log_folders for p in (root / f"dag_id={dag_id}").glob(pattern)]
        return sorted(found, key=lambda p: p.stat().st_mtime)

    def failure(self, headline: str, dag_id: str | None = None) -> str:
        """A test failure's message: ``headline``, the :meth:`diagnostics`, then ``headline``
        again, so an output cut to its last lines (CI's) still says what failed."""
        return f"{headline}\n{self.diagnostics(dag_id)}\n=== so, the failure: {headline}"

    def diagnostics(self, dag_id: str | None = None, failed_only: bool = True) -> str:
        """Tails of the services' logs and of the task logs (the failed tasks' if any)."""
        parts = [f"--- {name} ---\n{tail(self.log(name), 3000)}" for name in self.procs]
        if dag_id:
            try:
                failed = self.query(
                    "SELECT run_id, task_id, map_index FROM task_instance"
                    " WHERE dag_id = ? AND state IN ('failed', 'up_for_retry')",
                    (dag_id,),
                )
            except Exception:  # the metadata database is what failed
                failed = []
            logs = self.task_logs(dag_id)
            if failed and failed_only:
                wanted = {f"task_id={task_id}" for _, task_id, _ in failed}
                logs = [p for p in logs if wanted & set(p.parts)]
            parts += [f"--- {p.relative_to(self.workdir)} ---\n{tail(p, 3000)}" for p in logs[-6:]]
        return "\n".join(parts)
