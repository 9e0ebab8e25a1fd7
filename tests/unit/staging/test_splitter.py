from __future__ import annotations

import csv
import gzip
import hashlib
import io
from pathlib import Path

import pytest

from airflow_bulkload.staging.splitter import record_fields, split_into_chunks, split_records


def _write(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(rows)
    return path


def _rows_of(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


ROWS = [
    [str(i), f"text {i}", 'has "quotes", commas' if i % 3 == 0 else "multi\nline\r\nvalue"]
    for i in range(1, 200)
]


def test_records_are_split_on_boundaries_not_inside_quotes(tmp_path: Path) -> None:
    source = _write(tmp_path / "n.csv", ROWS)
    records = list(split_records(source))
    assert len(records) == len(ROWS)
    assert [record_fields(r) for r in records] == ROWS


def test_unbalanced_quote_at_the_end_is_an_error(tmp_path: Path) -> None:
    source = tmp_path / "bad.csv"
    source.write_bytes(b'1,"open\n2,x\n')
    with pytest.raises(ValueError, match="unbalanced quote"):
        list(split_records(source))


@pytest.mark.parametrize("compression", ["gzip", "none"])
def test_chunks_hold_every_record_once_with_true_counts_and_checksums(
    tmp_path: Path, compression: str
) -> None:
    source = _write(tmp_path / "n.csv", ROWS)
    out = tmp_path / "out"
    out.mkdir()
    chunks = list(
        split_into_chunks(source, out, chunk_size=500, compression=compression, key_indexes=[0])
    )
    assert len(chunks) > 3
    rows: list[list[str]] = []
    for number, chunk in enumerate(chunks):
        stored = chunk.path.read_bytes()
        assert chunk.index == number
        assert chunk.stored_bytes == len(stored)
        assert chunk.sha256 == hashlib.sha256(stored).hexdigest()
        raw = gzip.decompress(stored) if compression == "gzip" else stored
        assert chunk.raw_bytes == len(raw)
        chunk_rows = _rows_of(raw)
        assert chunk.rows == len(chunk_rows)
        assert chunk.first_key == [chunk_rows[0][0]]
        assert chunk.last_key == [chunk_rows[-1][0]]
        if number < len(chunks) - 1:
            assert chunk.raw_bytes >= 500
        rows.extend(chunk_rows)
    assert rows == ROWS
    assert sum(c.raw_bytes for c in chunks) == source.stat().st_size


def test_same_rows_give_the_same_gzip_bytes(tmp_path: Path) -> None:
    source = _write(tmp_path / "n.csv", ROWS)
    digests = []
    for attempt in ("a", "b"):
        out = tmp_path / attempt
        out.mkdir()
        digests.append([c.sha256 for c in split_into_chunks(source, out, chunk_size=1000)])
    assert digests[0] == digests[1]


def test_empty_input_gives_no_chunks(tmp_path: Path) -> None:
    source = tmp_path / "empty.csv"
    source.write_bytes(b"")
    assert list(split_into_chunks(source, tmp_path, chunk_size=10)) == []


def _reference_records(data: bytes) -> list[bytes]:
    """Records by quote parity, line by line: what the splitter must agree with."""
    records: list[bytes] = []
    partial = b""
    for line in data.splitlines(keepends=True):
        partial += line
        if partial.count(b'"') % 2 == 0:
            records.append(partial)
            partial = b""
    return records


def test_quote_free_blocks_split_exactly_like_record_by_record(tmp_path: Path) -> None:
    """Numeric data passes through in whole blocks; the chunks must still close at the first
    record end at or after the chunk size, with the right counts and keys, across blocks with
    and without quoted (multi-line) fields."""
    plain = [[str(i), str(i * 7)] for i in range(60_000)]
    quoted = [[str(i), f'say "hi"\nline {i}'] for i in range(60_000, 60_050)]
    source = _write(tmp_path / "n.csv", plain[:40_000] + quoted + plain[40_000:])
    records = _reference_records(source.read_bytes())
    out = tmp_path / "out"
    out.mkdir()
    chunk_size = 100_003

    chunks = list(
        split_into_chunks(source, out, chunk_size=chunk_size, compression="none", key_indexes=[0])
    )

    expected: list[list[bytes]] = [[]]
    for record in records:
        if sum(map(len, expected[-1])) >= chunk_size:
            expected.append([])
        expected[-1].append(record)
    assert [c.rows for c in chunks] == [len(e) for e in expected]
    assert [c.path.read_bytes() for c in chunks] == [b"".join(e) for e in expected]
    assert [c.first_key for c in chunks] == [record_fields(e[0])[:1] for e in expected]
    assert [c.last_key for c in chunks] == [record_fields(e[-1])[:1] for e in expected]
