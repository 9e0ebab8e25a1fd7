from __future__ import annotations

import pytest

from airflow_bulkload.knobs import parse_bool


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
    assert parse_bool(value, "reload") is expected


@pytest.mark.parametrize(
    "value",
    [
        "maybe",
        "'; DROP TABLE t; --",
        "{{ params.reload }}",
        "1",
        "auto",
        " AUTO ",
        None,
        "None",
        "",
    ],
)
def test_reload_flag_refuses_anything_else_auto_and_none_too(value: object) -> None:
    """``reload`` decides what is taken back out: it has no "auto", and ``None`` (a template or
    an argument that said nothing) is not quietly "off"."""
    with pytest.raises(ValueError, match=r"reload must be True or False \(any case\), got"):
        parse_bool(value, "reload")  # type: ignore[arg-type]
