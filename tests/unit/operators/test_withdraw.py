from __future__ import annotations

import pytest

from airflow_bulkload.knobs import parse_flag


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (True, True),
        (False, False),
        ("True", True),
        ("false", False),
        (" TRUE ", True),
    ],
)
def test_reload_flag_reads_rendered_params(value: object, expected: bool) -> None:
    assert parse_flag(value, "reload") is expected


@pytest.mark.parametrize("value", ["maybe", "'; DROP TABLE t; --", "{{ params.reload }}", "1"])
def test_reload_flag_refuses_anything_else(value: str) -> None:
    with pytest.raises(ValueError, match="reload must be True, False"):
        parse_flag(value, "reload")
