"""The advice never recommends disabling Multi-AZ, unlogged tables or turning doublewrite off."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_bulkload.advice import Severity, evaluate
from airflow_bulkload.advice.anti_patterns import (
    AntiPatternRecommendedError,
    anti_patterns_in,
    check_no_anti_patterns,
)
from airflow_bulkload.advice.models import Finding
from airflow_bulkload.catalog import ServerFacts
from tests.unit.advice.factories import GB, MB, inputs, instance, staged, table


@pytest.mark.parametrize(
    "text",
    [
        "Disable Multi-AZ for the load window",
        "modify-db-instance --no-multi-az",
        "set MultiAZ to false",
        "CREATE UNLOGGED TABLE staging (...)",
        "ALTER TABLE t SET UNLOGGED before the load",
        "add skip-innodb_doublewrite to my.cnf",
        "set innodb_doublewrite = OFF",
        "turn off the doublewrite buffer",
    ],
)
def test_recommendations_of_anti_patterns_are_recognised(text: str) -> None:
    assert anti_patterns_in(text)
    with pytest.raises(AntiPatternRecommendedError):
        check_no_anti_patterns([Finding("x", Severity.INFO, "m", text)])


@pytest.mark.parametrize(
    "text",
    [
        "ALTER TABLE t SET LOGGED (rewrites the table)",
        "Turn innodb_doublewrite back ON (it needs a restart)",
        "Keep Multi-AZ on",
    ],
)
def test_fixes_that_undo_anti_patterns_are_allowed(text: str) -> None:
    assert not anti_patterns_in(text)


def _every_rule_firing() -> list[Finding]:
    """Inputs chosen so that every rule that can fire does, on both engines and all methods."""
    found: list[Finding] = []
    busy = table(
        pk={},
        indexes={"a": ["x"], "ab": ["x", "y"], "c": ["z"]},
        fks=2,
        triggers=("audit",),
        extra={"persistence": "unlogged"},
        size_bytes=10 * GB,
    )
    keyed = table(pk={"uuid": "varchar(36)", "n": "int"}, indexes={"a": ["x"]})
    bad_instance = instance(
        storage_type="gp2",
        allocated_gb=20,
        iops=None,
        multi_az=False,
        parameter_groups=("default.postgres16",),
        s3_import_roles=(),
        maintenance_windows=("mon:00:00-mon:23:59",),
    )
    for engine, methods in (("postgres", ("client", "rds_s3")), ("mysql", ("client", "aurora_s3"))):
        server = ServerFacts(
            engine,
            local_infile=False,
            aws_s3_installed=False,
            aws_s3_available=True,
            s3_role="",
            innodb_doublewrite=False,
        )
        for method in methods:
            for t in (busy, keyed):
                for inst in (bad_instance, instance(engine=f"aurora-{engine}", s3_import_roles=())):
                    report = evaluate(
                        inputs(
                            engine,
                            t,
                            input=staged(*[5 * MB] * 50, 3 * GB),
                            instance=inst,
                            server=server,
                            method=method,
                            sort=False,
                            drop_indexes=False,
                            parallelism=64,
                            chunk_size=5 * MB,
                            load_start=datetime(2024, 6, 3, 1, tzinfo=UTC),
                        )
                    )
                    found.extend(report.findings)
    return found


def test_no_finding_recommends_an_anti_pattern() -> None:
    found = _every_rule_firing()
    rules = {f.rule for f in found}
    # the sweep really exercised (nearly) every rule, including the anti-pattern detectors
    assert {
        "no_primary_key",
        "random_primary_key",
        "wide_primary_key",
        "input_not_in_key_order",
        "secondary_indexes",
        "redundant_index",
        "foreign_keys",
        "triggers",
        "chunk_size",
        "parallelism",
        "storage_iops",
        "maintenance_window",
        "default_parameter_group",
        "local_infile",
        "aws_s3_extension",
        "s3_role",
        "unlogged_table",
        "doublewrite_off",
    } <= rules
    for finding in found:
        assert not anti_patterns_in(finding.fix), finding.to_dict()
