"""The benchmark's cases. Each loads the same file into a freshly created table in a fresh
database and returns how long the timed part took; ``run.py`` verifies the table afterwards."""

from __future__ import annotations

import importlib.util
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from benchmarks.airflow_runs import AirflowSandbox
from benchmarks.datasets import Dataset
from benchmarks.engines import TABLE, Engine, connection_uri, duckdb_checksum
from benchmarks.summary import parse_report_line, stages_from_report
from tests.harness import TestDatabase

PIPELINE_MODULES = ("airflow_bulkload.pipeline", "airflow_bulkload.operators.table")


class CaseUnavailable(Exception):
    """The case cannot run here (a tool is not installed, a module not there yet)."""


@dataclass
class Bench:
    """Everything a case needs: the engine, the input and where to work."""

    engine: Engine
    dataset: Dataset
    data: Path  # the whole input, one CSV file with a header
    rows: int
    expected: tuple[int, ...]
    work: Path
    parallel: int
    s3_to_sql_rows: int
    bulk_mode: str
    _sandbox: AirflowSandbox | None = field(default=None, repr=False)

    @property
    def sandbox(self) -> AirflowSandbox:
        if self._sandbox is None:
            self._sandbox = AirflowSandbox(self.work / "airflow")
        return self._sandbox

    def parts(self, pattern: str) -> list[Path]:
        """The input split into ``parallel`` files named by ``pattern`` (cached)."""
        return split_csv(self.data, self.parallel, self.work / "parts", pattern)


@dataclass
class Outcome:
    """A case's timed result; ``expected`` overrides the whole file's checksum (for a slice)."""

    seconds: float
    note: str = ""
    stages: dict[str, float | None] = field(default_factory=dict)
    expected: tuple[int, ...] | None = None
    rows: int | None = None


def split_csv(path: Path, parts: int, out_dir: Path, pattern: str) -> list[Path]:
    """Split a CSV at line boundaries into ``parts`` files, each with the header. Quoted fields
    must not hold newlines (true of the generated datasets)."""
    paths = [out_dir / pattern.format(n=n) for n in range(parts)]
    if all(p.exists() for p in paths):
        return paths
    out_dir.mkdir(parents=True, exist_ok=True)
    size = path.stat().st_size
    with open(path, "rb") as src:
        header = src.readline()
        for n, target in enumerate(paths):
            end = size * (n + 1) // parts
            with open(target, "wb") as out:
                out.write(header)
                while src.tell() < end or n == parts - 1:
                    line = src.readline()
                    if not line:
                        break
                    out.write(line)
    return paths


def head_csv(path: Path, rows: int, target: Path) -> Path:
    """The header and the first ``rows`` rows of a CSV."""
    with open(path, "rb") as src, open(target, "wb") as out:
        for _ in range(rows + 1):
            line = src.readline()
            if not line:
                break
            out.write(line)
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


def _load_file(bench: Bench, db: TestDatabase, path: Path) -> Callable[[], None]:
    statement, stdin = bench.engine.load_statement(bench.dataset, path)
    return partial(bench.engine.run_client, db, statement, stdin)


# -- cases ----------------------------------------------------------------------------------------
def naive(bench: Bench, db: TestDatabase) -> Outcome:
    """One session, one COPY / LOAD DATA LOCAL of the whole file into the indexed table."""
    bench.engine.create_table(db, bench.dataset, indexed=True)
    return Outcome(timed(_load_file(bench, db, bench.data)))


def _parallel_load(bench: Bench, db: TestDatabase) -> float:
    parts = bench.parts(f"{bench.dataset.name}-part-{{n:03d}}.csv")
    return timed(lambda: in_parallel([_load_file(bench, db, p) for p in parts]))


def _run_phase(bench: Bench, db: TestDatabase, statements: list[str]) -> None:
    in_parallel([partial(bench.engine.run_client, db, s) for s in statements])


def floor(bench: Bench, db: TestDatabase) -> Outcome:
    """Parallel loads into a table with no index at all, then the PK and indexes built in
    parallel sessions."""
    bench.engine.create_table(db, bench.dataset, indexed=False)
    load = _parallel_load(bench, db)
    phases = bench.engine.index_phases(bench.dataset)
    build = sum(timed(partial(_run_phase, bench, db, phase)) for phase in phases)
    return Outcome(load + build, f"{bench.parallel} sessions", {"load": load, "indexes": build})


def floor_unlogged(bench: Bench, db: TestDatabase) -> Outcome:
    """PostgreSQL's absolute bound: parallel COPY into an UNLOGGED table without indexes."""
    if bench.engine.name != "postgres":
        raise CaseUnavailable("PostgreSQL only")
    bench.engine.create_table(db, bench.dataset, indexed=False, unlogged=True)
    return Outcome(_parallel_load(bench, db), "UNLOGGED, no indexes (bound)")


def pgloader(bench: Bench, db: TestDatabase) -> Outcome:
    """pgloader with its defaults into the indexed table."""
    if bench.engine.name != "postgres":
        raise CaseUnavailable("PostgreSQL only")
    _require("pgloader")
    bench.engine.create_table(db, bench.dataset, indexed=True)
    fields = ", ".join(f"{c} [null if blanks]" for c in bench.dataset.columns)
    command = bench.work / "pgloader.load"
    command.write_text(
        f"LOAD CSV FROM '{bench.data}' ({fields})\n"
        f"INTO {connection_uri(db)}?tablename={TABLE} ({', '.join(bench.dataset.columns)})\n"
        "WITH skip header = 1, fields terminated by ',', fields optionally enclosed by '\"',\n"
        "     fields escaped by double-quote;\n"
    )
    return Outcome(timed(lambda: _run_tool(["pgloader", "--quiet", str(command)])), "defaults")


def mariadb_import(bench: Bench, db: TestDatabase) -> Outcome:
    """mariadb-import --use-threads, one file per thread, into the indexed table."""
    if bench.engine.name != "mysql":
        raise CaseUnavailable("MySQL only")
    tool = _require("mariadb-import")
    bench.engine.create_table(db, bench.dataset, indexed=True)
    # mariadb-import names the table after the file name up to its first dot
    parts = bench.parts(f"{TABLE}.{{n:03d}}.csv")
    s = db.server
    argv = [tool, "--local", f"--use-threads={bench.parallel}", "--fields-terminated-by=,",
            "--fields-optionally-enclosed-by=\"", "--ignore-lines=1",
            f"--columns={','.join(bench.dataset.columns)}", "-h", s.host, "-P", str(s.port),
            "-u", s.user, *([f"-p{s.password}"] if s.password else []), db.name,
            *map(str, parts)]  # fmt: skip
    return Outcome(timed(lambda: _run_tool(argv)), f"--use-threads={bench.parallel}")


def _require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise CaseUnavailable(f"{tool} is not installed")
    return path


def _run_tool(argv: list[str]) -> None:
    import subprocess

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
    piece = head_csv(bench.data, rows, bench.work / "s3_to_sql-slice.csv")
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
        vcpus={parallel!r}, fail_on=None, bulk_mode={bulk_mode!r},
    )
"""

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
    """Our operators, through ``airflow dags test``; stage times from the load report."""
    reason = pipeline_available()
    if reason:
        raise CaseUnavailable(reason)
    bench.engine.create_table(db, bench.dataset, indexed=True)
    dag_id = "bench_pipeline"
    table = f"public.{TABLE}" if bench.engine.name == "postgres" else TABLE
    source = PIPELINE_DAG.format(
        dag_id=dag_id,
        table=table,
        conn_id=db.conn_id,
        # the same local file the other cases read (staging takes local paths on the worker)
        source=str(bench.data),
        staging=bench.sandbox.create_bucket("bench-staging") + f"/{db.name}",
        parallel=bench.parallel,
        bulk_mode=bench.bulk_mode,
    )
    run = bench.sandbox.run_dag(dag_id, source)
    report = parse_report_line(run.log)
    if not run.ok or report is None:
        raise RuntimeError(f"pipeline DAG failed:\n{run.log[-3000:]}")
    stages = pipeline_stages(stages_from_report(report), run.task_seconds)
    seconds = sum(v for v in stages.values() if v is not None)
    return Outcome(seconds, f"airflow dags test {run.wall_seconds:.0f} s wall", stages)


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


CASES: dict[str, Callable[[Bench, TestDatabase], Outcome]] = {
    "naive": naive,
    "s3_to_sql": s3_to_sql,
    "pipeline": pipeline,
    "pgloader": pgloader,
    "mariadb_import": mariadb_import,
    "floor": floor,
    "floor_unlogged": floor_unlogged,
}
#: ``--cases peers`` stands for these
PEER_CASES = ("s3_to_sql", "pgloader", "mariadb_import")
