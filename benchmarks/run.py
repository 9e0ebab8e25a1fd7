"""Bulk load benchmark: naive vs our pipeline vs peers vs the floor, as users run them: every case
reads the same gzip CSV parts from S3.

    .venv/bin/python -m benchmarks.run --engine postgres --rows 200000
    .venv/bin/python -m benchmarks.run --engine mysql --rows 200000 --cases naive,pipeline,floor
    .venv/bin/python -m benchmarks.run --engine postgres --scaling 1000000,10000000,50000000
    make bench ENGINE=mysql ROWS=10000000

The input: the generated dataset, shuffled, written as ``--parts`` gzip CSV files (each with a
header; default four per core) and put into a moto S3 server on 127.0.0.1 (its own process).

Cases (each on a freshly created table in a fresh database, verified by row count and an
order-independent checksum equal to the source before its time counts; every time is wall time):

- ``naive``: one session streams the parts from S3 one after another into ONE COPY FROM STDIN /
  LOAD DATA LOCAL into the indexed table.
- ``s3_to_sql``: Airflow's S3ToSqlOperator (inserts) on a slice of the first part, scaled
  linearly.
- ``pipeline``: ``airflow_bulkload.pipeline.bulk_load_table`` on a running Airflow deployment
  (api-server, scheduler with the LocalExecutor and ``--airflow-parallelism`` ≥ 2, dag-processor;
  SQLite metadata database; its workers import ``airflow_bulkload.preload`` as docs/scaling.md
  recommends, unless ``--no-preload``), triggered with ``airflow dags trigger``, reading the S3
  prefix. Its time is the DAG run's wall time, ``queued_at`` to ``end_date``; the stage times of
  the load report, their sum, and each task's peak RSS and temp disk are printed beside it.
- ``pgloader`` / ``mariadb_import``: the Debian peers (null when not installed), reading a local,
  gunzipped download of the same parts (they cannot read S3; the download is not timed).
- ``floor``: ``--parallel`` sessions stream the parts from S3 (psycopg COPY FROM STDIN; MySQLdb
  LOAD DATA LOCAL reading a FIFO) into a table with no index, then the primary key and the indexes
  are built in parallel sessions; the load and index phases are timed and reported separately.
- ``floor_unlogged`` (PostgreSQL): the same parallel load into an UNLOGGED table without indexes.

The naive and floor loads run in ``benchmarks/stream_load.py``, a process of their own. MySQL runs
with ``innodb_buffer_pool_size`` set to ``--mysql-buffer-pool`` (4 GiB; RDS gives InnoDB about 3/4
of the instance's memory) for the whole run, restored afterwards even when the run fails.

``--scaling`` runs the pipeline alone at each size: rows/s, and each task's peak RSS (sampled) and
peak temp disk (each task writes its temp files to a directory of its own).

Prints a table, saves a PNG chart under benchmarks/results/, and prints one JSON object as the
last line; the ratios in both are of wall times (pipeline / floor, naive / pipeline). Servers: see
tests/harness.py (``BULKLOAD_TEST_PG_HOST`` etc.).
"""

from __future__ import annotations

import argparse
import ast
import inspect
import keyword
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from benchmarks.cases import (
    CASES,
    PEER_CASES,
    PIPELINE_OWN_ARGUMENTS,
    Bench,
    CaseUnavailable,
    Services,
)
from benchmarks.cluster import DEFAULT_SCHEDULER_IDLE_SLEEP
from benchmarks.datasets import DATASETS
from benchmarks.engines import DEFAULT_BUFFER_POOL, ENGINES, duckdb_checksum, mysql_buffer_pool
from benchmarks.memory import ChildPeakRss
from benchmarks.s3data import MotoProcess, delete_prefix, upload, write_parts
from benchmarks.summary import (
    CaseResult,
    bar_chart,
    format_scaling,
    format_table,
    median_result,
    scaling_chart,
    scaling_json,
    summary_json,
)
from tests.harness import TestDatabase, check_server, configure_process_environment, fresh_database

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_CASES = "naive,pipeline,pipeline_staged,peers,floor,floor_unlogged"
ENGINE_ONLY = {
    "pgloader": "postgres",
    "floor_unlogged": "postgres",
    "pipeline_staged": "postgres",
    "mariadb_import": "mysql",
}
INPUT_BUCKET = "bench-input"


def parse_size(text: str) -> int:
    """``4G``, ``512M``, ``4294967296``; ``0`` or ``keep`` mean: leave the server's setting."""
    text = text.strip().upper().removesuffix("IB").removesuffix("B")
    if text in ("", "0", "KEEP"):
        return 0
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    if text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def airflow_default_parallelism() -> int:
    """Airflow's own default ``[core] parallelism``, as a deployment that leaves it alone runs.

    Each finished task may hold its LocalExecutor worker a few seconds more (Airflow 3.3's task
    supervisor waits up to ``[workers] min_heartbeat_interval`` for the exited process), so a
    deployment with barely more slots than the pipeline's fan-out queues its loads behind them.
    """
    from airflow.configuration import conf

    return int(conf.get_default_value("core", "parallelism"))


def parse_rows_list(text: str) -> list[int]:
    return [int(float(v)) for v in text.replace("_", "").split(",") if v.strip()]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    cpus = os.cpu_count() or 2
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=sorted(ENGINES), required=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="classic")
    parser.add_argument("--cases", default=DEFAULT_CASES, help=f"comma list [{DEFAULT_CASES}]")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the median counts")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--parallel", type=int, default=cpus, help="floor and pipeline sessions")
    parser.add_argument("--parts", type=int, default=4 * cpus, help="gzip CSV parts in S3")
    parser.add_argument("--s3-to-sql-rows", type=int, default=20_000)
    parser.add_argument("--bulk-mode", choices=("auto", "off"), default="auto")
    parser.add_argument("--chunk-size", default=None, help="the pipeline's (default: its own)")
    parser.add_argument(
        "--pipeline-arg",
        dest="pipeline_args",
        type=parse_pipeline_arg,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one more bulk_load_table argument for the pipeline cases, VALUE a Python literal, "
        "e.g. finalize_kwargs=\"{'maintenance_work_mem': '64MB'}\" or sort_by_primary_key=False "
        "(repeatable)",
    )
    parser.add_argument(
        "--airflow-parallelism",
        type=int,
        default=airflow_default_parallelism(),
        help="[core] parallelism of the LocalExecutor the pipeline runs on (at least 2; default "
        "Airflow's own, %(default)s)",
    )
    parser.add_argument(
        "--scheduler-idle-sleep",
        type=float,
        default=DEFAULT_SCHEDULER_IDLE_SLEEP,
        help="[scheduler] scheduler_idle_sleep_time of the deployment, seconds (default "
        "%(default)s, the e2e harness's; Airflow's own is 1.0)",
    )
    parser.add_argument(
        "--no-preload",
        dest="preload",
        action="store_false",
        help="the Airflow deployment's workers do not import airflow_bulkload.preload (each task "
        "imports the provider itself, as on a deployment without the recommended line)",
    )
    parser.add_argument(
        "--mysql-buffer-pool",
        type=parse_size,
        default=DEFAULT_BUFFER_POOL,
        help="innodb_buffer_pool_size for the run, e.g. 4G (0: leave the server's)",
    )
    parser.add_argument(
        "--scaling",
        type=parse_rows_list,
        default=None,
        help="the pipeline alone at each size, e.g. 1000000,10000000,50000000",
    )
    parser.add_argument("--work", type=Path, default=None, help="scratch dir (default: temp)")
    args = parser.parse_args(argv)
    names = [name for name, _ in args.pipeline_args]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        parser.error(f"--pipeline-arg gives {', '.join(repeated)} more than once")
    if args.scheduler_idle_sleep <= 0:
        parser.error("--scheduler-idle-sleep must be positive")
    if args.airflow_parallelism < 2:
        parser.error("--airflow-parallelism must be at least 2 (loads run side by side)")
    return args


def parse_pipeline_arg(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` -> ``(NAME, VALUE)``, VALUE read as a Python literal.

    NAME must be a ``bulk_load_table`` argument the bench does not set itself, and VALUE one whose
    ``repr`` reads back the same (it is written into the DAG file).
    """
    from airflow_bulkload.pipeline import bulk_load_table

    name, sep, value = text.partition("=")
    if not sep or not name.isidentifier() or keyword.iskeyword(name):
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        parsed = ast.literal_eval(value)
        if ast.literal_eval(repr(parsed)) != parsed:
            raise ValueError("does not read back")
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise argparse.ArgumentTypeError(
            f"{name}: {value[:80]!r} is not a Python literal (that reads back as written)"
        ) from None
    if name not in inspect.signature(bulk_load_table).parameters:
        raise argparse.ArgumentTypeError(f"{name}: not an argument of bulk_load_table")
    if name in PIPELINE_OWN_ARGUMENTS:
        raise argparse.ArgumentTypeError(
            f"{name}: the bench sets it itself (--chunk-size, --parallel, --bulk-mode, the cases)"
        )
    return name, parsed


def select_cases(spec: str, engine: str) -> list[str]:
    """``--cases`` expanded (``peers``) and filtered to the engine, in the given order."""
    names: list[str] = []
    for name in (n.strip() for n in spec.split(",") if n.strip()):
        expanded = PEER_CASES if name == "peers" else (name,)
        for case in expanded:
            if case not in CASES:
                raise SystemExit(f"unknown case {case!r}; known: {', '.join(CASES)}, peers")
            if ENGINE_ONLY.get(case, engine) == engine and case not in names:
                names.append(case)
    return names


def run_case(bench: Bench, name: str, keep: bool) -> CaseResult:
    """One run of one case in a fresh database, verified; failures become a null with a note."""
    server = check_server(bench.engine.name)
    with (
        ChildPeakRss(exclude=bench.services.pids) as rss,
        fresh_database(bench.engine.name, server, prefix="bl_bench", keep=keep) as db,
    ):
        try:
            outcome = CASES[name](bench, db)
        except CaseUnavailable as exc:
            return CaseResult(name, None, bench.rows, note=str(exc))
        except Exception as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            return CaseResult(name, None, bench.rows, note=f"failed: {str(exc)[:80]}")
        problem = verify(bench, db, outcome.expected)
    if problem:
        return CaseResult(name, None, bench.rows, rss.peak_mb, problem)
    peak = outcome.peak_rss_mb if outcome.peak_rss_mb is not None else rss.peak_mb
    return CaseResult(
        name, outcome.seconds, bench.rows, peak, outcome.note, outcome.stages, outcome.details
    )


def verify(bench: Bench, db: TestDatabase, expected: tuple[int, ...] | None = None) -> str | None:
    """None when the table holds exactly the source rows (count and checksum)."""
    expected = expected or bench.expected
    actual = bench.engine.checksum(db, bench.dataset)
    if actual == expected:
        return None
    return f"VERIFY FAILED: rows {actual[0]} (want {expected[0]}), checksum differs"


def prepare(args: argparse.Namespace, work: Path, services: Services, rows: int) -> Bench:
    """Generate ``rows`` rows as gzip parts, put them into S3, and compute their checksum."""
    dataset = DATASETS[args.dataset]
    print(
        f"generating {rows:,} {dataset.name} rows as {args.parts} gzip parts ...",
        file=sys.stderr,
    )
    parts = write_parts(dataset, rows, args.parts, work / f"parts-{rows}")
    source = upload(services.moto.server, INPUT_BUCKET, f"{dataset.name}-{rows}/", parts)
    print(
        f"input: s3://{INPUT_BUCKET}/{source.prefix}: {len(parts)} parts, "
        f"{source.stored_bytes / 1e6:,.1f} MB gzip ({source.raw_bytes / 1e6:,.1f} MB CSV)",
        file=sys.stderr,
    )
    services.moto.client().create_bucket(Bucket="bench-staging")
    return Bench(
        engine=ENGINES[args.engine],
        dataset=dataset,
        source=source,
        rows=rows,
        expected=duckdb_checksum(dataset, parts),
        work=work,
        parallel=args.parallel,
        s3_to_sql_rows=args.s3_to_sql_rows,
        bulk_mode=args.bulk_mode,
        services=services,
        chunk_size=args.chunk_size,
        pipeline_args=dict(args.pipeline_args),
    )


def input_description(bench: Bench) -> dict[str, Any]:
    return {
        "input": {
            "uri": bench.source.uri,
            "parts": len(bench.source.keys),
            "gzip_mb": round(bench.source.stored_bytes / 1e6, 1),
            "csv_mb": round(bench.source.raw_bytes / 1e6, 1),
        }
    }


def run_cases(args: argparse.Namespace, work: Path, services: Services, settings: str) -> None:
    cases = select_cases(args.cases, args.engine)
    bench = prepare(args, work, services, args.rows)
    results: list[CaseResult] = []
    for name in cases:
        runs = []
        for attempt in range(max(1, args.repeat)):
            print(f"{name} (run {attempt + 1}/{args.repeat}) ...", file=sys.stderr, flush=True)
            runs.append(run_case(bench, name, args.keep))
        results.append(median_result(runs))
    title = f"{args.engine}, {args.dataset}, {args.rows:,} rows"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    chart = bar_chart(
        RESULTS / f"bench-{args.engine}-{args.dataset}-{args.rows}-{stamp}.png", title, results
    )
    print(
        f"{title} from S3 ({len(bench.source.keys)} gzip parts; parallel sessions: "
        f"{args.parallel}; {settings}; chart: {chart})"
    )
    print(format_table(results))
    extra = input_description(bench) | {"settings": settings, "parallel": args.parallel}
    print(summary_json(args.engine, args.dataset, args.rows, results, extra))


def run_scaling(args: argparse.Namespace, work: Path, services: Services, settings: str) -> None:
    """The pipeline alone at each size of ``--scaling``."""
    points: list[CaseResult] = []
    for rows in args.scaling:
        bench = prepare(args, work, services, rows)
        print(f"pipeline at {rows:,} rows ...", file=sys.stderr, flush=True)
        result = run_case(bench, "pipeline", args.keep)
        points.append(result)
        print(format_scaling([result]).splitlines()[2], file=sys.stderr)
        delete_prefix(services.moto.server, INPUT_BUCKET, bench.source.prefix)
        shutil.rmtree(work / f"parts-{rows}", ignore_errors=True)
        shutil.rmtree(work / "local-parts", ignore_errors=True)
    title = f"pipeline scaling, {args.engine}, {args.dataset}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    chart = scaling_chart(
        RESULTS / f"scaling-{args.engine}-{args.dataset}-{stamp}.png", title, points
    )
    print(
        f"{title} from S3 ({args.parts} gzip parts per size; pipeline parallelism "
        f"{args.parallel}; {settings}; chart: {chart})"
    )
    print(format_scaling(points))
    extra = {"settings": settings, "parallel": args.parallel, "parts": args.parts}
    print(scaling_json(args.engine, args.dataset, points, extra))


@contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the cleanups (the buffer pool, the services) run."""

    def handler(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    configure_process_environment()
    logging.getLogger("botocore").setLevel(logging.WARNING)  # keep stdout to the results
    work = Path(args.work or tempfile.mkdtemp(prefix="bulkload-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    moto: MotoProcess | None = None
    services: Services | None = None
    try:
        with terminate_as_exit():
            server = check_server(args.engine)
            pool = (
                mysql_buffer_pool(server, args.mysql_buffer_pool)
                if args.engine == "mysql"
                else nullcontext("server's own settings")
            )
            with pool as settings:
                if args.pipeline_args:
                    given = ", ".join(f"{name}={value!r}" for name, value in args.pipeline_args)
                    settings = f"{settings}; pipeline with {given}"
                moto = MotoProcess(work / "moto.log")
                workers = "preload" if args.preload else "do not preload"
                settings = f"{settings}; workers {workers} the provider"
                if args.scheduler_idle_sleep != DEFAULT_SCHEDULER_IDLE_SLEEP:
                    settings = f"{settings}; scheduler idle sleep {args.scheduler_idle_sleep} s"
                services = Services(
                    work,
                    moto,
                    args.airflow_parallelism,
                    preload=args.preload,
                    scheduler_idle_sleep=args.scheduler_idle_sleep,
                )
                if args.scaling:
                    run_scaling(args, work, services, settings)
                else:
                    run_cases(args, work, services, settings)
    finally:
        if services is not None:
            services.close()
        if moto is not None:
            moto.close()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
