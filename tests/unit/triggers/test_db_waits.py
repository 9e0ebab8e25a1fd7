"""The database-wait triggers serialize what they need and never poll in a busy loop."""

from __future__ import annotations

from airflow_bulkload.triggers.db_waits import (
    MIN_POLL_INTERVAL,
    LoadSlotFreeTrigger,
    TableClaimTrigger,
)


def test_they_serialize_to_what_rebuilds_them() -> None:
    for trigger in (
        LoadSlotFreeTrigger(conn_id="c", table="t", slots=2, deadline=1.5, poll_interval=3),
        TableClaimTrigger(conn_id="c", table="t", load_id="l", deadline=1.5, poll_interval=3),
    ):
        path, kwargs = trigger.serialize()
        assert path.endswith(type(trigger).__qualname__)
        assert type(trigger)(**kwargs).serialize() == (path, kwargs)


def test_a_zero_or_negative_poll_interval_is_raised_to_the_minimum() -> None:
    for interval in (0, -5):
        trigger = LoadSlotFreeTrigger(
            conn_id="c", table="t", slots=1, deadline=0, poll_interval=interval
        )
        assert trigger.poll_interval == MIN_POLL_INTERVAL
