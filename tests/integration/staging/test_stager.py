"""Staging against the moto S3 server with real files: round trips, sorting, idempotence."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.manifest import FileFormat, Manifest
from airflow_bulkload.staging.planning import STAGED_FORMAT
from airflow_bulkload.staging.stager import (
    InsufficientTempSpaceError,
    Resources,
    StageResult,
    StagingOptions,
    stage,
)
from tests.harness import MotoServer
from tests.staged_csv import Row, parse_staged, write_csv

COLUMNS = ["id", "name", "note"]

TRICKY: list[Row] = [
    ("1", "comma, inside", "plain"),
    ("2", "embedded\nnewline", 'a "quoted" word'),
    ("3", "crlf\r\ninside", None),  # NULL
    ("4", "", "empty string, not NULL"),
    ("5", "NULL", "the text NULL"),
    ("6", "\\N", "backslash N is text"),
    ("7", "unicode: été 日本語 🚀", "  leading and trailing spaces  "),
    ("8", None, None),
    ("9", "back\\slash", '"'),
    ("10", "x" * 300, ",,,"),
]


def _stage(s3: Any, bucket: str, source: Any, **kwargs: Any) -> StageResult:
    resources = kwargs.pop("resources", Resources(temp_dir=kwargs.pop("temp_dir", None)))
    return stage(
        source,
        s3=s3,
        staging_uri=f"s3://{bucket}/staging",
        dag_id=kwargs.pop("dag_id", "dag"),
        table=kwargs.pop("table", "public.events"),
        run=kwargs.pop("run", "2026-01-01"),
        options=StagingOptions(**kwargs),
        resources=resources,
    )


def _chunk_rows(s3: Any, uri: str, compression: str = "gzip") -> tuple[list[Row], dict]:
    bucket, key = parse_s3_uri(uri)
    response = s3.get_object(Bucket=bucket, Key=key)
    stored = response["Body"].read()
    raw = gzip.decompress(stored) if compression == "gzip" else stored
    return parse_staged(raw.decode("utf-8")), {**response, "stored": stored}


def _all_rows(s3: Any, result: StageResult) -> list[Row]:
    rows: list[Row] = []
    for chunk in result.manifest.chunks:
        rows.extend(_chunk_rows(s3, chunk.uri, chunk.compression)[0])
    return rows


def _objects(s3: Any, bucket: str, prefix: str = "") -> dict[str, tuple[str, Any]]:
    listing = s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])
    return {o["Key"]: (o["ETag"], o["LastModified"]) for o in listing}


@pytest.fixture
def s3(moto_server: MotoServer) -> Any:
    return moto_server.client("s3")


def test_round_trip_of_tricky_values_with_header_and_crlf(
    s3: Any, s3_bucket: str, tmp_path: Path
) -> None:
    rows = TRICKY * 20
    source = write_csv(tmp_path / "tricky.csv", rows, header=COLUMNS, line_end="\r\n")
    result = _stage(
        s3, s3_bucket, str(source), file_format=FileFormat(header=True), chunk_size=1000
    )

    assert not result.skipped
    manifest = result.manifest
    assert len(manifest.chunks) > 3
    assert Counter(_all_rows(s3, result)) == Counter(rows)
    assert manifest.columns == COLUMNS
    assert manifest.file_format == STAGED_FORMAT.to_dict()
    assert manifest.total_rows == len(rows)
    assert manifest.source_count == 1
    for index, chunk in enumerate(manifest.chunks):
        chunk_rows, response = _chunk_rows(s3, chunk.uri)
        assert chunk.index == index
        assert chunk.uri.startswith(result.prefix)
        assert chunk.uri.endswith(f"chunk-{index:05d}.csv.gz")
        assert chunk.rows == len(chunk_rows)
        assert chunk.bytes == len(response["stored"])
        assert chunk.raw_bytes == len(gzip.decompress(response["stored"]))
        assert chunk.checksum == hashlib.sha256(response["stored"]).hexdigest()
        assert chunk.columns == COLUMNS
        assert response["ContentEncoding"] == "gzip"
        assert response["ContentType"].startswith("text/csv")
    # the manifest in S3 says the same as the returned one
    stored = Manifest.from_json(
        s3.get_object(Bucket=s3_bucket, Key=parse_s3_uri(result.manifest_uri)[1])["Body"].read()
    )
    assert stored == manifest


def test_sorted_by_numeric_key_from_an_s3_prefix_of_gzip_tsv(
    s3: Any, s3_bucket: str, tmp_path: Path
) -> None:
    ids = list(range(1, 1201))  # 9 < 10 < 100 numerically, not as text
    random.Random(5).shuffle(ids)
    rows = [(str(i), f"name {i}", None if i % 7 == 0 else f"note\t{i}") for i in ids]
    for part in range(3):
        local = write_csv(
            tmp_path / f"part{part}.tsv.gz", rows[part::3], delimiter="\t", line_end="\n"
        )
        s3.upload_file(str(local), s3_bucket, f"input/part{part}.tsv.gz")

    result = _stage(
        s3,
        s3_bucket,
        f"s3://{s3_bucket}/input/",
        file_format=FileFormat(delimiter="\t"),
        columns=COLUMNS,
        sort_key=["id"],
        sort_types=["BIGINT"],
        chunk_size=4000,
    )

    staged = _all_rows(s3, result)
    assert staged == sorted(rows, key=lambda r: int(r[0] or 0))
    chunks = result.manifest.chunks
    assert len(chunks) > 5
    assert result.manifest.sort_key == ["id"]
    assert result.manifest.sort_key_types == ["BIGINT"]
    assert result.manifest.source_count == 3
    for previous, current in itertools.pairwise(chunks):
        assert int(current.first_key[0]) > int(previous.last_key[0])  # type: ignore[index]


def test_sorted_by_composite_key(s3: Any, s3_bucket: str, tmp_path: Path) -> None:
    rows = [(str(g), f"k{k:02d}", f"v{g}-{k}") for g in (3, 20, 100, 9) for k in range(40, 0, -1)]
    random.Random(1).shuffle(rows)
    source = write_csv(tmp_path / "c.csv", rows, header=["grp", "key", "value"])
    result = _stage(
        s3,
        s3_bucket,
        str(source),
        file_format=FileFormat(header=True),
        sort_key=["grp", "key"],
        sort_types=["INTEGER", "VARCHAR"],
        chunk_size=300,
    )
    staged = _all_rows(s3, result)
    assert staged == sorted(rows, key=lambda r: (int(r[0] or 0), r[1]))
    chunks = result.manifest.chunks
    for previous, current in itertools.pairwise(chunks):
        first = (int(current.first_key[0]), current.first_key[1])  # type: ignore[index]
        last = (int(previous.last_key[0]), previous.last_key[1])  # type: ignore[index]
        assert first > last


def test_empty_file_gives_zero_chunks_and_a_manifest(
    s3: Any, s3_bucket: str, tmp_path: Path
) -> None:
    for name, content in (("empty.csv", b""), ("header_only.csv", b"id,name\r\n")):
        source = tmp_path / name
        source.write_bytes(content)
        result = _stage(
            s3,
            s3_bucket,
            str(source),
            file_format=FileFormat(header=True),
            run=name,
            sort_key=["id"],
            sort_types=["BIGINT"],
        )
        assert result.manifest.chunks == []
        assert result.manifest.total_rows == 0
        assert s3.head_object(Bucket=s3_bucket, Key=parse_s3_uri(result.manifest_uri)[1])
        assert list(_objects(s3, s3_bucket, parse_s3_uri(result.prefix)[1])) == [
            parse_s3_uri(result.manifest_uri)[1]
        ]


def test_second_run_does_no_work_and_changed_input_gets_a_new_manifest(
    s3: Any, s3_bucket: str, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "in.csv", TRICKY)
    first = _stage(s3, s3_bucket, str(source), chunk_size=200)
    before = _objects(s3, s3_bucket)

    again = _stage(s3, s3_bucket, str(source), chunk_size=200)
    assert again.skipped
    assert again.manifest == first.manifest
    assert _objects(s3, s3_bucket) == before  # nothing rewritten

    write_csv(tmp_path / "in.csv", [*TRICKY, ("11", "new", "row")])
    changed = _stage(s3, s3_bucket, str(source), chunk_size=200)
    assert not changed.skipped
    assert changed.prefix != first.prefix
    assert changed.manifest.input_fingerprint != first.manifest.input_fingerprint
    assert changed.manifest.total_rows == len(TRICKY) + 1
    assert Counter(_all_rows(s3, changed)) == Counter([*TRICKY, ("11", "new", "row")])

    other_date = _stage(s3, s3_bucket, str(source), chunk_size=200, run="2026-01-02")
    assert not other_date.skipped
    assert other_date.prefix != changed.prefix


def test_an_interrupted_attempt_is_cleaned_not_mixed_in(
    s3: Any, s3_bucket: str, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "in.csv", TRICKY)
    first = _stage(s3, s3_bucket, str(source), chunk_size=200)
    bucket, prefix = parse_s3_uri(first.prefix)
    # what a killed attempt leaves: chunks, one of them from nowhere, and no manifest
    s3.delete_object(Bucket=bucket, Key=prefix + "manifest.json")
    s3.put_object(Bucket=bucket, Key=prefix + "chunk-00099.csv.gz", Body=gzip.compress(b"99,x,y\n"))

    again = _stage(s3, s3_bucket, str(source), chunk_size=200)
    assert not again.skipped
    keys = set(_objects(s3, bucket, prefix))
    assert prefix + "chunk-00099.csv.gz" not in keys
    assert keys == {parse_s3_uri(c.uri)[1] for c in again.manifest.chunks} | {
        prefix + "manifest.json"
    }
    assert Counter(_all_rows(s3, again)) == Counter(TRICKY)

    # a manifest that is not ours (another fingerprint) counts as incomplete too
    s3.put_object(
        Bucket=bucket,
        Key=prefix + "manifest.json",
        Body=again.manifest.__class__(
            input_fingerprint="other", file_format={}, columns=None, chunks=[]
        ).to_json(),
    )
    third = _stage(s3, s3_bucket, str(source), chunk_size=200)
    assert not third.skipped
    assert third.manifest.total_rows == len(TRICKY)


def test_uncompressed_chunks_for_aurora(s3: Any, s3_bucket: str, tmp_path: Path) -> None:
    source = write_csv(tmp_path / "in.csv", TRICKY)
    result = _stage(s3, s3_bucket, str(source), compression="none", chunk_size=200)
    for chunk in result.manifest.chunks:
        assert chunk.compression == "none"
        assert chunk.uri.endswith(".csv")
        response = s3.get_object(Bucket=s3_bucket, Key=chunk.key)
        assert "ContentEncoding" not in response
        assert chunk.bytes == chunk.raw_bytes
    assert Counter(_all_rows(s3, result)) == Counter(TRICKY)


def test_too_many_chunks_is_refused_or_grows_the_chunk_size(
    s3: Any, s3_bucket: str, tmp_path: Path
) -> None:
    source = write_csv(tmp_path / "in.csv", TRICKY * 10)
    with pytest.raises(ValueError, match="max_map_length = 3"):
        _stage(s3, s3_bucket, str(source), chunk_size=100, resources=Resources(max_map_length=3))
    assert _objects(s3, s3_bucket) == {}  # refused before anything was uploaded

    grown = _stage(
        s3,
        s3_bucket,
        str(source),
        chunk_size=100,
        resources=Resources(max_map_length=3, grow_chunk_size=True),
    )
    assert 1 <= len(grown.manifest.chunks) <= 3
    assert grown.manifest.total_rows == len(TRICKY) * 10


def test_lack_of_temp_space_fails_early_with_the_numbers(
    s3: Any, s3_bucket: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    from collections import namedtuple

    source = write_csv(tmp_path / "in.csv", TRICKY)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda _path: usage(10_000, 9_990, 10))
    with pytest.raises(InsufficientTempSpaceError, match=r"has 10 B free.*needs about"):
        _stage(s3, s3_bucket, str(source), temp_dir=str(tmp_path / "work"))
    assert _objects(s3, s3_bucket) == {}


def test_missing_input_is_a_clear_error(s3: Any, s3_bucket: str, tmp_path: Path) -> None:
    with pytest.raises(Exception, match="matched no files"):
        _stage(s3, s3_bucket, str(tmp_path / "nothing-*.csv"))
    with pytest.raises(Exception, match="matched no files"):
        _stage(s3, s3_bucket, f"s3://{s3_bucket}/nothing/")
