"""Hostile gzip input for the ISA-L reader (python-isal): gzip objects as users' tools make
them, loaded as stored (direct chunks) or staged, into PostgreSQL and MariaDB.

Each load must either load every row exactly once, or fail with a :class:`ChunkLoadError` /
:class:`InputFormatError` naming the object, with nothing of it committed; never a partial
load, a hang, a raw ``IsalError`` / ``csv.Error``, or columns read in the wrong order.
"""

from __future__ import annotations

import bz2
import gzip
import io
import random
from typing import Any

import pytest

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.gzip_codec import gunzip_reader
from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.s3io import ChunkStream, _HashingReader
from airflow_bulkload.staging.stager import StageResult
from tests.harness import MotoServer, TestDatabase
from tests.integration.staging.test_hostile_direct import plan as plan_notes

KEY = "in/export.csv.gz"


def csv_body(rows: int, *, header: str = "id,note,n", bad: int | None = None) -> bytes:
    """``rows`` records; the notes are random hex, so the gzip stays near the text's size."""
    rnd = random.Random(rows)
    return (
        header
        + "\n"
        + "".join(
            f"{i},note {i} {rnd.getrandbits(64):x},{'many' if i == bad else i}\n"
            for i in range(1, rows + 1)
        )
    ).encode()


def members(data: bytes, size: int) -> bytes:
    """``data`` as gzip members of ``size`` bytes each, cut anywhere (``cat a.gz b.gz``)."""
    return b"".join(gzip.compress(data[i : i + size]) for i in range(0, len(data), size))


def with_fname(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(filename="export.csv", fileobj=out, mode="wb") as f:
        f.write(data)
    return out.getvalue()


def with_fextra_and_fcomment(data: bytes) -> bytes:
    plain = bytearray(gzip.compress(data, mtime=0))
    plain[3] |= 0x04 | 0x10  # FEXTRA and FCOMMENT, as bgzip and `gzip -c` with comments set
    return bytes(plain[:10]) + b"\x04\x00BC\x02\x00" + b"nightly export\x00" + bytes(plain[10:])


def flipped(data: bytes) -> bytes:
    out = bytearray(data)
    middle = len(out) // 2
    for i in range(middle, middle + 16):
        out[i] ^= 0xFF
    return bytes(out)


def put(moto: MotoServer, bucket: str, body: bytes, key: str = KEY) -> None:
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)


def create_notes(db: TestDatabase) -> None:
    note = "longtext" if db.engine == "mysql" else "text"
    db.query(f"CREATE TABLE notes (id int PRIMARY KEY, note {note}, n int)")


def plan(moto: MotoServer, bucket: str, *, direct: bool = True) -> StageResult:
    """Stage ``s3://bucket/in/`` into the ``notes`` table's chunks, one chunk per object."""
    return plan_notes(moto, bucket, chunk_size=4_000_000, direct=direct)


def load(db: TestDatabase, moto: MotoServer, bucket: str, *, direct: bool = True) -> None:
    staged = plan(moto, bucket, direct=direct)
    hook = BulkLoadHook(conn_id=db.conn_id)
    hook.reconcile("notes", staged.manifest_uri, load_id="t")
    for chunk in staged.manifest.chunks:
        hook.load_chunk("notes", chunk, load_id="t")
    hook.verify_load("notes", staged.manifest_uri, load_id="t")


def totals(db: TestDatabase) -> tuple[int, int, int]:
    count, ids, ns = db.query("SELECT count(*), sum(id), sum(n) FROM notes")[0]
    return int(count), int(ids or 0), int(ns or 0)


def exactly(rows: int) -> tuple[int, int, int]:
    return rows, rows * (rows + 1) // 2, rows * (rows + 1) // 2


# --- inputs that load: keep them loading ---------------------------------------------------


def test_a_multi_member_gzip_cut_mid_record_loads_every_row_once(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """``cat part1.gz part2.gz ...`` (or bgzip blocks): members cut inside records, the object
    larger than one 1 MiB read buffer. ISA-L reads the members as one stream."""
    create_notes(any_db)
    put(moto_server, s3_bucket, members(csv_body(60_000), 1_000_003))

    load(any_db, moto_server, s3_bucket)

    assert totals(any_db) == exactly(60_000)


def with_zero_padding(body: bytes) -> bytes:
    """Some tools pad a gzip object with zero bytes after its last member."""
    return gzip.compress(body) + b"\0" * 512


@pytest.mark.parametrize(
    "make",
    [with_fname, with_fextra_and_fcomment, with_zero_padding],
    ids=["fname", "fextra-fcomment", "zero-padding"],
)
def test_a_gzip_with_header_fields_or_zero_padding_loads(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, make: Any
) -> None:
    create_notes(pg_db)
    put(moto_server, s3_bucket, make(csv_body(2_000)))

    load(pg_db, moto_server, s3_bucket)

    assert totals(pg_db) == exactly(2_000)


def test_records_longer_than_one_read_buffer_load_from_gzip(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(any_db)
    long = b"y" * 1_500_000  # each record is longer than READ_BUFFER_BYTES (1 MiB)
    body = b"id,note,n\n" + b"".join(b"%d,%s,%d\n" % (i, long, i) for i in range(1, 8))
    put(moto_server, s3_bucket, gzip.compress(body, compresslevel=1))

    load(any_db, moto_server, s3_bucket)

    assert totals(any_db) == exactly(7)
    assert any_db.query("SELECT min(length(note)), max(length(note)) FROM notes") == [
        (len(long), len(long))
    ]


@pytest.mark.parametrize(
    "body", [gzip.compress(b""), gzip.compress(b"id,note,n\n"), b""], ids=["empty", "header", "0B"]
)
def test_an_empty_gzip_or_a_zero_byte_gz_object_loads_no_rows(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, body: bytes
) -> None:
    create_notes(pg_db)
    put(moto_server, s3_bucket, body)

    load(pg_db, moto_server, s3_bucket)

    assert totals(pg_db) == (0, 0, 0)


def test_plain_csv_named_gz_loads_as_plain_csv(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    create_notes(pg_db)
    put(moto_server, s3_bucket, csv_body(2_000))

    load(pg_db, moto_server, s3_bucket)

    assert totals(pg_db) == exactly(2_000)


# --- the header of a multi-member object (broke: columns loaded swapped) -------------------


@pytest.mark.parametrize("direct", [True, False], ids=["direct", "staged"])
def test_a_header_after_an_empty_first_member_maps_columns_by_name(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, direct: bool
) -> None:
    """What the user did: ``cat empty.csv.gz export.csv.gz`` (a rotated, empty part first);
    the export's header names the columns in another order, ``n,note,id``.

    What happened: planning read the header from the first gzip member only: empty, so the
    direct load mapped the fields in the table's order and committed every row with id and n
    swapped (the staged path loads them right).

    What should happen: the header is read across members; id and n land in their columns.
    """
    create_notes(pg_db)
    rows = b"".join(b"%d,note %d,%d\n" % (i, i, 1000 + i) for i in range(1, 50))
    put(moto_server, s3_bucket, gzip.compress(b"") + gzip.compress(b"n,note,id\n" + rows))

    load(pg_db, moto_server, s3_bucket, direct=direct)

    assert sorted(pg_db.query("SELECT id, n FROM notes")) == [(1000 + i, i) for i in range(1, 50)]


def test_a_header_split_across_two_members_is_read_whole(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What happened: planning read ``id,no`` (the first member's part of the header) and the
    load failed with ``column "no" of relation "notes" does not exist``."""
    create_notes(pg_db)
    body = csv_body(2_000)
    put(moto_server, s3_bucket, gzip.compress(body[:5]) + gzip.compress(body[5:]))

    load(pg_db, moto_server, s3_bucket)

    assert totals(pg_db) == exactly(2_000)


# --- broken gzip: fails naming the object, nothing committed -------------------------------

_BIG = gzip.compress(csv_body(40_000), compresslevel=1)  # ~1 MB: damage lies past planning's peek
BROKEN = {
    "truncated": _BIG[: len(_BIG) // 2],
    "corrupt-middle": flipped(_BIG),
    "bad-crc": _BIG[:-8] + bytes([_BIG[-8] ^ 1]) + _BIG[-7:],
    "bad-isize": _BIG[:-4] + bytes([_BIG[-4] ^ 1]) + _BIG[-3:],
    "trailing-newline": _BIG + b"\n",
}


@pytest.mark.parametrize(
    ("any_db", "case"),
    [("postgres", case) for case in BROKEN]
    # MySQL reads through a FIFO that a failing reader must not leave hanging
    + [("mysql", "truncated"), ("mysql", "corrupt-middle")],
    indirect=["any_db"],
)
def test_a_broken_gzip_object_fails_naming_it_and_loads_nothing(
    any_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, case: str
) -> None:
    create_notes(any_db)
    put(moto_server, s3_bucket, BROKEN[case])

    with pytest.raises(ChunkLoadError, match="gzip stream is corrupt or truncated") as failure:
        load(any_db, moto_server, s3_bucket)

    assert failure.value.source == f"s3://{s3_bucket}/{KEY}"
    assert totals(any_db) == (0, 0, 0)


def test_bytes_after_the_last_member_are_named_as_such(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """ISA-L reports a stray byte after the last member as "Compressed file ended before the
    end-of-stream marker" (zlib said "Not a gzipped file"): the error must not read as if the
    object were only truncated."""
    create_notes(pg_db)
    put(moto_server, s3_bucket, BROKEN["trailing-newline"])

    with pytest.raises(ChunkLoadError, match="not gzip"):
        load(pg_db, moto_server, s3_bucket)


def test_bz2_named_gz_loads_as_bzip2(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """What happened: planning read the bz2 bytes as a CSV header and raised a bare
    ``_csv.Error: new-line character seen in unquoted field``, naming no object. Then it was
    refused naming the object; now bzip2 is read by its magic bytes, whatever its name."""
    create_notes(pg_db)
    body = b"id,note,n\n" + b"".join(b"%d,note %d,%d\n" % (i, i, i) for i in range(1, 3001))
    put(moto_server, s3_bucket, bz2.compress(body))

    load(pg_db, moto_server, s3_bucket)

    assert totals(pg_db) == exactly(3000)


def test_a_bad_value_in_a_later_member_names_its_line_in_the_input(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str
) -> None:
    """The staged load's error is traced back through the multi-member source (read by ISA-L)."""
    create_notes(pg_db)
    put(moto_server, s3_bucket, members(csv_body(30_000, bad=25_000), 400_000))

    with pytest.raises(ChunkLoadError) as failure:
        load(pg_db, moto_server, s3_bucket, direct=False)

    assert failure.value.source == f"s3://{s3_bucket}/{KEY}"
    assert failure.value.line == 25_001
    assert totals(pg_db) == (0, 0, 0)


def test_any_damage_to_a_gzip_chunk_reads_as_a_chunk_load_error() -> None:
    """Random bit flips, overwrites and truncations: the reader raises ChunkLoadError naming
    the chunk (never a raw IsalError), or reads the original bytes exactly."""
    body = csv_body(3_000)
    good = gzip.compress(body)
    rnd = random.Random(7)
    for _ in range(300):
        damaged = bytearray(good)
        at = rnd.randrange(len(damaged))
        kind = rnd.randrange(3)
        if kind == 0:
            damaged[at] ^= 1 << rnd.randrange(8)
        elif kind == 1:
            damaged[at : at + 8] = bytes(rnd.randrange(256) for _ in range(8))
        else:
            del damaged[at:]
        stored = _HashingReader(io.BytesIO(bytes(damaged)))
        stream = ChunkStream(gunzip_reader(stored), "s3://b/chunk.csv.gz", stored)  # type: ignore[arg-type]
        try:
            assert b"".join(stream) == body
        except ChunkLoadError as exc:
            assert exc.source == "s3://b/chunk.csv.gz"
