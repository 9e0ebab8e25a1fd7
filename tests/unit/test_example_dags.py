"""The example DAGs' schedule: a nightly run loads the day that has ended."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pendulum
import pytest
from airflow.timetables.base import TimeRestriction

DAGS = sorted((Path(__file__).resolve().parents[2] / "dags").glob("bulkload_*.py"))


@pytest.mark.parametrize("path", DAGS, ids=[p.stem for p in DAGS])
def test_the_midnight_run_has_the_day_that_ended_as_its_ds(path: Path) -> None:
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    timetable = module.dag.timetable
    midnight = pendulum.datetime(2026, 11, 22, tz="UTC")
    # the run due at 2026-11-22 00:00 covers 2026-11-21, whose files are complete by then
    following = timetable.next_dagrun_info(
        last_automated_data_interval=timetable.infer_manual_data_interval(
            run_after=midnight.subtract(days=1)
        ),
        restriction=_no_restriction(),
    )
    assert following is not None
    assert following.run_after == midnight
    assert following.logical_date.to_date_string() == "2026-11-21"


def _no_restriction() -> TimeRestriction:
    return TimeRestriction(earliest=None, latest=None, catchup=True)
