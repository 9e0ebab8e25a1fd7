from __future__ import annotations

import json

import pytest

from airflow_bulkload.advice import (
    InputSummary,
    InstanceSummary,
    PreflightReport,
    Severity,
    evaluate,
)
from airflow_bulkload.advice.models import failing_severities, format_bytes
from airflow_bulkload.staging.manifest import ChunkSpec, Manifest
from tests.unit.advice.factories import MB, inputs, instance, table


def test_report_round_trips_through_json_and_counts() -> None:
    report = evaluate(inputs("mysql", table(pk={}, fks=1, triggers=("t",))))
    data = json.loads(json.dumps(report.to_dict()))
    assert PreflightReport.from_dict(data) == report
    assert data["counts"]["warn"] == len(report.by_severity(Severity.WARN))


def test_format_table_shows_findings_fixes_sources_and_plan() -> None:
    text = evaluate(inputs("mysql", table(pk={}), vcpus=16)).format_table()
    assert "WARN" in text and "no_primary_key" in text
    assert "fix:" in text and "[aurora-mysql-file-load-performance]" in text
    assert "Plan: parallelism=10" in text
    assert max(len(line) for line in text.splitlines()) <= 110


@pytest.mark.parametrize(
    ("fail_on", "expected"),
    [
        ("error", {Severity.ERROR}),
        ("warn", {Severity.WARN, Severity.ERROR}),
        ("info", set(Severity)),
        (None, set()),
        ("never", set()),
        (["warn"], {Severity.WARN}),
    ],
)
def test_failing_severities(fail_on: object, expected: set[Severity]) -> None:
    assert failing_severities(fail_on) == expected  # type: ignore[arg-type]


def test_input_summary_from_manifest() -> None:
    chunks = [
        ChunkSpec(
            uri=f"s3://b/k{i}.gz", checksum="x", rows=10, bytes=size, raw_bytes=size * 4, index=i
        )
        for i, size in enumerate([200 * MB, 50 * MB])
    ]
    manifest = Manifest(
        "fp", {}, None, chunks, sort_key=["id"], total_rows=20, total_bytes=250 * MB
    )
    summary = InputSummary.from_manifest(manifest)
    assert summary.chunk_bytes == (200 * MB, 50 * MB)
    assert summary.total_rows == 20 and summary.raw_bytes == 1000 * MB
    assert summary.sorted_by == ("id",)
    assert InputSummary.from_dict(json.loads(json.dumps(summary.to_dict()))) == summary
    from_dicts = InputSummary.from_chunks([c.to_dict() for c in chunks])
    assert from_dicts.chunk_bytes == summary.chunk_bytes and from_dicts.sorted_by is None


def test_instance_summary_round_trips() -> None:
    summary = instance(s3_role_parameters={"aws_default_s3_role": "arn"})
    assert InstanceSummary.from_dict(json.loads(json.dumps(summary.to_dict()))) == summary


def test_format_bytes() -> None:
    assert format_bytes(256 * MB) == "256 MB"
    assert format_bytes(1_500_000_000) == "1.5 GB"
    assert format_bytes(12) == "12 B"
