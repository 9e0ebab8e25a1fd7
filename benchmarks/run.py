"""Bulk load benchmark: naive vs our pipeline vs peers vs the floor, in one run, same server and file.

    .venv/bin/python -m benchmarks.run --engine postgres --rows 200000 --cases naive,floor,peers
    make bench ENGINE=mysql ROWS=10000000

Cases (each on a freshly created table in a fresh database, verified by row count and an
order-independent checksum equal to the source before its time counts):

- ``naive``: one session, one COPY / LOAD DATA LOCAL of the whole file into the indexed table.
- ``s3_to_sql``: Airflow's S3ToSqlOperator (inserts) on a slice, scaled linearly.
- ``pipeline``: ``airflow_bulkload.pipeline.bulk_load_table`` through ``airflow dags test``,
  timed per stage from the load report (null, with the reason, until the module exists).
- ``pgloader`` / ``mariadb_import``: the Debian peers (null when not installed).
- ``floor``: the input in parts loaded by parallel client sessions into a table with no index,
  then the primary key and the indexes built in parallel sessions.
- ``floor_unlogged`` (PostgreSQL): parallel COPY into an UNLOGGED table without indexes.

Prints a table, saves a PNG bar chart under benchmarks/results/, and prints one JSON object as
the last line. Servers: see tests/harness.py (``BULKLOAD_TEST_PG_HOST`` etc.).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.cases import CASES, PEER_CASES, Bench, CaseUnavailable, Outcome
from benchmarks.datasets import DATASETS, generate
from benchmarks.engines import ENGINES, duckdb_checksum
from benchmarks.memory import ChildPeakRss
from benchmarks.summary import CaseResult, bar_chart, format_table, median_result, summary_json
from tests.harness import TestDatabase, check_server, fresh_database

RESULTS = Path(__file__).resolve().parent / "results"
DEFAULT_CASES = "naive,pipeline,peers,floor,floor_unlogged"
ENGINE_ONLY = {"pgloader": "postgres", "floor_unlogged": "postgres", "mariadb_import": "mysql"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engine", choices=sorted(ENGINES), required=True)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--dataset", choices=sorted(DATASETS), default="classic")
    parser.add_argument("--cases", default=DEFAULT_CASES, help=f"comma list [{DEFAULT_CASES}]")
    parser.add_argument("--repeat", type=int, default=1, help="runs per case; the median counts")
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--s3-to-sql-rows", type=int, default=20_000)
    parser.add_argument("--bulk-mode", choices=("auto", "off"), default="auto")
    parser.add_argument("--work", type=Path, default=None, help="scratch dir (default: temp)")
    return parser.parse_args(argv)


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
        ChildPeakRss() as rss,
        fresh_database(bench.engine.name, server, prefix="bl_bench", keep=keep) as db,
    ):
        try:
            outcome = CASES[name](bench, db)
        except CaseUnavailable as exc:
            return CaseResult(name, None, bench.rows, note=str(exc))
        except Exception as exc:
            print(f"{name}: FAILED: {exc}", file=sys.stderr)
            return CaseResult(name, None, bench.rows, note=f"failed: {str(exc)[:80]}")
        problem = verify(bench, db, outcome)
    if problem:
        return CaseResult(name, None, bench.rows, rss.peak_mb, problem)
    return CaseResult(name, outcome.seconds, bench.rows, rss.peak_mb, outcome.note, outcome.stages)


def verify(bench: Bench, db: TestDatabase, outcome: Outcome) -> str | None:
    """None when the table holds exactly the source rows (count and checksum)."""
    expected = outcome.expected or bench.expected
    actual = bench.engine.checksum(db, bench.dataset)
    if actual == expected:
        return None
    return f"VERIFY FAILED: rows {actual[0]} (want {expected[0]}), checksum differs"


def prepare(args: argparse.Namespace, work: Path) -> Bench:
    dataset = DATASETS[args.dataset]
    print(f"generating {args.rows:,} shuffled {dataset.name} rows ...", file=sys.stderr)
    [data] = generate(dataset, args.rows, work / "input")
    return Bench(
        engine=ENGINES[args.engine],
        dataset=dataset,
        data=data,
        rows=args.rows,
        expected=duckdb_checksum(dataset, data),
        work=work,
        parallel=args.parallel,
        s3_to_sql_rows=args.s3_to_sql_rows,
        bulk_mode=args.bulk_mode,
    )


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    cases = select_cases(args.cases, args.engine)
    work = Path(args.work or tempfile.mkdtemp(prefix="bulkload-bench-"))
    bench = prepare(args, work)
    results: list[CaseResult] = []
    try:
        for name in cases:
            runs = []
            for attempt in range(max(1, args.repeat)):
                print(f"{name} (run {attempt + 1}/{args.repeat}) ...", file=sys.stderr, flush=True)
                runs.append(run_case(bench, name, args.keep))
            results.append(median_result(runs))
    finally:
        if bench._sandbox is not None:
            bench._sandbox.close()
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    title = f"{args.engine}, {args.dataset}, {args.rows:,} rows"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    chart = bar_chart(
        RESULTS / f"bench-{args.engine}-{args.dataset}-{args.rows}-{stamp}.png", title, results
    )
    print(f"{title} (parallel sessions: {args.parallel}; chart: {chart})")
    print(format_table(results))
    print(summary_json(args.engine, args.dataset, args.rows, results))


if __name__ == "__main__":
    main()
