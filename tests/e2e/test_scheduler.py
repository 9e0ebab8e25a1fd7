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
from datetime import UTC, datetime, timedelta
from itertools import combinations
from typing import Any

from airflow_bulkload.operators.report import TIMING_KEY
from tests.e2e.airflow_cluster import AirflowCluster
from tests.e2e.example_load import ExampleLoad

ROWS = 8_000  # per date: with the fixture's 96KB chunks, six chunks each
BACKFILL_TIMEOUT = 360


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


def backfill(
    cluster: AirflowCluster, dag_id: str, dates: list[str], conf: dict[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """Backfill ``dates`` (one run at a time), unpause the DAG and wait until every run of it
    succeeded; fail as soon as one fails. Returns the runs' (run_id, run_type, state)."""
    cluster.wait_for_api()
    extra = ["--dag-run-conf", json.dumps(conf)] if conf else []
    cluster.cli_ok(
        "backfill",
        "create",
        "--dag-id",
        dag_id,
        "--from-date",
        dates[0],
        "--to-date",
        dates[-1],
        "--max-active-runs",
        "1",
        *extra,
    )
    cluster.cli_ok("dags", "unpause", dag_id)

    def finished() -> list[tuple[Any, ...]] | None:
        runs = cluster.query(
            "SELECT run_id, run_type, state FROM dag_run WHERE dag_id = ?", (dag_id,)
        )
        if any(state == "failed" for _, _, state in runs):
            raise AssertionError(f"a run failed: {runs}\n{cluster.diagnostics(dag_id)}")
        done = len(runs) >= len(dates) and all(state == "success" for _, _, state in runs)
        return runs if done else None

    return cluster.wait_for(  # type: ignore[no-any-return]
        f"the backfill runs of {dates} to succeed", finished, BACKFILL_TIMEOUT, 2
    )


def next_dates(cluster: AirflowCluster, dag_id: str, days: int) -> list[str]:
    """The scheduler's next run (catchup=False: the latest due one) and the ``days - 1`` dates
    before it: a backfill of them already holds the date the scheduler would run, so no
    scheduled run joins in. (Started just before midnight UTC, the next day's scheduled run may
    still join in, find no input and fail the test.)"""
    next_run = datetime.fromisoformat(
        cluster.query("SELECT next_dagrun FROM dag WHERE dag_id = ?", (dag_id,))[0][0]
    ).date()
    return [str(next_run - timedelta(days=n)) for n in reversed(range(days))]


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


def test_a_claim_cleared_alone_after_a_reload_run_refuses_and_the_runs_rows_stay(
    scheduled_example: tuple[ExampleLoad, AirflowCluster],
) -> None:
    """``airflow tasks clear -t claim_table`` without ``-d`` (the REST API's default) after a
    green ``reload`` run re-runs the claim alone: ``restore_table`` stays as it was. The claim
    must not take the table (nothing would release it) nor withdraw the run's rows (nothing
    would load them again, under a run that stayed green): it fails, changing nothing. Cleared
    with its downstream tasks, as its error says, the run loads again: every row once."""
    example, cluster = scheduled_example
    example.rows = 3_000
    dag_id = example.dag_id
    cluster.wait_for_dag(dag_id)
    [ds] = next_dates(cluster, dag_id, 1)
    example.add_input(ds, seed=21)
    before = example.snapshot()
    [(run_id, _, _)] = backfill(cluster, dag_id, [ds], conf={"reload": True})
    example.assert_loaded_once(before)
    claim = ".claim_table"  # Airflow 3.3's `tasks clear -t` matches a substring, not a regex

    def states() -> dict[str, tuple[str | None, int]]:
        rows = cluster.query(
            "SELECT task_id, state, try_number FROM task_instance"
            " WHERE dag_id = ? AND run_id = ? AND map_index < 0",
            (dag_id, run_id),
        )
        return {task_id.rsplit(".", 1)[-1]: (state, tries) for task_id, state, tries in rows}

    first = states()
    assert first["claim_table"][0] == "success" and first["restore_table"][0] == "success", first

    def claim_ended(after: int) -> dict[str, tuple[str | None, int]] | None:
        now = states()
        state, tries = now["claim_table"]
        run_state = cluster.query(
            "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
        )[0][0]
        done = tries > after and state in ("success", "failed") and run_state != "running"
        return now if done else None

    # the run's logical date is its data interval's start, the day before the input's ds
    [(logical,)] = cluster.query(
        "SELECT date(logical_date) FROM dag_run WHERE run_id = ?", (run_id,)
    )
    one_run = ["-s", logical, "-e", logical, "-y"]
    alone = cluster.cli_ok("tasks", "clear", dag_id, "-t", claim, *one_run)
    again = cluster.wait_for(
        "the claim cleared alone to end", lambda: claim_ended(first["claim_table"][1]), 120
    )
    assert again["claim_table"][0] == "failed", (alone, again)
    # nothing else ran again, and nothing changed on the server
    assert {k: v for k, v in again.items() if k != "claim_table"} == {
        k: v for k, v in first.items() if k != "claim_table"
    }
    example.assert_loaded_once(before)
    assert example.query("SELECT count(*) FROM bulkload.table_claims") == [(0,)]
    log = "".join(p.read_text(errors="replace") for p in cluster.task_logs(dag_id, run_id))
    assert "was cleared to run again without" in log and "Nothing was changed" in log

    # as the error says: with its downstream tasks the reload runs, green, every row once
    cluster.cli_ok("tasks", "clear", dag_id, "-t", claim, "-d", *one_run)

    def reloaded() -> bool:
        now = states()
        return now["claim_table"][1] > again["claim_table"][1] and now["report"][0] == "success"

    cluster.wait_for("the reload cleared with its downstream to succeed", reloaded, 300, 2)
    assert states()["claim_table"][0] == "success"
    example.assert_loaded_once(before)
    assert example.query("SELECT count(*) FROM bulkload.table_claims") == [(0,)]
