"""A real Airflow deployment for the e2e tests: api-server, scheduler and dag-processor.

:class:`AirflowCluster` runs the three as subprocesses (each in its own process group) over a
throwaway Airflow home with its own SQLite metadata database, the LocalExecutor, short parsing
intervals and a shared JWT secret. It reads the metadata database directly (sqlite3) to follow
DAG runs, and on teardown kills every process it started, task processes included (the task
supervisor gives each task its own process group, so killing the groups alone is not enough).
"""

from __future__ import annotations

import os
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from contextlib import closing, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness import REPO_ROOT, free_port

SERVICES = {
    "api-server": ["api-server", "--host", "127.0.0.1", "--port", "{port}"],
    "scheduler": ["scheduler"],
    "dag-processor": ["dag-processor"],
}


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

    @property
    def home(self) -> Path:
        return self.workdir / "airflow-home"

    @property
    def db_path(self) -> Path:
        return self.home / "airflow.db"

    @property
    def env(self) -> dict[str, str]:
        return self.base_env | {
            "PYTHONPATH": str(REPO_ROOT),
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.db_path}",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_FOLDER": str(REPO_ROOT / "dags"),
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
        migrate = self.cli("db", "migrate", timeout=180)
        if migrate.returncode != 0:
            raise AssertionError(f"airflow db migrate failed:\n{migrate.stdout[-6000:]}")
        for name, args in SERVICES.items():
            argv = [a.format(port=self.port) for a in args]
            with open(self.log(name), "wb") as log:
                self.procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "airflow", *argv],
                    env=self.env,
                    cwd=REPO_ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )

    def stop(self) -> None:
        """Kill everything started here: the services' process groups and every descendant
        (task processes run in process groups of their own)."""
        import psutil

        victims: list[psutil.Process] = []
        for proc in self.procs.values():
            try:
                root = psutil.Process(proc.pid)
                victims += [root, *root.children(recursive=True)]
            except psutil.NoSuchProcess:
                pass
        for proc in self.procs.values():
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        for victim in victims:
            with suppress(psutil.NoSuchProcess):
                victim.kill()
        psutil.wait_procs(victims, timeout=10)
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

    def cli_ok(self, *args: str) -> str:
        result = self.cli(*args)
        if result.returncode != 0:
            raise AssertionError(
                f"airflow {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stdout[-4000:]}\n{result.stderr[-4000:]}\n{self.diagnostics()}"
            )
        return result.stdout

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
            except sqlite3.OperationalError:  # locked, or a table not migrated yet
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"timed out after {timeout} s waiting for {what}\n" + self.diagnostics()
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

    def task_logs(self, dag_id: str, run_id: str | None = None) -> list[Path]:
        root = self.home / "logs" / f"dag_id={dag_id}"
        pattern = f"run_id={run_id}/**/*.log" if run_id else "**/*.log"
        return sorted(root.glob(pattern), key=lambda p: p.stat().st_mtime)

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
            except sqlite3.Error:
                failed = []
            logs = self.task_logs(dag_id)
            if failed and failed_only:
                wanted = {f"task_id={task_id}" for _, task_id, _ in failed}
                logs = [p for p in logs if wanted & set(p.parts)]
            parts += [f"--- {p.relative_to(self.home)} ---\n{tail(p, 3000)}" for p in logs[-6:]]
        return "\n".join(parts)
