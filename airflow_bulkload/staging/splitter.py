"""Split a file in the staged CSV format into chunk files on record boundaries.

The input is the normalized file DuckDB wrote (:data:`~airflow_bulkload.staging.planning.STAGED_FORMAT`:
``"`` quotes, doubled to escape). In that format a line ends a record exactly when the number of
quote characters seen so far is even — a quoted field may hold the delimiter or a newline, and a
doubled quote adds two — so the split needs no full CSV parse, only a parity count per line.
Memory stays bounded by one write buffer plus the longest record.
"""

from __future__ import annotations

import csv
import hashlib
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from airflow_bulkload.gzip_codec import gzip_writer
from airflow_bulkload.staging.planning import STAGED_FORMAT, chunk_name

_QUOTE = STAGED_FORMAT.quote.encode()
_WRITE_BUFFER_BYTES = 1024 * 1024
_READ_BUFFER_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ChunkFile:
    """One finished chunk on local disk, with what the manifest records about it."""

    path: Path
    index: int
    rows: int
    raw_bytes: int  # uncompressed
    stored_bytes: int  # as uploaded (compressed when gzip)
    sha256: str  # of the stored bytes
    first_key: list[str] | None
    last_key: list[str] | None


@dataclass
class SplitProgress:
    bytes_read: int = 0
    rows: int = 0
    chunks: int = 0


class _HashingWriter:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, target: BinaryIO) -> None:
        self._target = target
        self.sha256 = hashlib.sha256()
        self.bytes_written = 0

    def write(self, data: bytes) -> int:
        self.sha256.update(data)
        self.bytes_written += len(data)
        return self._target.write(data)

    def flush(self) -> None:
        self._target.flush()


class _ChunkWriter:
    def __init__(self, path: Path, compression: str, compress_level: int) -> None:
        self.path = path
        self._file = path.open("wb")
        self._hashing = _HashingWriter(self._file)
        self._sink: BinaryIO
        if compression == "gzip":
            # mtime=0 and no file name in the header: the same rows give the same bytes and checksum
            self._sink = gzip_writer(self._hashing, compress_level)  # type: ignore[arg-type]
        else:
            self._sink = self._hashing  # type: ignore[assignment]
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self.raw_bytes = 0
        self.rows = 0

    def write_records(self, records: bytes, count: int = 1) -> None:
        """Append ``count`` whole records (one, or a run of them)."""
        self._pending.append(records)
        self._pending_bytes += len(records)
        self.raw_bytes += len(records)
        self.rows += count
        if self._pending_bytes >= _WRITE_BUFFER_BYTES:
            self._flush_pending()

    def _flush_pending(self) -> None:
        if self._pending:
            self._sink.write(b"".join(self._pending))
            self._pending.clear()
            self._pending_bytes = 0

    def close(self) -> tuple[int, str]:
        self._flush_pending()
        if self._sink is not self._hashing:
            self._sink.close()
        self._file.close()
        return self._hashing.bytes_written, self._hashing.sha256.hexdigest()


#: the largest field :func:`record_fields` reads (Python's csv module stops at 128 KiB by
#: default): past a CSV record's limit (DuckDB's ``max_line_size``, 8 MiB), as a Parquet or JSON
#: Lines value is not bound by it; the same as error tracing's (``staging/origin.py``)
FIELD_SIZE_LIMIT = 64 * 1024 * 1024


def record_fields(record: bytes) -> list[str]:
    """The fields of one staged record (text; a NULL reads as the text ``NULL``)."""
    if csv.field_size_limit() < FIELD_SIZE_LIMIT:
        csv.field_size_limit(FIELD_SIZE_LIMIT)  # only ever raised: other readers lose nothing
    text = record.decode("utf-8")
    return next(csv.reader([text], strict=True), [])


def _key_of(record: bytes, key_indexes: Sequence[int], where: str) -> list[str] | None:
    if not key_indexes:
        return None
    try:
        fields = record_fields(record)
        return [fields[i] for i in key_indexes]
    except (csv.Error, IndexError, UnicodeDecodeError) as exc:
        from airflow_bulkload.exceptions import BulkLoadError

        raise BulkLoadError(
            f"{where}: cannot read the key columns (positions {list(key_indexes)}) of the record "
            f"({exc}); the record starts {record[:80]!r}"
        ) from exc


def split_runs(source: Path) -> Iterator[tuple[bytes, int]]:
    """Runs of whole records of a staged file, with how many records each holds, in order.

    A run of more than one record holds no quote character, so each of its line ends ends a
    record and it can be cut at any of them: blocks without quotes (all-numeric data, say) pass
    through whole, at C speed. Blocks with quotes are taken apart record by record.
    """
    with source.open("rb", buffering=0) as handle:
        partial: list[bytes] = []
        in_quotes = False
        carry = b""

        def records(lines: Iterator[bytes]) -> Iterator[tuple[bytes, int]]:
            nonlocal in_quotes
            for line in lines:
                if line.count(_QUOTE) & 1:
                    in_quotes = not in_quotes
                if in_quotes:
                    partial.append(line)
                    continue
                if partial:
                    partial.append(line)
                    yield b"".join(partial), 1
                    partial.clear()
                else:
                    yield line, 1

        lines_before = 0
        while block := handle.read(_READ_BUFFER_BYTES):
            nul = block.find(b"\x00")
            if nul >= 0:
                _refuse_nul(source, carry + block, len(carry) + nul, lines_before)
            lines_before += block.count(b"\n")
            data = carry + block
            end = data.rfind(b"\n") + 1
            complete, carry = data[:end], data[end:]
            if not complete:
                continue
            if not in_quotes and _QUOTE not in complete:
                yield complete, complete.count(b"\n")
            else:
                yield from records(_lines(complete))
        if carry:  # a last line without a line end
            yield from records(iter([carry]))
        if partial:
            raise ValueError(
                f"{source}: the last record has an unbalanced quote (the staged file is truncated)"
            )


def _refuse_nul(source: Path, data: bytes, at: int, lines_before: int) -> None:
    """NUL (U+0000) cannot be stored by PostgreSQL in text, and MariaDB would store it verbatim.

    One behaviour for both engines, refused at staging, before anything loads.
    """
    from airflow_bulkload.exceptions import NulByteError

    start = data.rfind(b"\n", 0, at) + 1
    line = lines_before + data[:at].count(b"\n") + 1
    raise NulByteError(
        f"line {line} of the normalized input (it starts {data[start : start + 60]!r})"
    )


def split_records(source: Path) -> Iterator[bytes]:
    """The records of a staged file, each with its line end (multi-line records joined)."""
    for run, count in split_runs(source):
        if count == 1:
            yield run
        else:
            yield from _lines(run)


def _lines(data: bytes) -> Iterator[bytes]:
    """The LF-terminated lines of ``data`` (which ends with one), each with its LF."""
    start = 0
    while (end := data.find(b"\n", start) + 1) > 0:
        yield data[start:end]
        start = end


def _last_record(run: bytes, count: int) -> bytes:
    if count == 1:
        return run
    return run[run.rfind(b"\n", 0, len(run) - 1) + 1 :]


def _first_record(run: bytes, count: int) -> bytes:
    return run if count == 1 else run[: run.find(b"\n") + 1]


def split_into_chunks(
    source: Path,
    out_dir: Path,
    *,
    chunk_size: int,
    compression: str = "gzip",
    compress_level: int = 1,
    key_indexes: Sequence[int] = (),
    progress: Callable[[SplitProgress], None] | None = None,
    progress_every_seconds: float = 10.0,
) -> Iterator[ChunkFile]:
    """Yield chunk files of about ``chunk_size`` uncompressed bytes each, in order.

    A chunk is closed at the first record boundary at or after ``chunk_size`` bytes, so every chunk
    but the last holds at least ``chunk_size`` bytes and a chunk is never split inside a record.
    The caller owns each yielded file (uploads and deletes it); the next chunk is only written when
    the generator is resumed, so at most one chunk is being written at a time.
    """
    state = SplitProgress()
    writer: _ChunkWriter | None = None
    first_record = last_record = b""
    last_report = time.monotonic()

    def finish(current: _ChunkWriter) -> ChunkFile:
        stored, digest = current.close()
        state.chunks += 1
        return ChunkFile(
            path=current.path,
            index=state.chunks - 1,
            rows=current.rows,
            raw_bytes=current.raw_bytes,
            stored_bytes=stored,
            sha256=digest,
            first_key=_key_of(
                first_record, key_indexes, f"chunk {state.chunks - 1}, its first record"
            ),
            last_key=_key_of(
                last_record, key_indexes, f"chunk {state.chunks - 1}, its last record"
            ),
        )

    for run, count in split_runs(source):
        while run:
            if writer is None:
                writer = _ChunkWriter(
                    out_dir / chunk_name(state.chunks, compression), compression, compress_level
                )
                first_record = _first_record(run, count)
            room = chunk_size - writer.raw_bytes
            piece, pieces = run, count
            if count > 1 and len(run) > room:
                # the first record end at or after the chunk size closes the chunk
                cut = run.find(b"\n", max(room - 1, 0)) + 1
                if 0 < cut < len(run):
                    piece, run = run[:cut], run[cut:]
                    pieces = piece.count(b"\n")
                    count -= pieces
                else:
                    run = b""
            else:
                run = b""
            writer.write_records(piece, pieces)
            last_record = _last_record(piece, pieces)
            state.bytes_read += len(piece)
            state.rows += pieces
            if writer.raw_bytes >= chunk_size:
                yield finish(writer)
                writer = None
        if progress is not None and time.monotonic() - last_report >= progress_every_seconds:
            progress(state)
            last_report = time.monotonic()
    if writer is not None:
        yield finish(writer)
    if progress is not None:
        progress(state)
