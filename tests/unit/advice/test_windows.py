from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_bulkload.advice.windows import parse_window, window_overlap

MONDAY = datetime(2024, 6, 3, tzinfo=UTC)


def test_parse_window() -> None:
    assert parse_window("mon:00:00-mon:00:30") == (0, 30)
    assert parse_window("Sun:23:30-Mon:00:30") == (6 * 1440 + 23 * 60 + 30, 30)
    for bad in ("sun 05:00", "xyz:01:00-sun:02:00", "sun:25:00-sun:26:00"):
        with pytest.raises(ValueError):
            parse_window(bad)


def test_overlap_inside_and_outside() -> None:
    window = "tue:03:00-tue:03:30"
    assert window_overlap(window, MONDAY + timedelta(days=1, hours=2), timedelta(hours=2)) == (
        MONDAY + timedelta(days=1, hours=3)
    )
    assert window_overlap(window, MONDAY + timedelta(days=1, hours=4), timedelta(hours=2)) is None
    # a load that ends exactly when the window starts does not overlap
    assert window_overlap(window, MONDAY + timedelta(days=1, hours=1), timedelta(hours=2)) is None


def test_overlap_across_the_week_boundary() -> None:
    window = "sun:23:30-mon:00:30"
    sunday_2300 = MONDAY + timedelta(days=6, hours=23)
    assert window_overlap(window, sunday_2300, timedelta(minutes=45)) == sunday_2300 + timedelta(
        minutes=30
    )
    assert window_overlap(window, MONDAY, timedelta(minutes=10)) == MONDAY
    # a long load reaches next week's window
    assert (
        window_overlap("mon:01:00-mon:01:30", MONDAY + timedelta(hours=2), timedelta(days=7))
        is not None
    )


def test_naive_datetimes_are_utc() -> None:
    naive = datetime(2024, 6, 4, 3, 10)
    assert window_overlap("tue:03:00-tue:03:30", naive, timedelta(minutes=5)) is not None
