"""What every pre-flight rule takes: the inputs and both plans, and the severities it emits."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from airflow_bulkload.advice.models import Finding, LoadPlan, PreflightInputs, Severity

INFO, WARN, ERROR = Severity.INFO, Severity.WARN, Severity.ERROR


@dataclass(frozen=True)
class RuleContext:
    inputs: PreflightInputs
    plan: LoadPlan  # what the load will run with
    recommended: LoadPlan  # what the advice would choose

    @property
    def table_name(self) -> str:
        return str(self.inputs.table.table)


Rule = Callable[[RuleContext], Iterator[Finding]]
