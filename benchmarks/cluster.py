"""The pipeline as users run it: a DAG triggered on a running Airflow deployment.

:class:`BenchCluster` is the e2e tests' :class:`~tests.e2e.airflow_cluster.AirflowCluster`
(api-server, scheduler with the LocalExecutor, dag-processor, on a throwaway home with a SQLite
metadata database) pointed at a dags folder of the benchmark's own, with ``[core] parallelism``
set (≥ 2: Airflow 3's LocalExecutor runs that many tasks at once on SQLite too; the run's
overlapping load tasks show it), a cluster policy that gives each task instance a temp dir of
its own (``benchmarks/task_policy.py``) and, unless ``preload=False`` (``--no-preload``), the line
docs/scaling.md recommends to deployments, ``import airflow_bulkload.preload`` in
``airflow_local_settings.py``, so the workers import the provider once and every task process
forked from them starts with it.

:meth:`BenchCluster.run` adds the target's connection (``airflow connections add``), writes the
DAG file, waits for the dag-processor, triggers a run (``airflow dags trigger``) and follows it
to the end while :class:`TaskProbe` samples every task process's peak RSS and the size of every
task's temp dir. Before any timed run, :meth:`BenchCluster.warm_up` runs a one-task DAG: the first
task of a freshly started deployment pays seconds of one-time start-up, which a deployment serving
nightly runs has long paid. The run's wall time is the DAG run's ``queued_at`` to ``end_date`` from the
metadata database; the load report comes from the report task's XCom.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.memory import descendants
from benchmarks.summary import parse_report_line
from benchmarks.task_policy import TASK_TMP
from tests.e2e.airflow_cluster import PRELOAD_SETTINGS, AirflowCluster

#: ``[scheduler] scheduler_idle_sleep_time`` of the deployment: the e2e harness's (Airflow's own
#: default is 1 s); ``--scheduler-idle-sleep`` sets another
DEFAULT_SCHEDULER_IDLE_SLEEP = 0.5
#: the logical date of the benchmark's runs (as ``airflow dags test`` used)
LOGICAL_DATE = "2026-01-02T00:00:00+00:00"
WORKER_TITLE = "airflow worker -- "  # the task process's title: the task instance's id follows
TASK_POLICY_SETTINGS = "from benchmarks.task_policy import task_policy  # noqa: F401\n"
WARM_UP_DAG_ID = "bench_warm_up"
#: one task that does nothing: the first task a freshly started deployment runs pays seconds of
#: one-time start-up (measured 4-8 s here) that a long-running deployment paid long ago
WARM_UP_DAG = f"""
import pendulum
from airflow.sdk import DAG, task


@task
def noop():
    return None


with DAG(
    dag_id={WARM_UP_DAG_ID!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")
):
    noop()
"""


def _utc(value: Any) -> float | None:
    """A metadata timestamp (SQLite text, UTC) as epoch seconds."""
    if value is None:
        return None
    parsed = datetime.fromisoformat(str(value))
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp()


def _span(start: Any, end: Any) -> float | None:
    begun, ended = _utc(start), _utc(end)
    return None if begun is None or ended is None else ended - begun


def _since(origin: float | None, value: Any) -> float | None:
    moment = _utc(value)
    return None if origin is None or moment is None else round(moment - origin, 2)


def _ti_key(value: Any) -> str:
    return str(value).replace("-", "").lower()


@dataclass
class TaskUse:
    """One task instance: its duration and the peaks sampled while it ran."""

    task_id: str
    map_index: int
    seconds: float | None
    peak_rss_mb: float | None
    peak_temp_mb: float | None

    @property
    def stage(self) -> str:
        """The task's id within the pipeline's group (``load_bench.load`` -> ``load``)."""
        return self.task_id.rsplit(".", 1)[-1]


@dataclass(frozen=True)
class TimelineEntry:
    """When one task instance was queued, started and ended, in seconds after the DAG run was
    queued: the gaps between one task's end and the next one's queue and start are Airflow's."""

    task_id: str
    map_index: int
    queued: float | None
    started: float | None
    ended: float | None


@dataclass
class ScheduledRun:
    """A triggered DAG run, followed to its end."""

    state: str
    wall_seconds: float | None  # queued_at -> end_date
    running_seconds: float | None  # start_date -> end_date
    tasks: list[TaskUse]
    report: dict[str, Any] | None
    task_seconds: dict[str, float] = field(default_factory=dict)  # first start to last end
    max_concurrent: dict[str, int] = field(default_factory=dict)  # stage -> most at once
    peak_temp_total_mb: float | None = None
    #: each task instance's queued, start and end, in seconds after the run was queued
    timeline: list[TimelineEntry] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.state == "success"


class TaskProbe:
    """Samples, every ``interval`` seconds, the RSS high-water mark (VmHWM) of each task process
    below ``root`` and the disk used by each directory under ``temp_root`` (one per task
    instance, see ``task_policy``)."""

    def __init__(self, root: int, temp_root: Path, interval: float = 0.25) -> None:
        self.root = root
        self.temp_root = temp_root
        self.interval = interval
        self.rss_kib: dict[str, int] = {}  # task instance id -> VmHWM
        self.temp_bytes: dict[str, int] = {}  # temp dir name -> peak bytes
        self.temp_total_peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-task-probe", daemon=True)

    def __enter__(self) -> TaskProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        from benchmarks.memory import peak_rss_kib

        for pid in descendants(self.root):
            try:
                title = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if title.startswith(WORKER_TITLE):
                key = _ti_key(title[len(WORKER_TITLE) :].split()[0])
                self.rss_kib[key] = max(self.rss_kib.get(key, 0), peak_rss_kib(pid))
        total = 0
        with suppress(OSError):
            for entry in os.scandir(self.temp_root):
                if entry.is_dir(follow_symlinks=False):
                    used = disk_usage(Path(entry.path))
                    total += used
                    self.temp_bytes[entry.name] = max(self.temp_bytes.get(entry.name, 0), used)
        self.temp_total_peak = max(self.temp_total_peak, total)


def disk_usage(path: Path) -> int:
    """Bytes allocated under ``path`` (files may vanish while we walk)."""
    used = 0
    for dirpath, _dirs, files in os.walk(path):
        for name in files:
            with suppress(OSError):
                used += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return used


@dataclass
class BenchCluster(AirflowCluster):
    """The e2e cluster with the benchmark's dags folder, parallelism and per-task temp dirs."""

    parallelism: int = 4
    #: how long an idle scheduler loop sleeps, seconds
    scheduler_idle_sleep: float = DEFAULT_SCHEDULER_IDLE_SLEEP
    #: workers import the provider once, as docs/scaling.md recommends (``--no-preload``: not)
    preload: bool = True
    runs: int = 0
    warm_up_seconds: float | None = None  # the warm-up run's wall time (queued to end)
    #: made from ``preload`` (and the task policy), not given
    local_settings: str = field(init=False, default="")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.local_settings = TASK_POLICY_SETTINGS + (PRELOAD_SETTINGS if self.preload else "")

    @property
    def dags(self) -> Path:
        return self.workdir / "dags"

    @property
    def task_tmp(self) -> Path:
        return self.workdir / "task-tmp"

    @property
    def env(self) -> dict[str, str]:
        return super().env | {
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            "AIRFLOW__CORE__PARALLELISM": str(self.parallelism),
            "AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME": str(self.scheduler_idle_sleep),
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            TASK_TMP: str(self.task_tmp),
        }

    def start(self) -> None:
        for folder in (self.dags, self.task_tmp):
            folder.mkdir(parents=True, exist_ok=True)
        super().start()
        self.wait_for_api(timeout=300)
        self.warm_up()

    def warm_up(self) -> ScheduledRun:
        """Run a one-task DAG before any timed run, so no case pays the deployment's one-time
        start-up: users' scheduled runs meet a deployment that has long been running."""
        run = self.run(WARM_UP_DAG_ID, WARM_UP_DAG, {}, timeout=300)
        if not run.ok:
            raise RuntimeError(
                f"warm-up run {run.state}:\n" + self.diagnostics(WARM_UP_DAG_ID)[-4000:]
            )
        self.warm_up_seconds = run.wall_seconds
        return run

    def run(
        self, dag_id: str, source: str, connections: dict[str, str], timeout: float
    ) -> ScheduledRun:
        """Add ``connections`` (id -> JSON), deploy the DAG ``source``, trigger one run and wait
        for its end (``timeout`` seconds at most)."""
        for conn_id, conn_json in connections.items():
            self.cli_ok("connections", "add", conn_id, "--conn-json", conn_json)
        (self.dags / f"{dag_id}.py").write_text(source)
        self.wait_for_dag(dag_id, timeout=300)
        self.runs += 1
        run_id = f"bench_{self.runs}"
        scheduler = self.procs["scheduler"].pid
        with TaskProbe(scheduler, self.task_tmp) as probe:
            self.cli_ok("dags", "trigger", dag_id, "--run-id", run_id, "-l", LOGICAL_DATE)

            def ended() -> str | None:
                rows = self.query(
                    "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
                )
                state = rows[0][0] if rows else None
                return state if state in ("success", "failed") else None

            state = self.wait_for(f"the run of {dag_id}", ended, timeout, interval=0.5)
        return self._collect(dag_id, run_id, state, probe)

    def _collect(self, dag_id: str, run_id: str, state: str, probe: TaskProbe) -> ScheduledRun:
        [(queued, started, ended)] = self.query(
            "SELECT queued_at, start_date, end_date FROM dag_run WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        )
        rows = self.query(
            "SELECT id, task_id, map_index, start_date, end_date, queued_dttm FROM task_instance"
            " WHERE dag_id = ? AND run_id = ?",
            (dag_id, run_id),
        )
        run_queued = _utc(queued)
        timeline = sorted(
            (
                TimelineEntry(
                    task_id.rsplit(".", 1)[-1],
                    int(map_index),
                    *(_since(run_queued, value) for value in (t_queued, t_start, t_end)),
                )
                for _, task_id, map_index, t_start, t_end, t_queued in rows
            ),
            key=lambda e: (e.started is None, e.started or 0.0, e.map_index),
        )
        tasks: list[TaskUse] = []
        spans: dict[str, list[tuple[float, float]]] = {}
        for ti_id, task_id, map_index, t_start, t_end, _ in rows:
            s, e = _utc(t_start), _utc(t_end)
            if s is not None and e is not None:
                spans.setdefault(task_id, []).append((s, e))
            rss = probe.rss_kib.get(_ti_key(ti_id))
            temp = [
                used
                for name, used in probe.temp_bytes.items()
                if name.startswith(f"{task_id}.{map_index}.")
            ]
            tasks.append(
                TaskUse(
                    task_id=task_id,
                    map_index=int(map_index),
                    seconds=None if s is None or e is None else e - s,
                    peak_rss_mb=round(rss / 1024, 1) if rss else None,
                    peak_temp_mb=round(max(temp) / 1e6, 1) if temp else None,
                )
            )
        tasks.sort(
            key=lambda t: (min(s for s, _ in spans.get(t.task_id, [(0.0, 0.0)])), t.map_index)
        )
        return ScheduledRun(
            state=state,
            wall_seconds=_span(queued, ended),
            running_seconds=_span(started, ended),
            tasks=tasks,
            report=self._report(dag_id, run_id),
            task_seconds={
                task_id: max(e for _, e in s) - min(b for b, _ in s) for task_id, s in spans.items()
            },
            max_concurrent={
                task_id.rsplit(".", 1)[-1]: most_at_once(s) for task_id, s in spans.items()
            },
            peak_temp_total_mb=round(probe.temp_total_peak / 1e6, 1),
            timeline=timeline,
        )

    def _report(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        """The load report: the report task's return value (XCom), else its log line."""
        rows = self.query(
            "SELECT value FROM xcom WHERE dag_id = ? AND run_id = ? AND key = 'return_value'"
            " AND (task_id = 'report' OR task_id LIKE '%.report')",
            (dag_id, run_id),
        )
        for (value,) in rows:
            with suppress(TypeError, ValueError):
                report = json.loads(value) if isinstance(value, (str, bytes)) else value
                if isinstance(report, str):
                    report = json.loads(report)
                if isinstance(report, dict) and "stage_seconds" in report:
                    return report
        for path in reversed(self.task_logs(dag_id, run_id)):
            text = path.read_text(errors="replace")
            for line in text.splitlines():  # JSON log lines: the message is the "event"
                with suppress(ValueError):
                    event = json.loads(line).get("event", "")
                    if "BULKLOAD_REPORT" in event:
                        text += "\n" + event
            report = parse_report_line(text)
            if report is not None:
                return report
        return None


def most_at_once(spans: list[tuple[float, float]]) -> int:
    """The most intervals that overlap at any moment."""
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    running = most = 0
    for _, step in events:
        running += step
        most = max(most, running)
    return most


def start_cluster(
    workdir: Path,
    base_env: dict[str, str],
    parallelism: int,
    *,
    preload: bool = True,
    scheduler_idle_sleep: float = DEFAULT_SCHEDULER_IDLE_SLEEP,
) -> BenchCluster:
    """A started cluster (the caller stops it); fails with the services' logs.

    ``workdir`` is made anew: an Airflow home left by an earlier run with the same ``--work``
    holds its DAG runs, whose run ids the new runs would repeat.
    """
    shutil.rmtree(workdir, ignore_errors=True)
    cluster = BenchCluster(
        workdir,
        base_env,
        parallelism=parallelism,
        preload=preload,
        scheduler_idle_sleep=scheduler_idle_sleep,
    )
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def wait_seconds(rows: int) -> float:
    """How long to wait for a pipeline run of ``rows`` rows before giving up."""
    return 600.0 + rows / 10_000  # 10 M rows: about half an hour
