"""The benchmark's command line: extra pipeline arguments."""

from __future__ import annotations

import argparse

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
