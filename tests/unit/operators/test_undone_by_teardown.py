"""Steps that a teardown undoes refuse to run once that teardown has ended in their DAG run."""

from __future__ import annotations

from typing import Any

import pytest
from airflow.sdk import DAG
from airflow.sdk.exceptions import AirflowFailException

from airflow_bulkload.operators.undone_by_teardown import (
    ENDED_STATES,
    refuse_if_teardown_ended,
    teardown_ended_error,
)
from airflow_bulkload.pipeline import bulk_load_table


@pytest.mark.parametrize(
    "state",
    [None, "scheduled", "queued", "running", "up_for_retry", "deferred", "restarting", "weird"],
)
def test_a_teardown_still_to_run_lets_the_step_run(state: str | None) -> None:
    assert teardown_ended_error("g.claim_table", "g.restore_table", state, "x") is None


@pytest.mark.parametrize("state", sorted(ENDED_STATES))
def test_a_teardown_that_already_ended_stops_the_step_and_says_how_to_load_again(
    state: str,
) -> None:
    error = teardown_ended_error("g.claim_table", "g.restore_table", state, "the claim stays")
    assert error is not None
    assert f"without g.restore_table, which already ended in this DAG run ({state})" in error
    assert "run on, the claim stays. Nothing was changed." in error
    assert "clear g.claim_table together with its downstream tasks" in error


class _TaskInstance:
    """What a step asks of Airflow's task instance: the states of tasks in its DAG run."""

    dag_id = "d"

    def __init__(self, states: dict[str, dict[str, str | None]]) -> None:
        self.states = states
        self.asked: list[dict[str, Any]] = []

    def get_task_states(self, **query: Any) -> dict[str, dict[str, str | None]]:
        self.asked.append(query)
        return self.states


def pipeline_task(task_id: str) -> Any:
    with DAG("d", schedule=None) as dag:
        bulk_load_table(
            table="public.t",
            conn_id="pg",
            source="s3://in/p/",
            staging="s3://stage/",
            reload=True,
            drop_indexes=True,  # literal, so prepare's checks pass without pre-flight's advice
        )
    return dag.get_task(f"load_public_t.{task_id}")


@pytest.mark.parametrize(
    ("step", "teardown"),
    [
        ("claim_table", "restore_table"),
        ("prepare_table", "restore_table"),
        ("enter_bulk_mode", "exit_bulk_mode"),
    ],
)
def test_each_step_fails_without_retries_before_touching_the_server_once_its_teardown_ended(
    step: str, teardown: str
) -> None:
    """``execute`` asks first: the fake context has no connection, so anything after the
    question would fail otherwise."""
    teardown_id = f"load_public_t.{teardown}"
    ti = _TaskInstance({"run": {teardown_id: "success"}})
    with pytest.raises(AirflowFailException, match=rf"{teardown_id}, which already ended"):
        pipeline_task(step).execute({"ti": ti, "run_id": "run", "params": {}})
    assert ti.asked == [{"dag_id": "d", "task_ids": [teardown_id], "run_ids": ["run"]}]


@pytest.mark.parametrize(
    "states", [{}, {"run": {}}, {"run": {"load_public_t.restore_table": None}}]
)
def test_a_teardown_not_yet_run_or_unknown_lets_the_step_go_on(states: dict[str, Any]) -> None:
    refuse_if_teardown_ended(
        pipeline_task("claim_table"), {"ti": _TaskInstance(states), "run_id": "run"}, "x"
    )  # type: ignore[arg-type]


def test_an_operator_with_no_teardown_after_it_asks_nothing() -> None:
    from airflow_bulkload.operators import ClaimTableOperator

    ti = _TaskInstance({})
    with DAG("d", schedule=None):
        claim = ClaimTableOperator(task_id="claim_table", table="public.t", conn_id="pg")
    refuse_if_teardown_ended(claim, {"ti": ti, "run_id": "run"}, "x")  # type: ignore[arg-type]
    assert ti.asked == []
