"""Runs of a DAG on an :class:`~tests.e2e.airflow_cluster.AirflowCluster`: backfills of chosen
dates, the states of a run and its task instances, and clearing them as a user does."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from tests.e2e.airflow_cluster import AirflowCluster


def next_dates(cluster: AirflowCluster, dag_id: str, days: int) -> list[str]:
    """The scheduler's next run (catchup=False: the latest due one) and the ``days - 1`` dates
    before it: a backfill of them already holds the date the scheduler would run, so no
    scheduled run joins in. (Started just before midnight UTC, the next day's scheduled run may
    still join in, find no input and fail the test.)"""
    next_run = datetime.fromisoformat(
        cluster.query("SELECT next_dagrun FROM dag WHERE dag_id = ?", (dag_id,))[0][0]
    ).date()
    return [str(next_run - timedelta(days=n)) for n in reversed(range(days))]


def start_backfill(
    cluster: AirflowCluster, dag_id: str, dates: list[str], conf: dict[str, Any] | None = None
) -> None:
    """``airflow backfill create`` of ``dates`` (one run at a time, ``conf`` as every run's
    Params), then unpause the DAG so the scheduler runs them."""
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


def backfill(
    cluster: AirflowCluster, dag_id: str, dates: list[str], conf: dict[str, Any] | None = None
) -> list[tuple[Any, ...]]:
    """:func:`start_backfill`, then wait until every run of the DAG succeeded; fail as soon as
    one fails. Returns the runs' (run_id, run_type, state)."""
    start_backfill(cluster, dag_id, dates, conf)

    def finished() -> list[tuple[Any, ...]] | None:
        runs = cluster.query(
            "SELECT run_id, run_type, state FROM dag_run WHERE dag_id = ?", (dag_id,)
        )
        if any(state == "failed" for _, _, state in runs):
            raise AssertionError(cluster.failure(f"a run failed: {runs}", dag_id))
        done = len(runs) >= len(dates) and all(state == "success" for _, _, state in runs)
        return runs if done else None

    runs: list[tuple[Any, ...]] = cluster.wait_for(
        f"the backfill runs of {dates} to succeed", finished, 360, 2
    )
    return runs


def the_run(cluster: AirflowCluster, dag_id: str) -> str:
    """The id of the DAG's run, once there is one."""
    runs = cluster.wait_for(
        "a run",
        lambda: cluster.query("SELECT run_id FROM dag_run WHERE dag_id = ?", (dag_id,)),
        120,
    )
    return str(runs[0][0])


def task_states(cluster: AirflowCluster, dag_id: str, run_id: str) -> dict[str, tuple[Any, int]]:
    """(state, try number) of each unmapped task instance of the run, by the task's own name
    (its id less the group's)."""
    rows = cluster.query(
        "SELECT task_id, state, try_number FROM task_instance"
        " WHERE dag_id = ? AND run_id = ? AND map_index < 0",
        (dag_id, run_id),
    )
    return {task_id.rsplit(".", 1)[-1]: (state, tries) for task_id, state, tries in rows}


def run_state(cluster: AirflowCluster, dag_id: str, run_id: str) -> str:
    return str(
        cluster.query(
            "SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
        )[0][0]
    )


def wait_run_ended(cluster: AirflowCluster, dag_id: str, run_id: str, timeout: float = 300) -> str:
    """The run's state once it succeeded or failed."""

    def ended() -> str | None:
        state = run_state(cluster, dag_id, run_id)
        return state if state in ("success", "failed") else None

    return str(cluster.wait_for("the run to end", ended, timeout, 2))


def wait_task_ran_again(
    cluster: AirflowCluster, dag_id: str, run_id: str, task: str, tries: int, timeout: float = 300
) -> dict[str, tuple[Any, int]]:
    """Once ``task`` (its own name) ran past try ``tries`` and the run has ended: the states."""

    def ran() -> dict[str, tuple[Any, int]] | None:
        states = task_states(cluster, dag_id, run_id)
        ended = run_state(cluster, dag_id, run_id) in ("success", "failed")
        return states if states[task][1] > tries and ended else None

    return dict(cluster.wait_for(f"{task} to run again and the run to end", ran, timeout, 2))


def clear(cluster: AirflowCluster, dag_id: str, run_id: str, *args: str) -> str:
    """``airflow tasks clear <dag> <args>`` over the run's logical date only, without asking.
    (Airflow 3.3's ``-t`` matches a substring of the task ids, not a regular expression.)"""
    [(day,)] = cluster.query("SELECT date(logical_date) FROM dag_run WHERE run_id = ?", (run_id,))
    return cluster.cli_ok("tasks", "clear", dag_id, *args, "-s", day, "-e", day, "-y")


def run_logs(cluster: AirflowCluster, dag_id: str, run_id: str) -> str:
    """Every task log of the run, concatenated."""
    return "".join(p.read_text(errors="replace") for p in cluster.task_logs(dag_id, run_id))
