"""Steps that a teardown undoes refuse to run once what follows them has run in their DAG run.

A teardown (``restore_table``, ``exit_bulk_mode``) runs once what it undoes has ended, and
Airflow clears it with its setup or with any task in its scope, so it runs again after them. Two
kinds of clear re-run such a step without it: clearing ``claim_table`` alone (not a setup, so
nothing pairs it with its teardown; ``airflow tasks clear -t`` without ``-d``, the REST API's
default), and "only failed" after the step failed (its teardown, which ran anyway, is not
failed, so it stays as it was). Run on, the step's change would outlive the run: a claim no one
releases, a table without its indexes, a server left in bulk mode, a reload's withdraw that
nothing loads back under a run that stays green. So the step asks Airflow first for the states
of the tasks after it in its DAG run, and fails, changing nothing, when one of them has already
started (or ended) instead of waiting for it.

Which tasks: a setup (``prepare_table``, ``enter_bulk_mode``) watches its teardowns, the tasks
directly downstream of it marked as such; a task cleared with a failed load's setups may find a
``finalize_table`` still marked upstream-failed after it, and goes on. ``claim_table``, whose
reload withdraw only the loads after it put back and only the report checks, watches every task
downstream of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException

#: states of a watched task that has not run: never run or cleared; or dropped from a mapping
NOT_STARTED = frozenset({None, "removed"})


def started_after_step_error(
    step: str, states: Mapping[str, str | None], outlives: str
) -> str | None:
    """The error a step fails with when a task after it has a state, or ``None``.

    Every task watched waits for the step, so in an attempt of the step none of them has a state
    yet (``None``: not run, or cleared with the step; ``removed``: an earlier mapping's instance
    that will not run). One with a state (running, waiting to retry, ended) ran in an earlier
    attempt and was not cleared with the step.

    :param states: the watched task instances' states by task id (``<task id>_<map index>`` for a
        mapped one, as Airflow gives them).
    :param outlives: what the step's change would leave behind after the run, for the message.
    """
    started = {task: state for task, state in sorted(states.items()) if state not in NOT_STARTED}
    if not started:
        return None
    listed = ", ".join(f"{task} ({state})" for task, state in list(started.items())[:5])
    more = f" and {len(started) - 5} more" if len(started) > 5 else ""
    return (
        f"{step} was cleared to run again without the tasks after it, which already ran in this "
        f"DAG run: {listed}{more}. Run on, {outlives}. Nothing was changed. To load again, clear "
        f"{step} together with its downstream tasks (or the whole DAG run)."
    )


def _watched(operator: BaseOperator, whole_downstream: bool) -> list[str]:
    if whole_downstream:
        return sorted(operator.get_flat_relative_ids(upstream=False))
    return sorted(t.task_id for t in operator.downstream_list if t.is_teardown)


def _states_in_run(
    context: Context, task_ids: Iterable[str], map_index: int
) -> dict[str, str | None]:
    ti = context["ti"]
    run_id = context["run_id"]
    # a mapped task group's step watches its own instance only
    states = ti.get_task_states(
        dag_id=ti.dag_id,
        task_ids=list(task_ids),
        run_ids=[run_id],
        map_index=map_index if map_index >= 0 else None,
    )
    return dict(states.get(run_id, {}))


def refuse_if_run_on(
    operator: BaseOperator, context: Context, outlives: str, *, whole_downstream: bool = False
) -> None:
    """Fail the task (without retries) when a task after it already ran in this DAG run.

    Watches the teardowns directly downstream of ``operator``, or with ``whole_downstream`` every
    task downstream of it (see :func:`started_after_step_error`). A task with none (an operator
    used on its own, or run outside a DAG) asks nothing.
    """
    if not operator.has_dag():
        return
    watched = _watched(operator, whole_downstream)
    if not watched:
        return
    map_index = getattr(context["ti"], "map_index", -1)
    map_index = map_index if isinstance(map_index, int) else -1
    error = started_after_step_error(
        operator.task_id, _states_in_run(context, watched, map_index), outlives
    )
    if error:
        raise AirflowFailException(error)
