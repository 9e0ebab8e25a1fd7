"""Pre-flight advice: what will make a load slow or risky, with the measured reasons.

Pure rules over plain inputs (:class:`PreflightInputs`): the table from the dialect's
``describe_table``, a summary of the staged input, an RDS instance summary and server settings.
:func:`evaluate` returns a :class:`PreflightReport` with findings and a recommended
:class:`LoadPlan`.
"""

from airflow_bulkload.advice.engine import evaluate
from airflow_bulkload.advice.models import (
    Finding,
    InputSummary,
    InstanceSummary,
    LoadOptions,
    LoadPlan,
    PreflightInputs,
    PreflightReport,
    Severity,
)
from airflow_bulkload.advice.plan import recommend_plan

__all__ = [
    "Finding",
    "InputSummary",
    "InstanceSummary",
    "LoadOptions",
    "LoadPlan",
    "PreflightInputs",
    "PreflightReport",
    "Severity",
    "evaluate",
    "recommend_plan",
]
