"""stage_group_size as a DAG author or a UI Param gives it."""

from __future__ import annotations

import pytest

from airflow_bulkload.operators.stage_groups import _group_bytes


@pytest.mark.parametrize("off", [None, "None", "none", "", " "])
def test_no_group_size_means_one_staging_task(off: object) -> None:
    assert _group_bytes(off) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "size"), [("4GB", 4_000_000_000), (1024, 1024), ("1KiB", 1024)])
def test_a_size_in_bytes_or_units(given: object, size: int) -> None:
    assert _group_bytes(given) == size  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, "0", "-1", "abc"])
def test_zero_negative_or_garbage_is_refused(bad: object) -> None:
    with pytest.raises(ValueError):
        _group_bytes(bad)  # type: ignore[arg-type]
