from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_bulkload.bulk_mode.policy import (
    Lease,
    LeaseKey,
    decode_tag_value,
    default_bulk_settings,
    encode_tag_value,
    maintenance_window_overlaps,
    refuse_static,
    resolve_bulk_settings,
    split_leases,
    tag_safe,
    ttl_seconds,
)
from airflow_bulkload.exceptions import BulkModeRefusedError


def test_postgres_defaults_on_rds_are_in_parameter_units() -> None:
    assert default_bulk_settings("postgres", rds=True) == {
        "maintenance_work_mem": "1048576",
        "max_wal_size": "4096",
        "checkpoint_timeout": "1800",
    }
    assert default_bulk_settings("postgres", rds=False)["max_wal_size"] == "4GB"
    assert default_bulk_settings("aurora-postgresql", rds=True) == {
        "maintenance_work_mem": "1048576"
    }


def test_mysql_defaults_are_dynamic_only() -> None:
    settings = default_bulk_settings("mysql", rds=True)
    assert settings and not {"innodb_log_file_size", "innodb_log_buffer_size"} & set(settings)
    assert list(settings) == ["innodb_io_capacity_max", "innodb_io_capacity"]  # order matters
    assert default_bulk_settings("aurora-mysql", rds=True) == {}


def test_overrides_add_replace_and_drop() -> None:
    settings = resolve_bulk_settings(
        "postgres",
        {"max_wal_size": 8192, "checkpoint_timeout": None, "work_mem": "65536"},
        rds=True,
    )
    assert settings == {
        "maintenance_work_mem": "1048576",
        "max_wal_size": "8192",
        "work_mem": "65536",
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [("innodb_doublewrite", "0"), ("innodb_doublewrite", "OFF"), ("skip-innodb_doublewrite", "1")],
)
def test_doublewrite_off_is_refused(name: str, value: str) -> None:
    with pytest.raises(BulkModeRefusedError, match="doublewrite"):
        resolve_bulk_settings("mysql", {name: value}, rds=True)


def test_doublewrite_on_is_fine() -> None:
    assert (
        resolve_bulk_settings("mysql", {"innodb_doublewrite": "1"}, rds=True)["innodb_doublewrite"]
        == "1"
    )


@pytest.mark.parametrize("name", ["max_wal_size; DROP TABLE x", "", "a b", "x'y"])
def test_hostile_setting_names_are_refused(name: str) -> None:
    with pytest.raises(BulkModeRefusedError, match="not a valid server setting name"):
        resolve_bulk_settings("postgres", {name: "1"}, rds=False)


def test_static_needs_reboot_policy() -> None:
    with pytest.raises(BulkModeRefusedError, match="reboot_policy='allowed'"):
        refuse_static(["innodb_log_file_size"], "never", "db1")
    refuse_static(["innodb_log_file_size"], "allowed", "db1")
    refuse_static([], "never", "db1")


def test_lease_key_is_stable_and_distinct() -> None:
    a = LeaseKey.of("dag", "public.events", datetime(2024, 1, 1, tzinfo=UTC))
    assert a.token == LeaseKey.of("dag", "public.events", "2024-01-01T00:00:00+00:00").token
    assert a.token != LeaseKey.of("dag", "public.orders", "2024-01-01T00:00:00+00:00").token
    assert LeaseKey.of("dag", "t", None).logical_date == "-"
    assert len(a.token) == 20 and a.token.isalnum()


def test_split_leases() -> None:
    live, expired = split_leases([Lease("a", 10.0), Lease("b", 30.0)], now=20.0)
    assert [x.token for x in live] == ["b"] and [x.token for x in expired] == ["a"]


def test_ttl_must_be_positive() -> None:
    assert ttl_seconds(timedelta(minutes=2)) == 120
    with pytest.raises(ValueError):
        ttl_seconds(0)


@pytest.mark.parametrize("value", [None, "", "1024", "{DBInstanceClassMemory/32768}", "a,b c'd"])
def test_tag_values_round_trip_in_the_allowed_alphabet(value: str | None) -> None:
    encoded = encode_tag_value(value)
    assert tag_safe(encoded, 256) == encoded
    assert decode_tag_value(encoded) == value


def test_too_long_an_original_is_refused() -> None:
    with pytest.raises(BulkModeRefusedError, match="too long"):
        encode_tag_value("x" * 300)


@pytest.mark.parametrize(
    ("window", "start", "hours", "expected"),
    [
        ("sun:05:00-sun:05:30", datetime(2024, 1, 7, 4, 0), 2, True),  # Sunday 04:00 + 2 h
        ("sun:05:00-sun:05:30", datetime(2024, 1, 7, 6, 0), 2, False),
        ("sat:23:30-sun:00:30", datetime(2024, 1, 7, 0, 0), 1, True),  # crosses midnight
        ("mon:01:00-mon:01:30", datetime(2024, 1, 7, 23, 0), 3, True),  # crosses the week end
        ("bogus", datetime(2024, 1, 7, 0, 0), 1, False),
    ],
)
def test_maintenance_window_overlap(
    window: str, start: datetime, hours: int, expected: bool
) -> None:
    assert maintenance_window_overlaps(window, start, timedelta(hours=hours)) is expected


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("fsync", "off"),
        ("FSYNC", "OFF"),
        ("fsync", False),
        ("fsync", 0),
        ("full_page_writes", "no"),
        ("full-page-writes", "false"),
        ("synchronous_commit", "off"),
        ("Synchronous_Commit", "OFF"),
        ("innodb_flush_log_at_trx_commit", 0),
        ("innodb_flush_log_at_trx_commit", "2"),
        ("innodb_flush_method", "nosync"),
        ("innodb_doublewrite", "0"),
        # PostgreSQL takes any unique prefix of a boolean word
        ("fsync", "of"),
        ("full_page_writes", "fals"),
        ("synchronous_commit", " Fa "),
    ],
)
def test_durability_breaking_settings_are_refused(name: str, value: object) -> None:
    engine = "mysql" if name.lower().startswith("innodb") else "postgres"
    with pytest.raises(BulkModeRefusedError, match="refusing"):
        resolve_bulk_settings(engine, {name: value}, rds=True)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("fsync", "on"),
        ("synchronous_commit", "local"),
        ("innodb_flush_log_at_trx_commit", "1"),
        ("max_wal_size", "0"),
    ],
)
def test_durable_values_pass(name: str, value: str) -> None:
    engine = "mysql" if name.startswith("innodb") else "postgres"
    assert resolve_bulk_settings(engine, {name: value}, rds=True)[name] == value
