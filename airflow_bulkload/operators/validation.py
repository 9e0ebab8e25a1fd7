"""Argument checks that operators run when their task starts, once templates are rendered.

Airflow renders templated fields (a Jinja template, a DAG Param given in the UI, an XCom) only
when the task runs, so an operator's constructor only assigns its arguments. Each operator that
has arguments to check does so in ``validate()``, which ``execute`` calls first (through
:func:`validate_or_fail`) and unit tests call directly. A refused value is configuration, not a
passing problem: the task fails at once, without retries.
"""

from __future__ import annotations

from collections.abc import Callable

from airflow.sdk.exceptions import AirflowFailException

from airflow_bulkload.hooks.bulk_load import LOAD_METHODS


def validate_or_fail(validate: Callable[[], None]) -> None:
    """Run an operator's ``validate()``; a refused argument fails the task without retries.

    The ``ValueError`` that ``validate()`` raises becomes an ``AirflowFailException`` with the
    same message: a retry would render the same value and be refused again.
    """
    try:
        validate()
    except ValueError as exc:
        raise AirflowFailException(str(exc)) from exc


def check_method(method: str) -> None:
    """Refuse a load method this provider does not have."""
    if method not in LOAD_METHODS:
        raise ValueError(f"method must be one of {LOAD_METHODS}, got {method!r}")
