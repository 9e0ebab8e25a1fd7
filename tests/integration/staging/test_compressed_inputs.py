"""zstd and bzip2 inputs: staged (not loaded as stored), read by their magic bytes, exact.

A damaged object fails naming it, and a bad value is traced to its line through the codec.
"""

from __future__ import annotations

import bz2
from collections.abc import Callable

import pytest
from backports import zstd

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.staging.normalize import InputFormatError
from tests.harness import MotoServer, TestDatabase
from tests.integration.test_hostile_gzip import (
    create_notes,
    csv_body,
    exactly,
    load,
    plan,
    put,
    totals,
)

CODECS: dict[str, Callable[[bytes], bytes]] = {"zstd": zstd.compress, "bz2": bz2.compress}


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", ["export.csv.{ext}", "export.csv.gz", "export.csv"])
def test_a_zstd_or_bzip2_input_is_staged_and_loads_every_row_once(
    codec: str, name: str, any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """Whatever the object is called (its own extension, .gz, none), its bytes say the codec."""
    create_notes(any_db)
    key = "in/" + name.format(ext="zst" if codec == "zstd" else "bz2")
    put(moto_server, s3_bucket, CODECS[codec](csv_body(20_000)), key=key)

    staged = plan(moto_server, s3_bucket)
    assert not staged.manifest.chunks[0].uri.startswith(f"s3://{s3_bucket}/in/"), (
        "a zstd/bzip2 input is staged, never loaded as stored"
    )
    load(any_db, moto_server, s3_bucket)

    assert totals(any_db) == exactly(20_000)


@pytest.mark.parametrize("codec", CODECS)
def test_a_truncated_zstd_or_bzip2_input_fails_naming_it(
    codec: str, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(pg_db)
    packed = CODECS[codec](csv_body(20_000))
    put(moto_server, s3_bucket, packed[: len(packed) // 2], key="in/export.csv.zst")

    with pytest.raises((InputFormatError, ChunkLoadError), match=r"export\.csv\.zst"):
        load(pg_db, moto_server, s3_bucket)
    assert totals(pg_db) == (0, 0, 0)


@pytest.mark.parametrize("codec", CODECS)
def test_a_bad_value_in_a_zstd_or_bzip2_input_names_its_line(
    codec: str, pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(pg_db)
    put(moto_server, s3_bucket, CODECS[codec](csv_body(20_000, bad=12_345)), key="in/e.csv")

    with pytest.raises(ChunkLoadError) as failure:
        load(pg_db, moto_server, s3_bucket)

    assert failure.value.source == f"s3://{s3_bucket}/in/e.csv"
    assert failure.value.line == 12_346
    assert totals(pg_db) == (0, 0, 0)
