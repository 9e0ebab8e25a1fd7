"""Steps that a teardown undoes refuse to run once that teardown has ended in their DAG run.

A teardown (``restore_table``, ``exit_bulk_mode``) runs once what it undoes has ended, and
Airflow clears it with its setup or with any task in its scope, so it runs again after them. Two
kinds of clear re-run such a step without it: clearing ``claim_table`` alone (not a setup, so
nothing pairs it with its teardown; ``airflow tasks clear -t`` without ``-d``, the REST API's
default), and "only failed" after the step failed (its teardown, which ran anyway, is not
failed, so it stays as it was). Run on, the step's change would outlive the run: a claim no one
releases, a table without its indexes, a server left in bulk mode, a reload's withdraw that
nothing loads back under a run that stays green. So the step asks Airflow for its teardowns'
states first and fails, changing nothing, when one has already ended.
"""

from __future__ import annotations

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

#: task instance states in which a task does not run again unless it is cleared
ENDED_STATES = frozenset({"success", "failed", "skipped", "upstream_failed", "removed"})


def teardown_ended_error(step: str, teardown: str, state: str | None, outlives: str) -> str | None:
    """The error a step fails with when its ``teardown`` is in ``state``, or ``None``.

    The teardown waits for the step, so if it has ended while the step runs, it ended in an
    earlier attempt and was not cleared with the step. ``None`` (not run yet, cleared with the
    step, or unknown): the teardown has still to run after the step.

    :param outlives: what the step's change would leave behind after the run, for the message.
    """
    if state not in ENDED_STATES:
        return None
    return (
        f"{step} was cleared to run again without {teardown}, which already ended in this DAG "
        f"run ({state}) and undoes it: run on, {outlives}. Nothing was changed. To load again, "
        f"clear {step} together with its downstream tasks (or the whole DAG run)."
    )


def refuse_if_teardown_ended(operator: BaseOperator, context: Context, outlives: str) -> None:
    """Fail the task (without retries) when a teardown right after it has ended in this run.

    See :func:`teardown_ended_error`. A task with no teardown directly downstream (an operator
    used on its own, or run outside a DAG) asks nothing.
    """
    if not operator.has_dag():
        return
    teardowns = sorted(t.task_id for t in operator.downstream_list if t.is_teardown)
    if not teardowns:
        return
    ti = context["ti"]
    run_id = context["run_id"]
    states = ti.get_task_states(dag_id=ti.dag_id, task_ids=teardowns, run_ids=[run_id])
    in_run = states.get(run_id, {})
    for teardown in teardowns:
        error = teardown_ended_error(operator.task_id, teardown, in_run.get(teardown), outlives)
        if error:
            raise AirflowFailException(error)
