"""Running generated DAG files with ``airflow dags test`` on a throwaway Airflow home, against the
benchmark's moto S3 server (the way ``scripts/demo.py`` runs the example DAG). Used for the
S3ToSqlOperator slice, a single task; the pipeline runs on a real scheduler (``cluster.py``)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.harness import MotoServer, configure_process_environment

LOGICAL_DATE = "2026-01-02"


@dataclass
class DagRun:
    ok: bool
    log: str
    wall_seconds: float
    task_seconds: dict[str, float]  # task id -> duration (mapped tasks: first start to last end)


class AirflowSandbox:
    """A throwaway AIRFLOW_HOME (SQLite, its own dags folder) whose ``aws_default`` is ``moto``."""

    def __init__(self, work: Path, moto: MotoServer) -> None:
        self.dags = work / "dags"
        self.dags.mkdir(parents=True, exist_ok=True)
        os.environ["AIRFLOW__CORE__DAGS_FOLDER"] = str(self.dags)
        self.home = configure_process_environment()
        self.moto = moto
        os.environ["AIRFLOW_CONN_AWS_DEFAULT"] = self.moto.airflow_conn()
        self._migrated = False

    def upload(self, path: Path, bucket: str, key: str) -> str:
        s3 = self.moto.client("s3")
        s3.create_bucket(Bucket=bucket)
        s3.upload_file(str(path), bucket, key)
        return f"s3://{bucket}/{key}"

    def create_bucket(self, bucket: str) -> str:
        self.moto.client("s3").create_bucket(Bucket=bucket)
        return f"s3://{bucket}"

    def _airflow(self, *args: str, log: Path | None = None) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "airflow", *args]
        if log is None:
            return subprocess.run(command, capture_output=True, text=True, check=False)
        with open(log, "w") as out:
            return subprocess.run(
                command, stdout=out, stderr=subprocess.STDOUT, text=True, check=False
            )

    def run_dag(self, dag_id: str, source: str) -> DagRun:
        """Write ``source`` as the DAG file of ``dag_id`` and run it with ``airflow dags test``."""
        if not self._migrated:
            done = self._airflow("db", "migrate")
            if done.returncode != 0:
                raise RuntimeError(f"airflow db migrate failed: {done.stderr[-2000:]}")
            self._migrated = True
        (self.dags / f"{dag_id}.py").write_text(source)
        log = self.dags.parent / f"{dag_id}.log"
        started = time.monotonic()
        done = self._airflow("dags", "test", dag_id, LOGICAL_DATE, log=log)
        wall = time.monotonic() - started
        text = log.read_text(errors="replace")
        durations = self.task_seconds(dag_id)
        ok = done.returncode == 0 and "state=success" in text.replace(
            "state: success", "state=success"
        )
        return DagRun(ok, text, wall, durations)

    def task_seconds(self, dag_id: str) -> dict[str, float]:
        """Each task's wall time in the DAG's last run, from the metadata DB."""
        with sqlite3.connect(self.home / "airflow.db") as conn:
            rows: list[Any] = conn.execute(
                "SELECT task_id, min(julianday(start_date)), max(julianday(end_date)) "
                "FROM task_instance WHERE dag_id = ? AND start_date IS NOT NULL "
                "AND end_date IS NOT NULL GROUP BY task_id",
                (dag_id,),
            ).fetchall()
        return {task: (end - start) * 86400.0 for task, start, end in rows}

    def close(self) -> None:
        """Nothing to stop: the moto server belongs to the caller."""
