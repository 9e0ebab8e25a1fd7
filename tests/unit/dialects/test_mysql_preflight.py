"""MySQL pre-flight reads: interpreting the server's global variables."""

from __future__ import annotations

import pytest

from airflow_bulkload.dialects.mysql.catalog import server_facts_from_variables


def test_plain_mysql_has_no_s3_role_variables() -> None:
    facts = server_facts_from_variables(
        "10.11.19-MariaDB", {"local_infile": "ON", "innodb_doublewrite": "ON"}
    )
    assert facts.local_infile is True and facts.innodb_doublewrite is True
    assert facts.s3_role is None and facts.extra == {}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("OFF", False),
        ("0", False),
        ("DETECT_ONLY", False),
        ("DETECT_AND_RECOVER", True),
        ("?", None),
    ],
)
def test_doublewrite_values(value: str, expected: bool | None) -> None:
    assert (
        server_facts_from_variables("8.0", {"innodb_doublewrite": value}).innodb_doublewrite
        is expected
    )


def test_aurora_role_variables() -> None:
    unset = server_facts_from_variables(
        "8.0.mysql_aurora.3.05.2",
        {"aurora_load_from_s3_role": "", "aws_default_s3_role": "", "aurora_version": "3.05.2"},
    )
    assert unset.s3_role == "" and unset.extra == {"aurora_version": "3.05.2"}
    role = "arn:aws:iam::123456789012:role/load"
    assert server_facts_from_variables("8.0", {"aws_default_s3_role": role}).s3_role == role
    assert (
        server_facts_from_variables(
            "8.0", {"aurora_load_from_s3_role": role, "aws_default_s3_role": "other"}
        ).s3_role
        == role
    )
    assert server_facts_from_variables("8.0", {"local_infile": "OFF"}).local_infile is False


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1", 1), (" 2 ", 2), ("0", 0), ("", None), ("abc", None), ("²", None), ("1.0", None)],
)
def test_autoinc_lock_mode_is_read_when_it_is_a_number(value: str, expected: int | None) -> None:
    facts = server_facts_from_variables("10.11", {"innodb_autoinc_lock_mode": value})
    assert facts.extra.get("innodb_autoinc_lock_mode") == expected
    assert "innodb_autoinc_lock_mode" not in server_facts_from_variables("10.11", {}).extra
