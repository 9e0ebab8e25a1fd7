from __future__ import annotations

import pytest

from airflow_bulkload.advice.instance_classes import ec2_instance_type, vcpus_for_class


@pytest.mark.parametrize(
    ("instance_class", "vcpus"),
    [
        ("db.r6g.4xlarge", 16),  # the Aurora MySQL load measurements
        ("db.r6g.2xlarge", 8),  # the RDS PostgreSQL measurements
        ("db.r5.2xlarge", 8),  # the random-key latency measurements
        ("db.m5.large", 2),
        ("db.m7g.xlarge", 4),
        ("db.x2iedn.32xlarge", 128),
        ("db.t3.micro", 2),
        ("db.t2.micro", 1),
        ("db.t4g.medium", 2),
        ("DB.R6I.24XLARGE", 96),
    ],
)
def test_known_classes(instance_class: str, vcpus: int) -> None:
    assert vcpus_for_class(instance_class) == vcpus


@pytest.mark.parametrize("instance_class", ["db.serverless", "db.m6i.metal", "r6g.large", ""])
def test_unknown_classes(instance_class: str) -> None:
    assert vcpus_for_class(instance_class) is None


def test_ec2_type() -> None:
    assert ec2_instance_type("db.r6g.large") == "r6g.large"
    assert ec2_instance_type("db.serverless") is None
