from __future__ import annotations

import pytest

from airflow_bulkload.exceptions import InvalidFileFormatError
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, Manifest


def test_file_format_defaults_per_format() -> None:
    assert FileFormat().effective_null == ""
    assert FileFormat(format="text", delimiter="\t").effective_null == "\\N"
    assert FileFormat(quote="'").effective_escape == "'"
    assert FileFormat(encoding="UTF8").python_encoding == "utf-8"


@pytest.mark.parametrize(
    "options",
    [
        {"format": "parquet"},
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
