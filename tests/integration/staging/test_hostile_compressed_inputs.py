"""Hostile zstd / bzip2 inputs, staged from moto S3 and loaded through BulkLoadHook.

Each load must load every row exactly once, or fail with a BulkLoadError naming the object,
with nothing committed: never a silent partial load, never a raw library exception.
"""

from __future__ import annotations

import bz2
import gzip

import pytest
from backports import zstd

from airflow_bulkload.exceptions import BulkLoadError
from tests.harness import MotoServer, TestDatabase
from tests.integration.test_hostile_gzip import create_notes, csv_body, exactly, load, put, totals

BODY = csv_body(3_000)
BIG = csv_body(20_000)


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    for i in range(at, at + 16):
        out[i] ^= 0xFF
    return bytes(out)


def _halves() -> tuple[bytes, bytes]:
    lines = BODY.split(b"\n")
    return b"\n".join(lines[:1501]) + b"\n", b"\n".join(lines[1501:])


def bz2_second_stream_header_damaged() -> bytes:
    first, second = _halves()
    two = bytearray(bz2.compress(second))
    two[3] = ord("0")  # "BZh0": one flipped byte in the second stream's header
    return bz2.compress(first) + bytes(two)


def bz2_then_plain_csv_appended() -> bytes:
    first, second = _halves()
    return bz2.compress(first) + second  # `cat part1.csv.bz2 part2.csv > export.csv.bz2`


@pytest.mark.parametrize(
    "packed",
    [bz2_second_stream_header_damaged(), bz2_then_plain_csv_appended()],
    ids=["damaged-2nd-stream", "plain-csv-appended"],
)
def test_a_bz2_object_with_undecodable_bytes_after_its_first_stream_is_not_cut_short(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, packed: bytes
) -> None:
    """What I did: a multi-stream bzip2 object (`cat a.bz2 b.bz2`) whose second stream's
    header has one damaged byte, or one with plain CSV appended after the first stream.

    What happened: the load SUCCEEDED with rows 1..1500 only; rows 1501..3000 were silently
    dropped (Python's BZ2File treats undecodable bytes after a complete stream as ignorable
    "trailing data", and _as_duckdb_reads_it uses it as is).

    What should happen: every row loads, or the load fails naming the object; never a silent
    partial load.
    """
    create_notes(pg_db)
    put(moto_server, s3_bucket, packed, key="in/export.csv.bz2")
    try:
        load(pg_db, moto_server, s3_bucket)
    except BulkLoadError as exc:
        assert "export.csv.bz2" in str(exc)
        assert totals(pg_db) == (0, 0, 0)
    else:
        assert totals(pg_db) == exactly(3_000), "a silent partial load"


@pytest.mark.parametrize(
    "packed",
    [zstd.compress(BODY)[:-3], zstd.compress(BODY)[:40], b"\x28\xb5\x2f\xfd"],
    ids=["last-3-bytes-cut", "first-40-bytes-only", "magic-only"],
)
def test_a_zstd_object_truncated_in_its_first_block_fails_naming_it(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, packed: bytes
) -> None:
    """What I did: a zstd object cut short inside its first block (an object under 128 KiB
    is one block: any truncation of a small export; an upload that stopped early).

    What happened: a raw ``EOFError: Compressed file ended before the end-of-stream marker
    was reached`` from backports.zstd, naming no object (raised by header_of in
    normalize._refuse_repeated_names, which does not catch DECOMPRESS_ERRORS).

    What should happen: InputFormatError naming s3://.../in/damaged.csv.
    """
    create_notes(pg_db)
    put(moto_server, s3_bucket, packed, key="in/damaged.csv")
    with pytest.raises(BulkLoadError, match=r"in/damaged\.csv"):
        load(pg_db, moto_server, s3_bucket)
    assert totals(pg_db) == (0, 0, 0)


@pytest.mark.parametrize(
    "packed",
    [
        zstd.compress(BIG) + b"trailing garbage",
        _flip(zstd.compress(BIG), len(zstd.compress(BIG)) // 2),
    ],
    ids=["trailing-garbage", "corrupt-middle"],
)
def test_a_damaged_zstd_object_among_several_is_named(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, packed: bytes
) -> None:
    """What I did: two zstd objects under the input prefix, the second one damaged
    (bytes appended after its frame, or 16 bytes flipped in its middle).

    What happened: InputFormatError "cannot read the input: IO Error: Unknown frame
    descriptor" / "IO Error: Data corruption detected", followed by DuckDB's SQL echo
    naming only a truncated local temp path (/tmp/bulkload-staging/...); neither S3 object is
    named, so the user cannot tell which of the objects is bad.

    What should happen: the error names s3://.../in/b-damaged.csv.
    """
    create_notes(pg_db)
    put(moto_server, s3_bucket, zstd.compress(b"id,note,n\n1000000,x,1\n"), key="in/a-good.csv")
    put(moto_server, s3_bucket, packed, key="in/b-damaged.csv")
    with pytest.raises(BulkLoadError, match=r"b-damaged\.csv"):
        load(pg_db, moto_server, s3_bucket)
    assert totals(pg_db) == (0, 0, 0)


def _skippable_frame() -> bytes:
    # what pzstd (parallel zstd) writes before its frames: a skippable frame (magic 0x184D2A50)
    return b"\x50\x2a\x4d\x18" + (4).to_bytes(4, "little") + (12345).to_bytes(4, "little")


def test_a_zstd_object_starting_with_a_skippable_frame_loads(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What I did: a valid zstd object that starts with a skippable frame (`pzstd` output;
    `zstd -d` and DuckDB both read it).

    What happened: codec_of only knows the 0xFD2FB528 frame magic, so the object was taken
    for plain CSV and loaded as stored: PostgreSQL ChunkLoadError 'column "P*M" of relation
    "notes" does not exist'; MySQL InvalidIdentifierError "column name 'P*M\\x18...' contains
    a control character" (binary garbage read as the header).

    What should happen: skippable-frame magics (0x184D2A50..0x184D2A5F) are zstd: staged, and
    every row loads.
    """
    create_notes(any_db)
    put(moto_server, s3_bucket, _skippable_frame() + zstd.compress(BODY), key="in/e.csv.zst")
    load(any_db, moto_server, s3_bucket)
    assert totals(any_db) == exactly(3_000)


def test_a_plain_csv_whose_text_starts_like_a_bzip2_header_loads(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What I did: a plain CSV whose first column is named BZh9 (any text starting "BZh"
    and a digit 1-9, e.g. a headerless file whose first value is a code "BZh5-001").

    What happened: codec_of said bz2 from 4 bytes; staging failed with InputFormatError
    "its bzip2 data does not decompress (Invalid data stream)": a valid input refused.

    What should happen: the bzip2 signature is checked further (block magic 0x314159265359
    or the end-of-stream magic 0x177245385090 after "BZh<digit>"); the file loads as CSV.
    """
    pg_db.query('CREATE TABLE notes ("BZh9" int PRIMARY KEY, note text, n int)')
    body = b"BZh9,note,n\n" + b"".join(b"%d,x,%d\n" % (i, i) for i in range(1, 101))
    put(moto_server, s3_bucket, body, key="in/e.csv")
    load(pg_db, moto_server, s3_bucket)
    assert pg_db.query('SELECT count(*), sum("BZh9") FROM notes') == [(100, 5050)]


@pytest.mark.parametrize(
    ("empty", "key"),
    [
        (zstd.compress(b""), "in/a.csv"),
        (zstd.compress(b""), "in/z.csv"),
        (bz2.compress(b""), "in/a.csv"),
        (b"", "in/a.csv"),
        (gzip.compress(b""), "in/a.csv"),
    ],
    ids=["zstd-empty-first", "zstd-empty-last", "bz2-empty-first", "0B-first", "gzip-empty-first"],
)
def test_an_empty_part_beside_a_zstd_export_loads_the_export(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, empty: bytes, key: str
) -> None:
    """What I did: an input prefix holding a zstd export and an empty part (a rotated, empty
    file: zstd or bzip2 of nothing, a 0-byte object, an empty gzip). Each of those loads on
    its own (0 rows), and beside a plain/gzip export the direct path skips it.

    What happened: a zstd export forces the whole input through staging, and staging fails:
    InputFormatError "s3://.../in/b.csv has columns ['id', 'note', 'n'], but .../a.csv has
    ['column0']" (DuckDB invents a column for an empty decompressed file), or, for an empty
    file sorted first, "cannot read the input: Invalid Input Error: CSV Error on Line: 2 ...
    Expected Number of Columns: 1 Found: 2" (the sniffer took the empty file's shape).

    What should happen: the empty part contributes no rows; the export's 3000 rows load.
    """
    create_notes(pg_db)
    put(moto_server, s3_bucket, empty, key=key)
    put(moto_server, s3_bucket, zstd.compress(BODY), key="in/b.csv")
    load(pg_db, moto_server, s3_bucket)
    assert totals(pg_db) == exactly(3_000)
