"""The operator's parsing of its (possibly templated) arguments; its run is integration-tested."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from airflow_bulkload.advice import InputSummary
from airflow_bulkload.operators import PreflightCheckOperator

MB = 1_000_000


def _op(**kwargs: object) -> PreflightCheckOperator:
    return PreflightCheckOperator(task_id="p", table="t", conn_id="c", **kwargs)  # type: ignore[arg-type]


def _chunks(n: int) -> list[dict[str, object]]:
    return [
        {"uri": f"s3://b/k{i}", "checksum": "x", "bytes": 200 * MB, "rows": 10, "index": i}
        for i in range(n)
    ]


def _summary(op: PreflightCheckOperator) -> InputSummary | None:
    return op._input_summary(op._read_manifest())


def test_manifest_as_chunk_list_dict_or_estimate() -> None:
    summary = _summary(_op(manifest=_chunks(3)))
    assert summary is not None and summary.chunk_count == 3 and summary.total_rows == 30
    summary = _summary(_op(manifest={"chunks": _chunks(2), "sort_key": ["id"]}))
    assert summary is not None and summary.sorted_by == ("id",)
    summary = _summary(_op(input_bytes="5000000000", input_rows="10", sorted_by=["id"]))
    assert summary is not None and summary.total_bytes == 5 * 10**9 and not summary.staged
    assert _summary(_op()) is None


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


def test_load_batches_deal_the_manifests_chunks_one_batch_per_session() -> None:
    op = _op(manifest={"chunks": _chunks(8)}, load_batch_size="2GB")
    batches = op._load_batches(op._read_manifest(), 2, op._load_batch_bytes())
    assert [len(b) for b in batches] == [4, 4]
    assert sorted(c["index"] for b in batches for c in b) == list(range(8))  # each chunk once
    # a bound smaller than a session's share makes more, smaller batches
    op = _op(manifest=_chunks(8), load_batch_size="500MB")
    assert len(op._load_batches(op._read_manifest(), 2, op._load_batch_bytes())) == 4
    # rendered empty: one task per chunk
    op = _op(manifest=_chunks(3), load_batch_size="")
    assert op._load_batches(op._read_manifest(), 2, op._load_batch_bytes()) == [
        [c] for c in _chunks(3)
    ]


@pytest.mark.parametrize("size", ["0", "-1GB", "lots", True])
def test_load_batch_size_that_is_no_size_is_refused(size: object) -> None:
    with pytest.raises(ValueError, match=r"load_batch_size|size"):
        _op(load_batch_size=size).validate()


def test_load_batches_without_load_batch_size_is_a_wiring_error() -> None:
    with pytest.raises(ValueError, match="needs load_batch_size"):
        _op().load_batches()


@pytest.mark.parametrize("groups", ["[{'index': 0}]", ["group 0"]])
def test_staging_groups_that_are_not_the_plans_group_dicts_are_refused(groups: object) -> None:
    """A Jinja template renders text unless the DAG renders native objects: say so, read nothing."""
    op = _op(manifest="s3://b/staging/manifest.json", staging_groups=groups, aws_conn_id=None)
    with pytest.raises(ValueError, match="staging groups must be the plan task's list"):
        op._read_manifest()


@pytest.mark.parametrize("manifest", [None, {"chunks": []}])
def test_staging_groups_without_a_manifest_uri_to_write_are_refused(manifest: object) -> None:
    op = _op(manifest=manifest, staging_groups=[{"index": 0}], aws_conn_id=None)
    with pytest.raises(ValueError, match="staging_groups need the manifest's S3 URI"):
        op._read_manifest()
