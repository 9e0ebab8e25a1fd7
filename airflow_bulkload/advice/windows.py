"""RDS weekly maintenance windows (``ddd:hh24:mi-ddd:hh24:mi``, UTC) and overlap with a load."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

_DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
_WEEK_MINUTES = 7 * 24 * 60
_WINDOW = re.compile(
    r"^(?P<d1>[a-z]{3}):(?P<h1>\d{2}):(?P<m1>\d{2})-(?P<d2>[a-z]{3}):(?P<h2>\d{2}):(?P<m2>\d{2})$"
)


def _week_minute(day: str, hour: str, minute: str) -> int:
    if day not in _DAYS:
        raise ValueError(f"unknown weekday {day!r} in maintenance window")
    h, m = int(hour), int(minute)
    if not (0 <= h < 24 and 0 <= m < 60):
        raise ValueError(f"bad time {hour}:{minute} in maintenance window")
    return _DAYS.index(day) * 1440 + h * 60 + m


def parse_window(window: str) -> tuple[int, int]:
    """``sun:05:00-sun:05:30`` -> (start, end) in minutes since Monday 00:00 UTC.

    The end may be less than the start when the window wraps from Sunday into Monday.
    """
    match = _WINDOW.match(window.strip().lower())
    if match is None:
        raise ValueError(f"maintenance window {window!r} is not ddd:hh:mm-ddd:hh:mm")
    return (
        _week_minute(match["d1"], match["h1"], match["m1"]),
        _week_minute(match["d2"], match["h2"], match["m2"]),
    )


def _intervals(start: int, end: int) -> list[tuple[int, int]]:
    """Split a weekly interval into non-wrapping [start, end) pieces within one week."""
    if end > start:
        return [(start, end)]
    return [(start, _WEEK_MINUTES), (0, end)] if end > 0 else [(start, _WEEK_MINUTES)]


def window_overlap(window: str, load_start: datetime, duration: timedelta) -> datetime | None:
    """The first moment the load is inside the weekly ``window``, or ``None`` when they do not meet.

    The load is ``[load_start, load_start + duration)``. Naive datetimes are taken as UTC.
    """
    start = load_start if load_start.tzinfo else load_start.replace(tzinfo=UTC)
    start = start.astimezone(UTC)
    minutes = max(int(duration.total_seconds() // 60), 1)
    week_start = (start - timedelta(days=start.weekday())).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    load_from = int((start - week_start).total_seconds() // 60)
    load_to = load_from + minutes
    w_start, w_end = parse_window(window)
    first: int | None = None
    # the load may run into the following weeks; look at as many weeks as it spans
    for week in range(load_to // _WEEK_MINUTES + 1):
        for a, b in _intervals(w_start, w_end):
            a, b = a + week * _WEEK_MINUTES, b + week * _WEEK_MINUTES
            lo, hi = max(a, load_from), min(b, load_to)
            if lo < hi and (first is None or lo < first):
                first = lo
    return None if first is None else week_start + timedelta(minutes=first)
