"""Run every rule over the inputs and build the report."""

from __future__ import annotations

from collections.abc import Iterable

from airflow_bulkload.advice.anti_patterns import check_no_anti_patterns
from airflow_bulkload.advice.models import PreflightInputs, PreflightReport
from airflow_bulkload.advice.plan import recommend_plan
from airflow_bulkload.advice.rules import RULES, RuleContext
from airflow_bulkload.catalog import EngineTraits


def evaluate(inputs: PreflightInputs, *, ignore_rules: Iterable[str] = ()) -> PreflightReport:
    """The findings and the recommended plan for ``inputs``.

    Rules judge the plan the load will run with (the author's explicit knobs over the recommended
    ones), and that is the report's ``plan``: an explicit argument always wins, advice only warns.
    The report carries the recommended plan too. ``ignore_rules`` drops findings by rule id.
    """
    EngineTraits.of(inputs.engine)  # an unknown engine is refused (ValueError) before any rule
    recommended = recommend_plan(inputs)
    options = inputs.options
    effective = recommended.resolve(
        parallelism=options.parallelism,
        drop_indexes=options.drop_indexes,
        sort=options.sort,
        chunk_size=options.chunk_size,
    )
    context = RuleContext(inputs=inputs, plan=effective, recommended=recommended)
    ignored = set(ignore_rules)
    findings = tuple(
        finding for rule in RULES for finding in rule(context) if finding.rule not in ignored
    )
    check_no_anti_patterns(findings)
    return PreflightReport(
        table=str(inputs.table.table),
        engine=inputs.engine,
        findings=findings,
        plan=effective,
        recommended=recommended,
    )
