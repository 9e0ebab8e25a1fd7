"""The benchmark's command line: extra pipeline arguments."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from benchmarks.run import parse_args, parse_pipeline_arg


def test_pipeline_arguments_are_python_literals_in_the_order_given() -> None:
    args = parse_args(
        [
            "--engine",
            "postgres",
            "--pipeline-arg",
            "finalize_kwargs={'maintenance_work_mem': '64MB'}",
            "--pipeline-arg",
            "sort_by_primary_key=False",
        ]
    )
    assert args.pipeline_args == [
        ("finalize_kwargs", {"maintenance_work_mem": "64MB"}),
        ("sort_by_primary_key", False),
    ]
    assert parse_args(["--engine", "mysql"]).pipeline_args == []


@pytest.mark.parametrize("text", ["no_value", "=1", "bad name=1", "x=__import__('os')", "x=1+"])
def test_anything_but_a_name_and_a_literal_is_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_pipeline_arg(text)


def test_the_deployment_preloads_the_provider_unless_told_not_to() -> None:
    from benchmarks.cluster import BenchCluster
    from tests.e2e.airflow_cluster import PRELOAD_SETTINGS

    assert parse_args(["--engine", "postgres"]).preload is True
    assert parse_args(["--engine", "postgres", "--no-preload"]).preload is False
    preloading = BenchCluster(workdir=Path("/nonexistent"), base_env={})
    assert PRELOAD_SETTINGS in preloading.local_settings
    assert "task_policy" in preloading.local_settings
    plain = BenchCluster(workdir=Path("/nonexistent"), base_env={}, preload=False)
    assert PRELOAD_SETTINGS not in plain.local_settings


def test_the_scheduler_idle_sleep_is_the_harness_s_unless_given() -> None:
    from benchmarks.cluster import DEFAULT_SCHEDULER_IDLE_SLEEP, BenchCluster

    assert parse_args(["--engine", "postgres"]).scheduler_idle_sleep == 0.5
    assert DEFAULT_SCHEDULER_IDLE_SLEEP == 0.5
    given = parse_args(["--engine", "postgres", "--scheduler-idle-sleep", "0.1"])
    assert given.scheduler_idle_sleep == 0.1
    cluster = BenchCluster(workdir=Path("/nonexistent"), base_env={}, scheduler_idle_sleep=0.1)
    assert cluster.env["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] == "0.1"
    default = BenchCluster(workdir=Path("/nonexistent"), base_env={})
    assert default.env["AIRFLOW__SCHEDULER__SCHEDULER_IDLE_SLEEP_TIME"] == "0.5"
    with pytest.raises(SystemExit):
        parse_args(["--engine", "postgres", "--scheduler-idle-sleep", "0"])
