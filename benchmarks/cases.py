"""The benchmark's cases. Each loads the same input (gzip CSV parts in the moto S3 server) into a
freshly created table in a fresh database and returns how long the timed part took; ``run.py``
verifies the table afterwards."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from airflow_bulkload.staging.load_batches import DEFAULT_BATCH_BYTES, batch_count
from airflow_bulkload.staging.planning import DEFAULT_CHUNK_SIZE, chunk_count, parse_size
from benchmarks.airflow_runs import AirflowSandbox
from benchmarks.cluster import (
    DEFAULT_SCHEDULER_IDLE_SLEEP,
    BenchCluster,
    ScheduledRun,
    start_cluster,
    wait_seconds,
)
from benchmarks.datasets import Dataset
from benchmarks.engines import TABLE, Engine, connection_uri, duckdb_checksum
from benchmarks.s3data import MotoProcess, S3Input, download, stream_part
from benchmarks.stream_load import spec_for
from benchmarks.summary import stages_from_report
from tests.harness import TestDatabase

PIPELINE_MODULES = ("airflow_bulkload.pipeline", "airflow_bulkload.operators.table")
STAGING_BUCKET = "bench-staging"
#: what the local copies are named: mariadb-import takes the table name from the file name
LOCAL_PART = f"{TABLE}.{{n:03d}}.csv"
LOCAL_NOTE = "local gunzipped copy of the parts (cannot read S3)"


class CaseUnavailable(Exception):
    """The case cannot run here (a tool is not installed, a module not there yet)."""


class Services:
    """What serves every case and size of one run: the moto S3 server, and, started at first
    use, the Airflow deployment (the pipeline) and a ``dags test`` home (the S3ToSql slice)."""

    def __init__(
        self,
        work: Path,
        moto: MotoProcess,
        airflow_parallelism: int,
        *,
        preload: bool = True,
        scheduler_idle_sleep: float = DEFAULT_SCHEDULER_IDLE_SLEEP,
    ) -> None:
        self.work = work
        self.moto = moto
        self.airflow_parallelism = airflow_parallelism
        self.preload = preload
        self.scheduler_idle_sleep = scheduler_idle_sleep
        self._sandbox: AirflowSandbox | None = None
        self._cluster: BenchCluster | None = None

    @property
    def sandbox(self) -> AirflowSandbox:
        if self._sandbox is None:
            self._sandbox = AirflowSandbox(self.work / "airflow", self.moto.server)
        return self._sandbox

    @property
    def cluster(self) -> BenchCluster:
        if self._cluster is None:
            print("starting Airflow (api-server, scheduler, dag-processor) ...", file=sys.stderr)
            env = dict(os.environ) | {"AIRFLOW_CONN_AWS_DEFAULT": self.moto.server.airflow_conn()}
            self._cluster = start_cluster(
                self.work / "cluster",
                env,
                self.airflow_parallelism,
                preload=self.preload,
                scheduler_idle_sleep=self.scheduler_idle_sleep,
            )
            print(
                f"warmed up: a one-task DAG run took {self._cluster.warm_up_seconds or 0:.1f} s"
                " (a fresh deployment's one-time start-up; no timed run pays it)",
                file=sys.stderr,
            )
        return self._cluster

    def pids(self) -> set[int]:
        """Their processes (no case's memory): moto's and the Airflow services'."""
        pids = {self.moto.pid}
        if self._cluster is not None:
            pids |= {proc.pid for proc in self._cluster.procs.values()}
        return pids

    def close(self) -> None:
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None


@dataclass
class Bench:
    """Everything a case needs: the engine, the input in S3 and where to work."""

    engine: Engine
    dataset: Dataset
    source: S3Input
    rows: int
    expected: tuple[int, ...]
    work: Path
    parallel: int
    s3_to_sql_rows: int
    bulk_mode: str
    services: Services
    chunk_size: str | None = None  # the pipeline's, when not its default
    #: more ``bulk_load_table`` arguments for the pipeline cases (``--pipeline-arg``)
    pipeline_args: dict[str, Any] = field(default_factory=dict)

    @property
    def sandbox(self) -> AirflowSandbox:
        """``airflow dags test`` on a throwaway home (the S3ToSqlOperator slice)."""
        return self.services.sandbox

    @property
    def cluster(self) -> BenchCluster:
        """The Airflow deployment the pipeline runs on (started at first use)."""
        return self.services.cluster

    def local_parts(self) -> list[Path]:
        """The parts downloaded from S3 and gunzipped (cached), for tools that cannot read S3."""
        return download(self.source, self.work / "local-parts", LOCAL_PART)


@dataclass
class Outcome:
    """A case's timed result; ``expected`` overrides the whole input's checksum (for a slice)."""

    seconds: float
    note: str = ""
    stages: dict[str, float | None] = field(default_factory=dict)
    expected: tuple[int, ...] | None = None
    rows: int | None = None
    peak_rss_mb: float | None = None  # when the case measures its own (the pipeline's tasks)
    details: dict[str, Any] = field(default_factory=dict)  # extra figures for the JSON line


def head_part(source: S3Input, rows: int, target: Path) -> Path:
    """The header and the first ``rows`` rows of the first part, read from S3."""
    wanted = rows + 1  # lines, the header's included
    with open(target, "wb") as out:
        for block in stream_part(source.client(), source.bucket, source.keys[0], skip_header=False):
            lines = block.count(b"\n")
            if lines < wanted:
                out.write(block)
                wanted -= lines
                continue
            cut = -1
            for _ in range(wanted):
                cut = block.index(b"\n", cut + 1)
            out.write(block[: cut + 1])
            break
    return target


def timed(action: Callable[[], object]) -> float:
    started = time.monotonic()
    action()
    return time.monotonic() - started


def in_parallel(actions: list[Callable[[], None]]) -> None:
    """Run each action in its own thread (each starts its own client session) and wait."""
    with ThreadPoolExecutor(max_workers=max(1, len(actions))) as pool:
        for future in [pool.submit(a) for a in actions]:
            future.result()


def stream_from_s3(bench: Bench, db: TestDatabase, sessions: int, *, one_statement: bool) -> float:
    """Load every part from S3 with ``benchmarks/stream_load.py`` in a process of its own;
    returns the seconds it measured (first GET to last commit)."""
    spec = spec_for(
        db, bench.engine.stream_statement(bench.dataset), bench.source.endpoint_url,
        bench.source.bucket, list(bench.source.keys),
    )  # fmt: skip
    argv = [sys.executable, "-m", "benchmarks.stream_load", "--spec", spec,
            "--sessions", str(sessions), *(["--one-statement"] if one_statement else [])]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"stream_load failed: {last}")
    return float(json.loads(done.stdout.strip().splitlines()[-1])["seconds"])


# -- cases ----------------------------------------------------------------------------------------
def naive(bench: Bench, db: TestDatabase) -> Outcome:
    """One session streams the parts from S3 one after another into ONE COPY / LOAD DATA LOCAL
    into the indexed table."""
    bench.engine.create_table(db, bench.dataset, indexed=True)
    seconds = stream_from_s3(bench, db, 1, one_statement=True)
    return Outcome(seconds, f"1 session, 1 statement, {len(bench.source.keys)} parts from S3")


def _run_phase(bench: Bench, db: TestDatabase, statements: list[str]) -> None:
    in_parallel([partial(bench.engine.run_client, db, s) for s in statements])


def floor(bench: Bench, db: TestDatabase) -> Outcome:
    """Parallel sessions stream the parts from S3 into a table with no index at all, then the PK
    and indexes are built in parallel sessions; both phases timed."""
    bench.engine.create_table(db, bench.dataset, indexed=False)
    load = stream_from_s3(bench, db, bench.parallel, one_statement=False)
    phases = bench.engine.index_phases(bench.dataset)
    build = sum(timed(partial(_run_phase, bench, db, phase)) for phase in phases)
    note = f"{bench.parallel} sessions from S3: load {load:.2f} s + indexes {build:.2f} s"
    return Outcome(load + build, note, {"load": load, "indexes": build})


def floor_unlogged(bench: Bench, db: TestDatabase) -> Outcome:
    """PostgreSQL's absolute bound: parallel sessions stream the parts from S3 into an UNLOGGED
    table without indexes."""
    if bench.engine.name != "postgres":
        raise CaseUnavailable("PostgreSQL only")
    bench.engine.create_table(db, bench.dataset, indexed=False, unlogged=True)
    seconds = stream_from_s3(bench, db, bench.parallel, one_statement=False)
    return Outcome(seconds, f"{bench.parallel} sessions from S3, UNLOGGED, no indexes (bound)")


def pgloader(bench: Bench, db: TestDatabase) -> Outcome:
    """pgloader with its defaults into the indexed table, from a local copy of the parts."""
    if bench.engine.name != "postgres":
        raise CaseUnavailable("PostgreSQL only")
    _require("pgloader")
    bench.engine.create_table(db, bench.dataset, indexed=True)
    parts = bench.local_parts()
    fields = ", ".join(f"{c} [null if blanks]" for c in bench.dataset.columns)
    pattern = LOCAL_PART.format(n=0).replace(".000.", r"\.[0-9]+\.").replace(".csv", r"\.csv$")
    command = bench.work / "pgloader.load"
    command.write_text(
        f"LOAD CSV FROM ALL FILENAMES MATCHING ~<{pattern}> IN DIRECTORY '{parts[0].parent}'\n"
        f"  HAVING FIELDS ({fields})\n"
        f"INTO {connection_uri(db)}?tablename={TABLE} ({', '.join(bench.dataset.columns)})\n"
        "WITH skip header = 1, fields terminated by ',', fields optionally enclosed by '\"',\n"
        "     fields escaped by double-quote;\n"
    )
    seconds = timed(lambda: _run_tool(["pgloader", "--quiet", str(command)]))
    return Outcome(seconds, f"defaults, {LOCAL_NOTE}")


def mariadb_import(bench: Bench, db: TestDatabase) -> Outcome:
    """mariadb-import --use-threads, one part per thread, into the indexed table, from a local
    copy of the parts."""
    if bench.engine.name != "mysql":
        raise CaseUnavailable("MySQL only")
    tool = _require("mariadb-import")
    bench.engine.create_table(db, bench.dataset, indexed=True)
    parts = bench.local_parts()  # named <table>.<n>.csv: the tool loads each into <table>
    s = db.server
    argv = [tool, "--local", f"--use-threads={bench.parallel}", "--fields-terminated-by=,",
            "--fields-optionally-enclosed-by=\"", "--ignore-lines=1",
            f"--columns={','.join(bench.dataset.columns)}", "-h", s.host, "-P", str(s.port),
            "-u", s.user, *([f"-p{s.password}"] if s.password else []), db.name,
            *map(str, parts)]  # fmt: skip
    seconds = timed(lambda: _run_tool(argv))
    return Outcome(seconds, f"--use-threads={bench.parallel}, {LOCAL_NOTE}")


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise CaseUnavailable(f"{tool} is not installed")
    return path


def _run_tool(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} failed: {(done.stderr or done.stdout)[-2000:]}")


S3_TO_SQL_DAG = """
import csv

import pendulum
from airflow.providers.amazon.aws.transfers.s3_to_sql import S3ToSqlOperator
from airflow.sdk import DAG


def parse_csv(path):
    with open(path, newline="") as f:
        rows = csv.reader(f)
        next(rows)
        for row in rows:
            yield [None if v == "" else v for v in row]


with DAG(dag_id={dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    S3ToSqlOperator(
        task_id="load", s3_bucket={bucket!r}, s3_key={key!r}, table={table!r},
        column_list={columns!r}, parser=parse_csv, sql_conn_id={conn_id!r}, commit_every=10000,
    )
"""


def s3_to_sql(bench: Bench, db: TestDatabase) -> Outcome:
    """Airflow's S3ToSqlOperator (insert-based) on a slice, scaled linearly to the full rows."""
    bench.engine.create_table(db, bench.dataset, indexed=True)
    rows = min(bench.rows, bench.s3_to_sql_rows)
    piece = head_part(bench.source, rows, bench.work / "s3_to_sql-slice.csv")
    bench.sandbox.upload(piece, "bench-s3-to-sql", piece.name)
    dag_id = "bench_s3_to_sql"
    source = S3_TO_SQL_DAG.format(
        dag_id=dag_id,
        bucket="bench-s3-to-sql",
        key=piece.name,
        table=TABLE,
        columns=bench.dataset.columns,
        conn_id=db.conn_id,
    )
    run = bench.sandbox.run_dag(dag_id, source)
    if not run.ok or "load" not in run.task_seconds:
        raise RuntimeError(f"S3ToSqlOperator DAG failed:\n{run.log[-3000:]}")
    seconds = run.task_seconds["load"] * bench.rows / rows
    note = f"scaled x{bench.rows / rows:g} from {rows:,} rows"
    return Outcome(seconds, note, expected=duckdb_checksum(bench.dataset, piece), rows=rows)


PIPELINE_DAG = """
import pendulum
from airflow.sdk import DAG

from airflow_bulkload.pipeline import bulk_load_table

with DAG(dag_id={dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    bulk_load_table(
        table={table!r}, conn_id={conn_id!r}, source={source!r}, staging={staging!r},
        file_format={{"format": "csv", "header": True}}, parallelism={parallel!r},
        vcpus={parallel!r}, fail_on=None, bulk_mode={bulk_mode!r},{extra}
    )
"""

#: the bulk_load_table arguments the pipeline cases set themselves (``--chunk-size`` gives
#: chunk_size; the pipeline_staged case sets direct)
PIPELINE_OWN_ARGUMENTS = frozenset(
    {
        *("table", "conn_id", "source", "staging", "file_format", "parallelism", "vcpus"),
        *("fail_on", "bulk_mode", "chunk_size", "direct"),
    }
)

#: pipeline tasks that the load report does not time (teardowns), taken from the metadata DB
TEARDOWN_TASKS = ("restore_table", "exit_bulk_mode")


def pipeline_available() -> str | None:
    """None when the pipeline modules import, else why not."""
    for module in PIPELINE_MODULES:
        try:
            if importlib.util.find_spec(module) is None:
                return f"{module} is not importable (not on this branch yet)"
        except ImportError as exc:
            return f"{module} is not importable: {exc}"
    return None


def pipeline(bench: Bench, db: TestDatabase) -> Outcome:
    """Our operators as a deployment runs them: the DAG triggered on a running scheduler with the
    LocalExecutor, reading the parts from S3, with the defaults (PostgreSQL: the parts loaded as
    stored). The time is the DAG run's wall time (queued to end); the stage times come from the
    load report."""
    return _pipeline(bench, db, staged=False)


def pipeline_staged(bench: Bench, db: TestDatabase) -> Outcome:
    """The pipeline with ``direct=False``: the parts rewritten into staged chunks first
    (PostgreSQL; MySQL always stages, so the case is PostgreSQL-only)."""
    return _pipeline(bench, db, staged=True)


def _pipeline(bench: Bench, db: TestDatabase, *, staged: bool) -> Outcome:
    reason = pipeline_available()
    if reason:
        raise CaseUnavailable(reason)
    bench.engine.create_table(db, bench.dataset, indexed=True)
    dag_id = f"bench_pipeline{'_staged' if staged else ''}_{db.name}"
    table = f"public.{TABLE}" if bench.engine.name == "postgres" else TABLE
    source = PIPELINE_DAG.format(
        dag_id=dag_id,
        table=table,
        conn_id=db.conn_id,
        source=bench.source.uri,
        staging=f"s3://{STAGING_BUCKET}/{db.name}",
        parallel=bench.parallel,
        bulk_mode=bench.bulk_mode,
        extra=(f" chunk_size={bench.chunk_size!r}," if bench.chunk_size else "")
        + (" direct=False," if staged else "")
        + "".join(f" {name}={value!r}," for name, value in bench.pipeline_args.items()),
    )
    cluster = bench.cluster
    run = cluster.run(dag_id, source, {db.conn_id: db.airflow_conn}, wait_seconds(bench.rows))
    if not run.ok or run.report is None or run.wall_seconds is None:
        raise RuntimeError(
            f"pipeline DAG run {run.state}, report {'found' if run.report else 'missing'}:\n"
            + cluster.diagnostics(dag_id)[-4000:]
        )
    outcome = pipeline_outcome(run, bench.services.airflow_parallelism)
    outcome.details["staged_mb"] = round(
        staged_bytes(bench.services.moto.server.client("s3"), STAGING_BUCKET, db.name) / 1e6, 1
    )
    return outcome


def staged_bytes(s3: Any, bucket: str, prefix: str) -> int:
    """What staging wrote under its prefix, its manifests aside (0 when the input loads as
    stored)."""
    total = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            if not item["Key"].endswith("manifest.json"):
                total += int(item["Size"])
    return total


def pipeline_outcome(run: ScheduledRun, airflow_parallelism: int) -> Outcome:
    """The case's result from a finished run: wall time, stages, per-task peaks."""
    assert run.report is not None and run.wall_seconds is not None
    stages = pipeline_stages(stages_from_report(run.report), run.task_seconds)
    stage_sum = sum(v for v in stages.values() if v is not None)
    loads = run.max_concurrent.get("load", 0)
    rss = [t.peak_rss_mb for t in run.tasks if t.peak_rss_mb is not None]
    note = (
        f"DAG run wall (queued->end), LocalExecutor parallelism {airflow_parallelism}; "
        f"stage sum {stage_sum:.2f} s; up to {loads} loads at once"
    )
    details = {
        "wall_s": round(run.wall_seconds, 3),
        "running_s": None if run.running_seconds is None else round(run.running_seconds, 3),
        "stage_sum_s": round(stage_sum, 3),
        "airflow_parallelism": airflow_parallelism,
        "max_concurrent": run.max_concurrent,
        "peak_temp_total_mb": run.peak_temp_total_mb,
        "tasks": per_stage_peaks(run),
        "timeline": [asdict(entry) for entry in run.timeline],
    }
    return Outcome(
        run.wall_seconds, note, stages, peak_rss_mb=max(rss) if rss else None, details=details
    )


def per_stage_peaks(run: ScheduledRun) -> dict[str, dict[str, Any]]:
    """Per pipeline task (mapped instances together): instances, longest, peak RSS, peak temp."""
    out: dict[str, dict[str, Any]] = {}
    for task in run.tasks:
        entry = out.setdefault(
            task.stage,
            {"instances": 0, "max_s": None, "peak_rss_mb": None, "peak_temp_mb": None},
        )
        entry["instances"] += 1
        for key, value in (
            ("max_s", task.seconds),
            ("peak_rss_mb", task.peak_rss_mb),
            ("peak_temp_mb", task.peak_temp_mb),
        ):
            if value is not None:
                entry[key] = round(max(value, entry[key] or 0.0), 3)
    return out


def pipeline_stages(
    reported: dict[str, float | None], task_seconds: dict[str, float]
) -> dict[str, float | None]:
    """The report's stages plus the teardowns it does not time (from task durations)."""
    stages = dict(reported)
    for task in TEARDOWN_TASKS:
        found = [s for t, s in task_seconds.items() if t.rsplit(".", 1)[-1] == task]
        if found:
            stages[task] = max(found)
    return stages


AIRFLOW_FLOOR_DAG = """
import pendulum
from airflow.sdk import DAG, chain, task


@task
def noop():
    return None


@task
def plan():
    return []  # an input below stage_group_size: no groups to stage


@task
def stage_group(group):
    return group


@task(trigger_rule="none_failed_min_one_success")  # after the skipped stage_group
def preflight():
    return list(range({chunks}))  # one batch of chunks per load task


@task(max_active_tis_per_dagrun={parallel})
def load(chunk):
    return chunk


with DAG(
    dag_id={dag_id!r}, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")
) as dag:
    staged = plan.override(task_id="stage")()
    groups = stage_group.expand(group=staged)  # maps to nothing: skipped, never started
    batches = preflight()
    claim = noop.override(task_id="claim_table")()
    setup = [noop.override(task_id=name)() for name in {setup!r}]
    loads = load.expand(chunk=batches)
    finalize = noop.override(task_id="finalize_table")()
    after = [noop.override(task_id=n, trigger_rule="all_done")() for n in {after!r}]
    chain(staged, groups, batches, claim, setup, loads, finalize, after)
"""
#: the pipeline's tasks that run side by side after the claim, and after finalize_table
FLOOR_SETUP_TASKS = ("enter_bulk_mode", "prepare_table")
FLOOR_AFTER_TASKS = ("report", *TEARDOWN_TASKS)


def pipeline_chunks(bench: Bench) -> int:
    """How many chunks the pipeline's manifest holds: a gzip part is one where the parts load
    as stored (PostgreSQL); staging cuts the input into ``chunk_size`` pieces (MySQL)."""
    if bench.engine.name == "postgres":
        return len(bench.source.keys)
    size = parse_size(bench.chunk_size or DEFAULT_CHUNK_SIZE)
    return max(1, chunk_count(bench.source.raw_bytes, size))


def airflow_floor(bench: Bench, db: TestDatabase) -> Outcome:
    """Airflow's own share: the pipeline's task graph, with tasks that do nothing, on the same
    deployment (as many mapped load tasks as the pipeline deals batches, at most the pipeline's
    sessions at once). Its wall time is what scheduling and task start-up cost before any work;
    the table stays empty."""
    bench.engine.create_table(db, bench.dataset, indexed=True)
    dag_id = f"bench_airflow_floor_{db.name}"
    source = AIRFLOW_FLOOR_DAG.format(
        dag_id=dag_id,
        chunks=batch_count(
            bench.source.raw_bytes,
            pipeline_chunks(bench),
            sessions=bench.parallel,
            batch_bytes=DEFAULT_BATCH_BYTES,
        ),
        parallel=bench.parallel,
        setup=FLOOR_SETUP_TASKS,
        after=FLOOR_AFTER_TASKS,
    )
    run = bench.cluster.run(dag_id, source, {}, timeout=600)
    if not run.ok or run.wall_seconds is None:
        raise RuntimeError(
            f"no-op DAG run {run.state}:\n" + bench.cluster.diagnostics(dag_id)[-4000:]
        )
    tasks = len(run.tasks)
    note = f"the pipeline's {tasks} task instances doing nothing; DAG run wall (queued->end)"
    return Outcome(
        run.wall_seconds,
        note,
        expected=bench.engine.checksum(db, bench.dataset),  # nothing loaded, nothing changed
        details={"task_instances": tasks, "running_s": run.running_seconds},
    )


CASES: dict[str, Callable[[Bench, TestDatabase], Outcome]] = {
    "naive": naive,
    "s3_to_sql": s3_to_sql,
    "pipeline": pipeline,
    "pipeline_staged": pipeline_staged,
    "pgloader": pgloader,
    "mariadb_import": mariadb_import,
    "floor": floor,
    "floor_unlogged": floor_unlogged,
    "airflow_floor": airflow_floor,
}
#: ``--cases peers`` stands for these
PEER_CASES = ("s3_to_sql", "pgloader", "mariadb_import")
