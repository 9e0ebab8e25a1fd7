"""Reading RDS instances and Aurora clusters from moto, and the findings they lead to."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from airflow_bulkload.advice import LoadOptions, PreflightInputs, Severity, evaluate
from airflow_bulkload.advice.instance import read_instance
from airflow_bulkload.catalog import ColumnInfo, IndexInfo, TableInfo, TableRef

ROLE = "arn:aws:iam::123456789012:role/s3-load"


def _table() -> TableInfo:
    return TableInfo(
        table=TableRef("events", "public"),
        columns=[ColumnInfo("id", "bigint", nullable=False)],
        primary_key=["id"],
        indexes=[IndexInfo("events_pkey", "", ["id"], is_unique=True, is_primary=True)],
        constraints=[],
        referencing_foreign_keys=[],
        triggers=[],
        reloptions={},
        estimated_rows=0,
        size_bytes=0,
    )


@pytest.fixture
def rds(aws_in_process: Any) -> Any:
    return boto3.client("rds", region_name="us-east-1")


def test_small_gp2_default_group_and_window_overlap_are_findings(rds: Any) -> None:
    rds.create_db_instance(
        DBInstanceIdentifier="pg-small",
        DBInstanceClass="db.r6g.2xlarge",
        Engine="postgres",
        AllocatedStorage=20,
        StorageType="gp2",
        MultiAZ=True,
        PreferredMaintenanceWindow="sun:05:00-sun:05:30",
        MasterUsername="admin",
        MasterUserPassword="not-a-secret-1",
    )
    summary = read_instance(db_instance_identifier="pg-small")
    assert summary.vcpus == 8
    assert summary.storage_type == "gp2" and summary.allocated_gb == 20
    assert summary.parameter_groups[0].startswith("default.")
    assert summary.maintenance_windows == ("sun:05:00-sun:05:30",)

    sunday_0430 = datetime(2024, 6, 2, 4, 30, tzinfo=UTC)
    report = evaluate(
        PreflightInputs(
            engine="postgres",
            table=_table(),
            instance=summary,
            options=LoadOptions(load_start=sunday_0430, expected_duration=timedelta(hours=2)),
        )
    )
    by_rule = {f.rule: f for f in report.findings}
    assert by_rule["storage_iops"].severity is Severity.WARN
    assert "100 baseline IOPS" in by_rule["storage_iops"].message
    assert by_rule["default_parameter_group"].severity is Severity.WARN
    assert by_rule["maintenance_window"].severity is Severity.WARN
    assert report.plan.parallelism == 7  # 8 vCPUs - 1


def test_clean_instance_has_no_instance_findings(rds: Any) -> None:
    rds.create_db_parameter_group(
        DBParameterGroupName="bulk-pg", DBParameterGroupFamily="postgres16", Description="bulk"
    )
    rds.create_db_instance(
        DBInstanceIdentifier="pg-big",
        DBInstanceClass="db.m6g.xlarge",
        Engine="postgres",
        AllocatedStorage=2000,
        StorageType="io1",
        Iops=20000,
        DBParameterGroupName="bulk-pg",
        PreferredMaintenanceWindow="sun:05:00-sun:05:30",
        MasterUsername="admin",
        MasterUserPassword="not-a-secret-1",
    )
    summary = read_instance(db_instance_identifier="pg-big")
    monday_noon = datetime(2024, 6, 3, 12, tzinfo=UTC)
    report = evaluate(
        PreflightInputs(
            "postgres", _table(), instance=summary, options=LoadOptions(load_start=monday_noon)
        )
    )
    assert not report.by_severity(Severity.WARN, Severity.ERROR), report.format_table()
    assert report.plan.parallelism == 3


def test_aurora_cluster_writer_roles_and_cluster_parameters(rds: Any) -> None:
    rds.create_db_cluster_parameter_group(
        DBClusterParameterGroupName="bulk-aurora",
        DBParameterGroupFamily="aurora-mysql8.0",
        Description="bulk",
    )
    rds.modify_db_cluster_parameter_group(
        DBClusterParameterGroupName="bulk-aurora",
        Parameters=[
            {
                "ParameterName": "aws_default_s3_role",
                "ParameterValue": ROLE,
                "ApplyMethod": "immediate",
            }
        ],
    )
    rds.create_db_cluster(
        DBClusterIdentifier="aurora1",
        Engine="aurora-mysql",
        MasterUsername="admin",
        MasterUserPassword="not-a-secret-1",
        DBClusterParameterGroupName="bulk-aurora",
        PreferredMaintenanceWindow="mon:01:00-mon:02:00",
    )
    rds.create_db_instance(
        DBInstanceIdentifier="aurora1-writer",
        DBInstanceClass="db.r6g.4xlarge",
        Engine="aurora-mysql",
        DBClusterIdentifier="aurora1",
    )
    summary = read_instance(db_cluster_identifier="aurora1")
    assert summary.identifier == "aurora1-writer" and summary.cluster_identifier == "aurora1"
    assert summary.is_aurora and summary.vcpus == 16
    assert summary.s3_role_parameters == {"aws_default_s3_role": ROLE}
    assert "mon:01:00-mon:02:00" in summary.maintenance_windows

    report = evaluate(
        PreflightInputs(
            "mysql", _table(), instance=summary, options=LoadOptions(method="aurora_s3")
        )
    )
    assert "s3_role" not in report.rules()
    assert "storage_iops" not in report.rules()
    assert report.plan.parallelism == 10  # the measured optimum on 16 vCPUs
    # the writer instance uses a default instance-level group: bulk mode cannot change it
    assert "default_parameter_group" in report.rules()

    # the same instance read by its own id finds the cluster
    assert read_instance(db_instance_identifier="aurora1-writer").cluster_identifier == "aurora1"


def test_aurora_cluster_without_s3_role_is_an_error(rds: Any) -> None:
    rds.create_db_cluster(
        DBClusterIdentifier="aurora2",
        Engine="aurora-mysql",
        MasterUsername="admin",
        MasterUserPassword="not-a-secret-1",
    )
    rds.create_db_instance(
        DBInstanceIdentifier="aurora2-writer",
        DBInstanceClass="db.r6g.large",
        Engine="aurora-mysql",
        DBClusterIdentifier="aurora2",
    )
    summary = read_instance(db_cluster_identifier="aurora2")
    report = evaluate(
        PreflightInputs(
            "mysql", _table(), instance=summary, options=LoadOptions(method="aurora_s3")
        )
    )
    assert [f.severity for f in report.findings if f.rule == "s3_role"] == [Severity.ERROR]


def test_unknown_class_falls_back_to_ec2_instance_types(rds: Any) -> None:
    rds.create_db_instance(
        DBInstanceIdentifier="metal",
        DBInstanceClass="db.m5.metal",
        Engine="mysql",
        AllocatedStorage=100,
        MasterUsername="admin",
        MasterUserPassword="not-a-secret-1",
    )
    assert read_instance(db_instance_identifier="metal").vcpus == 96
