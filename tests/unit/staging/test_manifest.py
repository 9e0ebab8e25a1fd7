from __future__ import annotations

import pytest

from airflow_bulkload.exceptions import BulkLoadError, InvalidFileFormatError
from airflow_bulkload.staging.manifest import (
    ChunkSpec,
    FileFormat,
    Manifest,
    first_out_of_order,
    read_manifest,
)


def test_file_format_defaults_per_format() -> None:
    assert FileFormat().effective_null == ""
    assert FileFormat(format="text", delimiter="\t").effective_null == "\\N"
    assert FileFormat(quote="'").effective_escape == "'"
    assert FileFormat(encoding="UTF8").python_encoding == "utf-8"


@pytest.mark.parametrize(
    "options",
    [
        {"format": "xml"},  # parquet and jsonl are input formats now
        {"delimiter": ",,"},
        {"delimiter": "\n"},
        {"quote": ""},
        {"null": "a\nb"},
        {"encoding": "utf8'; DROP"},
        {"bogus": 1},
    ],
)
def test_file_format_refuses_bad_options(options: dict) -> None:
    with pytest.raises(InvalidFileFormatError):
        FileFormat.from_dict(options)


def test_manifest_round_trips_through_json() -> None:
    chunk = ChunkSpec(
        uri="s3://b/p/chunk-00000.csv.gz",
        checksum="abc",
        rows=10,
        bytes=100,
        raw_bytes=300,
        file_format=FileFormat(header=False).to_dict(),
        columns=["id", "v"],
        first_key=[1],
        last_key=[10],
    )
    manifest = Manifest(
        input_fingerprint="fp",
        file_format=FileFormat().to_dict(),
        columns=["id", "v"],
        chunks=[chunk],
        sort_key=["id"],
        total_rows=10,
        total_bytes=100,
    )
    again = Manifest.from_json(manifest.to_json())
    assert again == manifest
    assert again.chunks[0].bucket == "b"
    assert again.chunks[0].key == "p/chunk-00000.csv.gz"
    assert ChunkSpec.from_dict(chunk.to_dict() | {"ignored": 1}) == chunk


class _Missing(Exception):
    def __init__(self, code: str) -> None:
        self.response = {"Error": {"Code": code}}


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self) -> bytes:
        return self.data

    def close(self) -> None:
        pass


class _S3:
    """get_object of one stored object, or the error S3 gives."""

    def __init__(self, data: bytes | None = None, code: str = "NoSuchKey") -> None:
        self.data = data
        self.code = code

    def get_object(self, Bucket: str, Key: str) -> dict:
        if self.data is None:
            raise _Missing(self.code)
        return {"Body": _Body(self.data)}


def test_read_manifest_is_the_one_reader_missing_and_broken_are_absent_unless_required() -> None:
    manifest = Manifest("fp", {}, None, [ChunkSpec("s3://b/p/chunk-00000.csv.gz", "x", rows=1)])
    uri = "s3://b/p/manifest.json"
    assert read_manifest(_S3(manifest.to_json().encode()), uri) == manifest
    assert read_manifest(_S3(manifest.to_json().encode()), uri, required=True) == manifest
    assert read_manifest(_S3(), uri) is None
    assert read_manifest(_S3(b"{not json"), uri) is None
    with pytest.raises(BulkLoadError, match="no manifest there"):
        read_manifest(_S3(), uri, required=True)
    with pytest.raises(BulkLoadError, match="not a readable manifest"):
        read_manifest(_S3(b"{not json"), uri, required=True)
    with pytest.raises(BulkLoadError, match="staging bucket 'b' does not exist"):
        read_manifest(_S3(code="NoSuchBucket"), uri)


def _keyed(index: int, first: list[object] | None, last: list[object] | None) -> ChunkSpec:
    return ChunkSpec(
        uri=f"s3://b/c{index}", checksum="x", index=index, first_key=first, last_key=last
    )


def test_first_out_of_order_compares_numbers_as_numbers() -> None:
    # staging records keys as text: "9" < "10" only as numbers
    ordered = [_keyed(0, ["1"], ["9"]), _keyed(1, ["10"], ["99"]), _keyed(2, ["100"], ["100"])]
    assert first_out_of_order(ordered) is None
    assert first_out_of_order([_keyed(0, ["1"], ["50"]), _keyed(1, ["40"], ["60"])]) == 1
    assert first_out_of_order([_keyed(0, ["5"], ["1"])]) == 0  # runs back inside a chunk


def test_first_out_of_order_on_text_and_composite_keys_and_missing_ones() -> None:
    assert (
        first_out_of_order([_keyed(0, ["a", "1"], ["b", "2"]), _keyed(1, ["b", "3"], ["c", "0"])])
        is None
    )
    assert first_out_of_order([_keyed(0, ["b"], ["c"]), _keyed(1, ["a"], ["d"])]) == 1
    # no recorded keys (a direct chunk), or numbers against text: nothing to tell
    assert first_out_of_order([_keyed(0, None, None), _keyed(1, ["1"], ["2"])]) is None
    assert first_out_of_order([_keyed(0, ["x"], ["y"]), _keyed(1, ["1"], ["2"])]) is None
