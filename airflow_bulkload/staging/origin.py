"""Where a staged record came from: the source object and line a user can open.

A chunk's load error names a record of the staged chunk (PostgreSQL's COPY line, MySQL's row),
which is not a file the user has: staging may have reordered, sorted and re-quoted the rows.
When a load fails, the failing record is read back from its chunk and looked up in the input
files the manifest lists, in order, field by field (each file mapped by its own header). Only a
failed load pays for the search, and it is bounded in time: a record not found within the
budget is reported with its chunk line alone.
"""

from __future__ import annotations

import codecs
import csv
import io
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import BinaryIO

from airflow_bulkload.compression import decompressed
from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat

#: how long a failed load may spend looking for its bad record in the input files
DEFAULT_SEARCH_SECONDS = 60.0

SourceOpener = Callable[[str], AbstractContextManager[BinaryIO]]


@dataclass(frozen=True)
class SourceLine:
    """A record of an input file: the file as the user named it and the line it starts on."""

    source: str
    line: int


def _text(raw: BinaryIO, encoding: str) -> io.TextIOWrapper:
    return io.TextIOWrapper(decompressed(raw), encoding=encoding, errors="replace", newline="")  # type: ignore[arg-type]


def _reader(text: Iterable[str], fmt: FileFormat) -> Iterator[list[str]]:
    escape = fmt.effective_escape
    return csv.reader(
        text,
        delimiter=fmt.delimiter,
        quotechar=fmt.quote,
        doublequote=escape == fmt.quote,
        escapechar=None if escape == fmt.quote else escape,
        strict=False,
    )


def header_of(raw: BinaryIO, fmt: FileFormat) -> list[str]:
    """A file's first record: its header's names, a BOM taken off the first one."""
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))
    with _text(raw, codecs.lookup(fmt.python_encoding).name) as text:
        return [name.lstrip("\ufeff") for name in next(_reader(text, fmt), [])]


def empty_header_line(where: str) -> str:
    """The error for a header input whose first line is empty: its header would load as a row."""
    return (
        f"{where}, line 1: the line is empty (or white space) where the header is expected "
        "(header=True), so the header would load as a row. Remove the empty line(s) before the "
        "header"
    )


def untraced_error(spec: ChunkSpec, error: ChunkLoadError) -> ChunkLoadError:
    """A loader's error on a chunk loaded as stored, when its record was not found in the input.

    The loader counts the lines it was given, not the object's: without its header, and for a
    range from the range's start. The error says so instead of naming a line of the object.
    """
    if not spec.is_direct or error.line is None:
        return error
    part = "bytes {}-{}".format(*spec.byte_range) if spec.byte_range else "the object"
    header = ", its header not counted" if spec.skip_header else ""
    return ChunkLoadError(
        error.source,
        f"{error.reason} [line {error.line} of {part} as loaded{header}]",
        column=error.column,
        expected=error.expected,
    )


def first_line_is_empty(raw: BinaryIO, fmt: FileFormat) -> bool:
    """Whether a file's first line is empty or white space (a BOM aside); an empty file's is not."""
    with _text(raw, codecs.lookup(fmt.python_encoding).name) as text:
        line = text.readline().lstrip("\ufeff")
    return line != "" and not line.strip()


class _LineTap:
    """The text's lines, one by one, remembering the last one handed out."""

    def __init__(self, text: io.TextIOWrapper) -> None:
        self._text = text
        self.last = ""

    def __iter__(self) -> Iterator[str]:
        for line in self._text:
            self.last = line
            yield line


def _line_end(line: str) -> str:
    return "\r\n" if line.endswith("\r\n") else line[-1:] if line.endswith(("\n", "\r")) else ""


def read_record(
    raw: BinaryIO, fmt: FileFormat, number: int, *, counts_lines: bool
) -> list[str] | None:
    """The fields of a chunk's record, or ``None`` when the chunk is shorter.

    ``counts_lines``: ``number`` is the line PostgreSQL's COPY names, and the record is the one
    ending on or spanning it. COPY counts a line end inside a quoted value only when it is the
    stream's own line end, which it learns where the first line ends: until then it counts
    carriage returns, so a line feed inside the first record of an LF stream is not counted.
    Otherwise ``number`` is the 1-based record number (MySQL's row). The header, if any,
    counts as a line, not as a record.
    """
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))
    with _text(raw, codecs.lookup(fmt.python_encoding).name) as text:
        tap = _LineTap(text)
        reader = _reader(tap, fmt)
        line_end = ""  # COPY's line end, unknown until the first line ends
        line = 1  # the line COPY is on
        if fmt.header:
            next(reader, None)
            line_end, line = _line_end(tap.last), 2
        if not counts_lines:
            return next(itertools.islice(reader, number - 1, None), None) if number > 0 else None
        for fields in reader:
            counted = "\n" if line_end == "\n" else "\r"
            line += sum(value.count(counted) for value in fields)
            if line >= number:
                return fields
            line_end = line_end or _line_end(tap.last)
            line += 1
    return None


def record_with_key(
    raw: BinaryIO, fmt: FileFormat, key_positions: Sequence[int], value: str
) -> list[str] | None:
    """The first record of a chunk whose key fields, joined by ``-``, read ``value``.

    That is how MySQL names a duplicate key (``Duplicate entry '4-2020-01-01' for key …``).
    """
    if not key_positions:
        return None
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))
    with _text(raw, codecs.lookup(fmt.python_encoding).name) as text:
        reader = _reader(text, fmt)
        if fmt.header:
            next(reader, None)
        for fields in reader:
            if (
                len(fields) > max(key_positions)
                and "-".join(fields[i] for i in key_positions) == value
            ):
                return fields
    return None


def _same(staged: str, source: str, staged_null: str, source_null: str) -> bool:
    if staged == source:
        return True
    # a NULL is written with each format's own marker (quoting is lost to the reader)
    return staged == staged_null and source == source_null


def find_record(
    record: Sequence[str],
    columns: Sequence[str],
    sources: Sequence[str],
    *,
    staged_format: FileFormat,
    source_format: FileFormat,
    open_source: SourceOpener,
    seconds: float = DEFAULT_SEARCH_SECONDS,
) -> SourceLine | None:
    """The first record of ``sources`` (in order) whose fields equal the staged ``record``.

    ``columns`` names the staged record's fields; a source file with a header is mapped by its
    own header (files may order their columns differently), one without by position.
    """
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))
    deadline = time.monotonic() + seconds
    staged_null = staged_format.effective_null
    source_null = source_format.effective_null
    encoding = codecs.lookup(source_format.python_encoding).name
    for source in sources:
        with open_source(source) as raw, _text(raw, encoding) as text:
            reader = _reader(text, source_format)
            positions: list[int] = []
            if source_format.header:
                header = next(reader, None)
                if header is None:
                    continue
                where = {name.lstrip("\ufeff"): i for i, name in enumerate(header)}
                if columns and set(columns) <= set(where):
                    positions = [where[name] for name in columns]
            if len(positions) != len(record):
                # headerless, or a record of another width than the columns (a field too many or
                # too few, loaded as it stands in its file): field by field, in the file's order
                positions = list(range(len(record)))
            start = reader.line_num + 1  # type: ignore[attr-defined]
            for count, fields in enumerate(reader):
                if len(fields) == len(record) and all(
                    _same(value, fields[position], staged_null, source_null)
                    for value, position in zip(record, positions, strict=True)
                ):
                    return SourceLine(source, start)
                start = reader.line_num + 1  # type: ignore[attr-defined]
                if count % 4096 == 0 and time.monotonic() > deadline:
                    return None
    return None


def find_nul(sources: Sequence[str], open_source: SourceOpener) -> SourceLine | None:
    """The first input file and line holding a NUL byte, reading each file as stored."""
    for source in sources:
        with open_source(source) as raw:
            stream = decompressed(raw)
            lines = 0
            while block := stream.read(1024 * 1024):
                at = block.find(b"\0")
                if at >= 0:
                    return SourceLine(source, lines + block.count(b"\n", 0, at) + 1)
                lines += block.count(b"\n")
    return None


def records_with_key(
    key: dict[str, str],
    columns: Sequence[str],
    sources: Sequence[str],
    *,
    source_format: FileFormat,
    open_source: SourceOpener,
    limit: int = 4,
    seconds: float = DEFAULT_SEARCH_SECONDS,
) -> list[SourceLine]:
    """Where the input files hold records with the key ``key`` (column -> value as text).

    Up to ``limit`` places, in file order, for an error that names a key the input holds twice.
    """
    csv.field_size_limit(max(csv.field_size_limit(), 64 * 1024 * 1024))
    deadline = time.monotonic() + seconds
    encoding = codecs.lookup(source_format.python_encoding).name
    found: list[SourceLine] = []
    for source in sources:
        with open_source(source) as raw, _text(raw, encoding) as text:
            reader = _reader(text, source_format)
            names = list(columns)
            if source_format.header:
                header = next(reader, None)
                if header is None:
                    continue
                names = [name.lstrip("\ufeff") for name in header]
            if not set(key) <= set(names):
                continue
            wanted = [(names.index(column), value) for column, value in key.items()]
            start = reader.line_num + 1  # type: ignore[attr-defined]
            for count, fields in enumerate(reader):
                if all(i < len(fields) and fields[i] == value for i, value in wanted):
                    found.append(SourceLine(source, start))
                    if len(found) >= limit:
                        return found
                start = reader.line_num + 1  # type: ignore[attr-defined]
                if count % 4096 == 0 and time.monotonic() > deadline:
                    return found
    return found
