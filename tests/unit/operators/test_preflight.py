"""The operator's parsing of its (possibly templated) arguments; its run is integration-tested."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_bulkload.operators import PreflightCheckOperator

MB = 1_000_000


def _op(**kwargs: object) -> PreflightCheckOperator:
    return PreflightCheckOperator(task_id="p", table="t", conn_id="c", **kwargs)  # type: ignore[arg-type]


def _chunks(n: int) -> list[dict[str, object]]:
    return [
        {"uri": f"s3://b/k{i}", "checksum": "x", "bytes": 200 * MB, "rows": 10, "index": i}
        for i in range(n)
    ]


def test_manifest_as_chunk_list_dict_or_estimate() -> None:
    summary = _op(manifest=_chunks(3))._input_summary()
    assert summary is not None and summary.chunk_count == 3 and summary.total_rows == 30
    summary = _op(manifest={"chunks": _chunks(2), "sort_key": ["id"]})._input_summary()
    assert summary is not None and summary.sorted_by == ("id",)
    summary = _op(input_bytes="5000000000", input_rows="10", sorted_by=["id"])._input_summary()
    assert summary is not None and summary.total_bytes == 5 * 10**9 and not summary.staged
    assert _op()._input_summary() is None


def test_knobs_auto_or_explicit_including_rendered_text() -> None:
    options = _op()._options()
    assert (options.parallelism, options.drop_indexes, options.sort, options.chunk_size) == (
        None,
        None,
        None,
        None,
    )
    options = _op(parallelism="6", drop_indexes="false", sort=True, chunk_size=300 * MB)._options()
    assert (options.parallelism, options.drop_indexes, options.sort, options.chunk_size) == (
        6,
        False,
        True,
        300 * MB,
    )


def test_load_start_and_duration() -> None:
    options = _op(load_start="2024-06-02T04:30:00", expected_duration=90)._options()
    assert options.load_start == datetime(2024, 6, 2, 4, 30, tzinfo=UTC)
    assert options.expected_duration == timedelta(minutes=90)
    assert _op()._options().load_start is not None


def test_bad_method_and_fail_on_are_refused_by_validate() -> None:
    with pytest.raises(ValueError):
        _op(method="ftp").validate()
    with pytest.raises(ValueError):
        _op(fail_on="fatal").validate()
