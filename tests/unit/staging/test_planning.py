from __future__ import annotations

from datetime import UTC, datetime

import pytest

from airflow_bulkload.staging.planning import (
    STAGED_FORMAT,
    SourceFile,
    chunk_count,
    chunk_name,
    duckdb_sort_type,
    even_chunk_size,
    fit_chunk_size,
    input_fingerprint,
    parse_size,
    resolve_sort_types,
    run_segment,
    safe_segment,
    staging_prefix,
    temp_space_needed,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("256MB", 256_000_000),
        ("256 mb", 256_000_000),
        ("1GiB", 1024**3),
        ("1.5GB", 1_500_000_000),
        ("10k", 10_000),
        ("4096", 4096),
        (4096, 4096),
        ("1", 1),
    ],
)
def test_parse_size(text: str | int, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MB", "-1MB", "0", "12 parsecs", "1e9", True])
def test_parse_size_refuses_nonsense(text: object) -> None:
    with pytest.raises(ValueError):
        parse_size(text)  # type: ignore[arg-type]


def test_safe_segment_keeps_plain_names_and_disambiguates_changed_ones() -> None:
    assert safe_segment("public.events") == "public.events"
    changed = {safe_segment(v) for v in ("a/b", "a_b", "a b", "a?b")}
    assert len(changed) == 4
    assert all("/" not in s and " " not in s for s in changed)
    assert safe_segment("a/b") == safe_segment("a/b")  # deterministic


def test_run_segment_prefers_the_data_interval_over_the_run_id() -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    end = datetime(2026, 1, 2, tzinfo=UTC)
    by_interval = run_segment(data_interval_start=start, data_interval_end=end, run_id="manual_1")
    assert by_interval == run_segment(
        data_interval_start=start, data_interval_end=end, run_id="scheduled_2"
    )
    other_date = run_segment(
        data_interval_start=end, data_interval_end=datetime(2026, 1, 3, tzinfo=UTC)
    )
    assert other_date != by_interval
    assert run_segment(run_id="manual__2026-01-01T00:00:00+00:00").startswith("manual__2026")
    with pytest.raises(ValueError):
        run_segment()


def test_staging_prefix_is_deterministic_and_namespaced() -> None:
    prefix = staging_prefix(
        "s3://bucket/staging/",
        dag_id="nightly",
        table="public.events",
        run="r1",
        fingerprint="ab" * 32,
    )
    assert prefix == "s3://bucket/staging/nightly/public.events/r1/abababababababab/"
    with pytest.raises(ValueError, match="S3 URI"):
        staging_prefix("/tmp/x", dag_id="d", table="t", run="r", fingerprint="f")


def test_chunk_names_sort_in_order() -> None:
    assert chunk_name(7, "gzip") == "chunk-00007.csv.gz"
    assert chunk_name(7, "none") == "chunk-00007.csv"
    names = [chunk_name(i, "gzip") for i in (0, 9, 10, 99, 100, 1023)]
    assert names == sorted(names)


def test_fingerprint_changes_with_any_source_attribute_or_option() -> None:
    base = [SourceFile("s3://b/a.csv", 10, "etag1"), SourceFile("s3://b/b.csv", 20, "etag2")]
    options = {"chunk_size": 100, "sort_key": ["id"]}
    fp = input_fingerprint(base, options)
    assert fp == input_fingerprint(list(reversed(base)), options)  # order of listing is irrelevant
    assert fp != input_fingerprint([base[0], SourceFile("s3://b/b.csv", 21, "etag2")], options)
    assert fp != input_fingerprint([base[0], SourceFile("s3://b/b.csv", 20, "etag3")], options)
    assert fp != input_fingerprint(base[:1], options)
    assert fp != input_fingerprint(base, {**options, "chunk_size": 200})
    assert len(fp) == 64


def test_chunk_count_and_fit() -> None:
    assert chunk_count(0, 10) == 0
    assert chunk_count(10, 10) == 1
    assert chunk_count(11, 10) == 2
    assert fit_chunk_size(1000, 10, 100, grow=False, what="x") == 10
    with pytest.raises(ValueError, match="max_map_length = 100"):
        fit_chunk_size(1001, 10, 100, grow=False, what="x")
    grown = fit_chunk_size(1001, 10, 100, grow=True, what="x")
    assert chunk_count(1001, grown) <= 100


@pytest.mark.parametrize(
    ("total", "size", "expected"),
    [
        (344, 256, 172),  # 256 + 88 before: one load session idle most of the load
        (1000, 100, 100),  # already even
        (1001, 100, 91),  # 11 chunks either way
        (50, 256, 256),  # one chunk: left as asked
        (0, 256, 256),
    ],
)
def test_even_chunk_size_keeps_the_count_and_evens_the_sizes(
    total: int, size: int, expected: int
) -> None:
    even = even_chunk_size(total, size)
    assert even == expected
    assert even <= size
    assert chunk_count(total, even) == chunk_count(total, size)


def test_temp_space_counts_downloads_expansion_and_sort_spill() -> None:
    local = [SourceFile("/data/a.csv", 1000, "1")]
    assert temp_space_needed(local, sort=False, chunk_size=100) == 1000 + 200
    assert temp_space_needed(local, sort=True, chunk_size=100) == 2000 + 200
    remote_gz = [SourceFile("s3://b/a.csv.gz", 1000, "e")]
    assert temp_space_needed(remote_gz, sort=False, chunk_size=10**9) == 1000 + 5000 + 2 * 5000


@pytest.mark.parametrize(
    ("sql_type", "duck"),
    [
        ("bigint", "BIGINT"),
        ("integer", "INTEGER"),
        ("int(11)", "INTEGER"),
        ("INT UNSIGNED", "BIGINT"),
        ("bigint unsigned", "UBIGINT"),
        ("smallint", "SMALLINT"),
        ("numeric(12,2)", "DECIMAL(12,2)"),
        ("decimal(10)", "DECIMAL(10,0)"),
        ("numeric", "DOUBLE"),
        ("timestamp without time zone", "TIMESTAMP"),
        ("timestamp(6) with time zone", "TIMESTAMPTZ"),
        ("datetime(3)", "TIMESTAMP"),
        ("date", "DATE"),
        ("uuid", "UUID"),
        ("text", "VARCHAR"),
        ("character varying(20)", "VARCHAR"),
        ("some_enum", "VARCHAR"),
        (None, "VARCHAR"),
        ("bigint); DROP TABLE x; --", "VARCHAR"),
    ],
)
def test_duckdb_sort_type(sql_type: str | None, duck: str) -> None:
    assert duckdb_sort_type(sql_type) == duck


def test_resolve_sort_types_from_map_or_list() -> None:
    assert resolve_sort_types(["a", "b"], {"a": "bigint"}) == ["BIGINT", "VARCHAR"]
    assert resolve_sort_types(["a", "b"], ["int", "date"]) == ["INTEGER", "DATE"]
    assert resolve_sort_types(["a"], None) == ["VARCHAR"]
    with pytest.raises(ValueError):
        resolve_sort_types(["a", "b"], ["int"])


def test_staged_format_uses_an_unquoted_null_word() -> None:
    assert STAGED_FORMAT.null == "NULL"
    assert STAGED_FORMAT.format == "csv" and not STAGED_FORMAT.header
    assert STAGED_FORMAT.effective_escape == STAGED_FORMAT.quote == '"'


def test_upload_args_travel_with_a_group_but_do_not_change_the_fingerprint() -> None:
    """A mapped stage_group and collect_staging write with the plan's upload arguments; the
    same input staged with and without them is the same staged input."""
    from airflow_bulkload.staging.stager import StagingOptions

    sse = StagingOptions(upload_args={"ServerSideEncryption": "aws:kms"})
    assert StagingOptions.from_dict(sse.to_dict()).upload_args == {
        "ServerSideEncryption": "aws:kms"
    }
    assert sse.fingerprint_options() == StagingOptions().fingerprint_options()
    with pytest.raises(ValueError, match="ContentEncoding"):
        StagingOptions(upload_args={"ContentEncoding": "br"})


def test_max_errors_stages_the_input_and_shapes_its_fingerprint() -> None:
    from airflow_bulkload.staging.manifest import FileFormat
    from airflow_bulkload.staging.planning import direct_refusal
    from airflow_bulkload.staging.stager import StagingOptions

    source = SourceFile("s3://b/in/a.csv", 10, "etag")
    assert direct_refusal([source], FileFormat(), sort_key=[]) is None
    assert "max_errors" in (direct_refusal([source], FileFormat(), sort_key=[], max_errors=3) or "")
    assert (
        StagingOptions(max_errors=3).fingerprint_options() != StagingOptions().fingerprint_options()
    )
    for bad in (-1, True, "3"):
        with pytest.raises(ValueError, match="max_errors"):
            StagingOptions(max_errors=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="S3 folder"):
        StagingOptions(max_errors=1, reject_uri="s3://b/rejects.csv")


def test_presorted_input_declares_its_order_without_a_sort() -> None:
    from airflow_bulkload.staging.options import StagingOptions

    declared = StagingOptions(presorted_key=["id"])
    assert declared.ordered_by == ["id"] and not declared.sort_key
    assert StagingOptions(sort_key=["id"], sort_types=["BIGINT"]).ordered_by == ["id"]
    assert StagingOptions().ordered_by is None
    # the manifest says what order the input is in: a new declaration is a new manifest, and
    # inputs staged before the option existed keep their fingerprint
    assert declared.fingerprint_options() != StagingOptions().fingerprint_options()
    assert "presorted_key" not in StagingOptions().fingerprint_options()
    with pytest.raises(ValueError, match="not both"):
        StagingOptions(sort_key=["id"], sort_types=["BIGINT"], presorted_key=["id"])
