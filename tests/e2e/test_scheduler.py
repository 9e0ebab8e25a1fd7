"""The PostgreSQL example DAG under a real scheduler: a backfill over two logical dates, with the
chunk loads of each run mapped and running two at a time.

Unlike ``airflow dags test`` (one process, one task at a time), here an api-server, a scheduler
with the LocalExecutor and a dag-processor run the DAG as a deployment does, so this is where the
pipeline's parallelism and ``max_active_tis_per_dagrun`` are real.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import combinations
from typing import Any

from airflow_bulkload.operators.report import TIMING_KEY
from tests.e2e.airflow_cluster import AirflowCluster
from tests.e2e.backfills import backfill, next_dates
from tests.e2e.example_load import ExampleLoad

ROWS = 8_000  # per date: with the fixture's 96KB chunks, six chunks each


def _ts(value: str) -> float:
    return datetime.fromisoformat(value).replace(tzinfo=UTC).timestamp()


def _spans(
    rows: list[tuple[Any, ...]], parse: Callable[[Any], float]
) -> dict[str, list[tuple[int, float, float]]]:
    """(run_id, map_index, start, end) rows -> each run's [(map_index, start, end)]."""
    by_run: dict[str, list[tuple[int, float, float]]] = {}
    for run_id, map_index, start, end in rows:
        by_run.setdefault(run_id, []).append((map_index, parse(start), parse(end)))
    return by_run


def _overlapping(spans: list[tuple[Any, float, float]]) -> list[tuple[Any, Any]]:
    return [(a, b) for (a, s1, e1), (b, s2, e2) in combinations(spans, 2) if s1 < e2 and s2 < e1]


def test_a_backfill_under_the_scheduler_loads_both_dates_once_with_parallel_chunk_loads(
    scheduled_example: tuple[ExampleLoad, AirflowCluster],
) -> None:
    example, cluster = scheduled_example
    example.rows = ROWS
    parallelism = int(cluster.env["BULKLOAD_EXAMPLE_PARALLELISM"])
    dag_id = example.dag_id
    cluster.wait_for_dag(dag_id)
    dates = next_dates(cluster, dag_id, 2)
    example.add_input(dates[0], seed=11)
    example.add_input(dates[1], seed=12, id_offset=ROWS)  # disjoint primary keys
    before = example.snapshot()

    started = time.monotonic()
    runs = backfill(cluster, dag_id, dates)
    print(f"backfill of {dates} took {time.monotonic() - started:.0f} s")
    assert sorted(run_type for _, run_type, _ in runs) == ["backfill", "backfill"], runs

    # both dates' inputs in the table, each once; table and server as before; ledger once
    example.assert_loaded_once(before)
    assert example.query("SELECT count(*), min(id), max(id) FROM events") == [
        (2 * ROWS, 1, 2 * ROWS)
    ]

    # The mapped chunk loads of a run overlapped in time, never more than `parallelism` at once:
    # as task instances (start to end, process start-up included) and in the pipeline's own
    # timings (the execute() window each load records for the report).
    instances = _spans(
        cluster.query(
            "SELECT run_id, map_index, start_date, end_date FROM task_instance"
            " WHERE dag_id = ? AND task_id LIKE '%.load' AND map_index >= 0 AND state = 'success'",
            (dag_id,),
        ),
        _ts,
    )
    marks: dict[tuple[str, int], dict[str, float]] = {}
    for run_id, map_index, value in cluster.query(
        "SELECT run_id, map_index, value FROM xcom WHERE dag_id = ?"
        " AND task_id LIKE '%.load' AND map_index >= 0 AND key = ?",
        (dag_id, TIMING_KEY),
    ):
        mark = json.loads(value) if isinstance(value, (str, bytes)) else value
        marks[(run_id, map_index)] = json.loads(mark) if isinstance(mark, str) else mark
    executes = _spans([(r, i, m["started"], m["ended"]) for (r, i), m in marks.items()], float)
    for name, by_run in (("task instances", instances), ("execute() timings", executes)):
        assert len(by_run) == 2 and all(len(spans) > 1 for spans in by_run.values()), by_run
        overlaps = {run_id: _overlapping(spans) for run_id, spans in by_run.items()}
        for run_id, spans in sorted(by_run.items()):
            t0 = min(s for _, s, _ in spans)
            timeline = ", ".join(f"[{i}] {s - t0:.2f}-{e - t0:.2f}" for i, s, e in sorted(spans))
            print(f"{name} of {run_id} (s): {timeline}; overlapping: {overlaps[run_id]}")
        assert any(overlaps.values()), f"no two chunk loads of a run overlapped ({name})"
        for spans in by_run.values():
            for _, start, _ in spans:  # as any load starts, at most `parallelism` are running
                assert sum(1 for _, s, e in spans if s <= start < e) <= parallelism, spans
