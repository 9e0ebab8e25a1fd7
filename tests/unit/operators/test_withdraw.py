from __future__ import annotations

import pytest

from airflow_bulkload.operators.withdraw import parse_flag


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("True", True),
        ("false", False),
        (" 1 ", True),
        ("None", False),
        ("", False),
    ],
)
def test_reload_flag_reads_rendered_params(value: object, expected: bool) -> None:
    assert parse_flag(value, "reload") is expected


@pytest.mark.parametrize("value", ["maybe", "'; DROP TABLE t; --", "{{ params.reload }}"])
def test_reload_flag_refuses_anything_else(value: str) -> None:
    with pytest.raises(ValueError, match="reload must be true or false"):
        parse_flag(value, "reload")
