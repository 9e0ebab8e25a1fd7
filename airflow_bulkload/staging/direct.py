"""Direct chunks: input objects loaded as they are stored, with no staged copy.

When the input needs no rewrite (CSV in S3 whose columns map onto the table, no sort, a loader
that reads the format as written), planning lists the objects and emits chunk specs that point
at the objects themselves: a gzip object is one chunk; a plain object larger than the chunk
size is cut into byte ranges (S3 ranged GETs) at line ends. Nothing is downloaded to a worker's
disk, and the only object written under the staging prefix is the manifest.

**Where a range is cut, and why that is safe.** A cut is placed after the first line end at or
after each multiple of the chunk size, found with a small ranged GET. A quoted value may hold a
line end, and a cut inside one would split a record. The loader of each range counts the quote
characters it streams: a range that starts outside quotes (the first does) ends outside quotes
exactly when it holds an even number of them (a doubled quote, the CSV escape, counts twice), so
every cut is checked by the range before it, and a range whose count is odd fails before its
transaction commits, naming the cut and what to do (``quoted_newlines=True`` loads each object
whole). That check needs the quote to be its own escape; an input with another escape
character is staged instead.

**What a range knows of itself.** Its object's ETag (or version id, when the bucket keeps
versions) is pinned on every read, so an object changed after planning fails the read instead of
loading other bytes; its first and last key, for the ledger's checks, are read from its first
and last record while it streams.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.gzip_codec import gunzip_reader
from airflow_bulkload.s3io import (
    READ_BUFFER_BYTES,
    ChunkStream,
    open_s3_stream,
    s3_client,
    s3_error_code,
)
from airflow_bulkload.staging.copy_safety import CopySafety
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat
from airflow_bulkload.staging.normalize import MAX_RECORD_BYTES

#: bytes read at the start of each object (format and header) and around each cut point
PEEK_BYTES = 64 * 1024
#: how far into an object an error's line is counted from its start (a later range's error
#: names its line in the range instead)
COUNT_LINES_BUDGET_BYTES = 512 * 1024 * 1024
#: the tail of a range kept while it streams, to read its last record's key
TAIL_BYTES = 1024 * 1024
UTF8_BOM = b"\xef\xbb\xbf"
#: how the errors of a chunk that cannot be taken back out end
WITHDRAW_OUTCOME = "nothing of it was taken out of the table"
#: a line end right after a line end (LF or CRLF): one regex pass is faster than two substring
#: searches for patterns that start with LF, the byte that ends every line
_EMPTY_LINE = re.compile(rb"\n\r?\n")


def reads_bom(fmt: FileFormat) -> bool:
    """Whether a UTF-8 byte order mark is skipped: in UTF-8 input (in Latin-1 it is text)."""
    return fmt.python_encoding == "utf-8"


class DirectInputError(ChunkLoadError):
    """Found while reading an object as stored.

    Its line, if any, is counted from the chunk's first byte: the object's line for a whole
    object or the first range; :func:`at_object_line` counts the lines before a later range.
    """


class DirectRefusedError(Exception):
    """Planning found what loading as stored would read differently from staging: stage it."""


def csv_fields(line: bytes, fmt: FileFormat) -> list[str]:
    if csv.field_size_limit() < MAX_RECORD_BYTES:
        csv.field_size_limit(MAX_RECORD_BYTES)
    text = line.decode(fmt.python_encoding, errors="replace")
    return next(csv.reader([text], delimiter=fmt.delimiter, quotechar=fmt.quote), [])


class _DirectReader:
    """The bytes of one direct chunk as the loader must see them: no BOM, no header line.

    While they stream it counts quotes (the cut check), refuses NUL bytes (PostgreSQL cannot
    store them, and the staged path refuses them too), and keeps the first and last record for
    the chunk's key probe.
    """

    def __init__(self, raw: BinaryIO, spec: ChunkSpec) -> None:
        self._raw = raw
        self._spec = spec
        self._fmt = spec.format
        self._quote = self._fmt.quote.encode()
        self._pending: bytes | None = None
        self._quotes = 0
        self._offset = (spec.byte_range or [0])[0]
        self._head = b""
        self.first_record: bytes | None = None
        self._tail = b""
        self._done = False
        self._copy_safety = CopySafety(self._fmt.quote, self._fmt.delimiter)

    def _start(self) -> None:
        data = self._raw.read(READ_BUFFER_BYTES)
        if self._offset == 0 and data.startswith(UTF8_BOM) and reads_bom(self._fmt):
            data = data[len(UTF8_BOM) :]
        if self._spec.skip_header:
            # the first physical line, as planning read the header from it
            while (end := data.find(b"\n")) < 0:
                if len(data) > MAX_RECORD_BYTES:
                    raise DirectInputError(
                        self._spec.uri,
                        f"the header line is longer than {MAX_RECORD_BYTES // 2**20} MB",
                        line=1,
                        expected="a header line",
                    )
                more = self._raw.read(READ_BUFFER_BYTES)
                if not more:
                    break  # a header alone
                data += more
            data = data[end + 1 :] if end >= 0 else b""
        self._pending = data

    def _next_lines(self, size: int) -> bytes:
        """The next whole lines of the stream (the last one may lack its line end).

        Every block handed on so starts at a line start: empty lines and quotes are judged
        within it.
        """
        data = self._pending or self._raw.read(size)
        self._pending = b""
        parts, held = [data], len(data)
        while parts[-1] and not parts[-1].endswith(b"\n"):
            last = parts[-1]
            at = last.rfind(b"\n")  # only the newest read: a long line costs no rescans
            if at >= 0:
                self._pending = last[at + 1 :]
                parts[-1] = last[: at + 1]
                break
            if held > MAX_RECORD_BYTES:
                raise DirectInputError(
                    self._spec.uri,
                    f"a line longer than {MAX_RECORD_BYTES // 2**20} MB",
                    line=self._copy_safety.lines + 1 + (1 if self._spec.skip_header else 0),
                    expected="lines of CSV records (line ends LF or CRLF)",
                )
            more = self._raw.read(size)
            if not more:
                break  # the last line, without a line end
            parts.append(more)
            held += len(more)
        return b"".join(parts)

    def read(self, size: int = READ_BUFFER_BYTES) -> bytes:
        if self._pending is None:
            self._start()
        data = self._next_lines(size)
        if not data:
            self._finish()
            return b""
        self._refuse_misread(data)  # the lines as stored, counted as the object has them
        data = self._without_blank_lines(data)
        if not data:
            return self.read(size)
        self._inspect(data)
        return data

    def _without_blank_lines(self, data: bytes) -> bytes:
        """Drop empty lines between records, as staging does (COPY would refuse them).

        An empty line is a line end that follows a line end outside a quoted value: the quotes
        before it are even in number (inside a quoted value, an empty line is data).
        """
        if not (data.startswith((b"\n", b"\r\n")) or _EMPTY_LINE.search(data)):
            return data  # blocks start at a line start (see _next_lines)
        quotes = self._quotes
        kept: list[bytes] = []
        start = 0
        at = data.find(b"\n")
        while at >= 0:
            line = data[start : at + 1]
            if not (line in (b"\n", b"\r\n") and quotes % 2 == 0):  # empty between records
                kept.append(line)
            quotes += line.count(self._quote)
            start = at + 1
            at = data.find(b"\n", start)
        kept.append(data[start:])
        return b"".join(kept)

    def _inspect(self, data: bytes) -> None:
        nul = data.find(b"\0")
        if nul >= 0:
            raise DirectInputError(
                self._spec.uri,
                "the input holds a NUL byte (U+0000): PostgreSQL cannot store it in text and "
                "MySQL would store it verbatim, so it is refused. Remove NUL bytes from the input "
                "(e.g. tr -d '\\000'), or map them to a character of your choice",
                expected="text without NUL bytes",
            )
        if self._quote in data:
            self._quotes += data.count(self._quote)
        if self.first_record is None and len(self._head) <= MAX_RECORD_BYTES:
            self._head += data
            end = self._head.find(b"\n")
            if end >= 0:
                self.first_record = self._head[:end]
                self._head = b""
        self._tail = (
            data[-TAIL_BYTES:] if len(data) >= TAIL_BYTES else (self._tail + data)[-TAIL_BYTES:]
        )

    def _refuse_misread(self, data: bytes) -> None:
        r"""Fail before commit where COPY would read the stored bytes otherwise than staging.

        A quote inside an unquoted value (``27",``), text after a closing quote, or a line
        that is ``\.`` alone (see :mod:`~airflow_bulkload.staging.copy_safety`). Blocks start
        at a line start.
        """
        misread = self._copy_safety.check(data)
        if misread is None:
            return
        line = misread.line + (1 if self._spec.skip_header else 0)  # the object's line
        raise DirectInputError(
            self._spec.uri,
            f"{misread.reason} (the line starts {misread.sample!r}). Quote that value in the "
            "input, or load it staged (direct=False), which reads it as text",
            line=line,
            expected="quotes only around whole values, doubled inside them",
        )

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        if self._quotes % 2 and not self._spec.byte_range:
            raise DirectInputError(
                self._spec.uri,
                "a quote opens a value that never closes: the object ends inside a quoted value",
                expected="every quoted value closed",
            )
        if self._quotes % 2:
            start, end = self._spec.byte_range or [0, self._spec.bytes]
            raise DirectInputError(
                self._spec.uri,
                f"bytes {start}-{end} end inside a quoted value: a quoted field holds a line end "
                f"across the cut at byte {end}, so the records there cannot be split by bytes. "
                "Nothing of this range was loaded; run the load with quoted_newlines=True (each "
                "object is then loaded whole)",
                expected="ranges cut between records",
            )

    @property
    def last_record(self) -> bytes | None:
        tail = self._tail.rstrip(b"\r\n")
        at = tail.rfind(b"\n")
        if at < 0 and len(self._tail) >= TAIL_BYTES:
            return None  # longer than what was kept
        return tail[at + 1 :]

    def key_probe(
        self, columns: Sequence[str], key: Sequence[str]
    ) -> tuple[list[str], list[str]] | None:
        """The first and last record's ``key`` values, when both records are single lines."""
        if not key or not set(key) <= set(columns):
            return None
        records = [self.first_record, self.last_record]
        keys: list[list[str]] = []
        for record in records:
            if record is None or record.count(self._quote) % 2:
                return None  # a record over several lines: its key cannot be read from one
            fields = csv_fields(record.rstrip(b"\r"), self._fmt)
            if len(fields) != len(columns):
                return None
            keys.append([fields[list(columns).index(k)] for k in key])
        return keys[0], keys[1]


#: S3 error codes of a pinned read whose object changed or went away since planning
_GONE = ("PreconditionFailed", "412", "NoSuchKey", "404", "NoSuchVersion")


def _content_gone(spec: ChunkSpec, code: str) -> DirectInputError:
    """The error of a chunk whose loaded rows must be taken back out but whose content is gone."""
    kept = "keeps no versions of it" if not spec.version_id else "no longer has that version"
    return DirectInputError(
        spec.uri,
        f"the rows this chunk loaded cannot be told any more: its object changed since "
        f"({code}) and the bucket {kept}, so its old content is gone. "
        "Delete those rows from the table yourself (and then this chunk's row in the "
        "chunk ledger), or keep versions on the input bucket (S3 versioning) so old "
        "content stays readable; direct=False keeps a staged copy instead",
        expected=f"the object with ETag {spec.etag}",
        outcome=WITHDRAW_OUTCOME,
    )


def check_withdrawable(spec: ChunkSpec, client: Any) -> None:
    """Raise what :func:`open_chunk_stream` (``to_withdraw``) would, without reading the bytes.

    A HEAD of the chunk's object (its version, when planning saw one), its ETag (a staged
    chunk: its size) compared with what its load read, so a withdraw of many chunks can find
    an unreadable one before it takes any out.
    """
    request: dict[str, Any] = {"Bucket": spec.bucket, "Key": spec.object_key}
    if spec.is_direct and spec.version_id:
        request["VersionId"] = spec.version_id
    try:
        head = client.head_object(**request)
    except Exception as exc:
        code = s3_error_code(exc)
        if code not in _GONE:
            raise
        if spec.is_direct:
            raise _content_gone(spec, code) from exc
        raise ChunkLoadError(
            spec.uri,
            f"the staged chunk is gone ({code}), so the rows it loaded cannot be told any more. "
            "Delete those rows from the table yourself (and then this chunk's row in the chunk "
            "ledger), or keep the staging prefix until its loads are replaced",
            expected="the staged chunk its load read",
            outcome=WITHDRAW_OUTCOME,
        ) from exc
    if spec.is_direct:
        # compared even with a version pinned: a bucket with versioning suspended overwrites
        # its "null" version in place
        etag = str(head.get("ETag", "")).strip('"')
        if spec.etag and etag != spec.etag.strip('"'):
            raise _content_gone(spec, f"ETag {etag}")
        return
    size = int(head.get("ContentLength", spec.bytes))
    if spec.bytes and size != spec.bytes:  # a staged chunk's manifest keeps its size, no ETag
        raise staged_chunk_replaced(spec, f"it has {size} bytes, the manifest says {spec.bytes}")


def staged_chunk_replaced(spec: ChunkSpec, found: str) -> ChunkLoadError:
    """The error of a staged chunk to take back out whose object is not what its load read.

    ``found``: how that shows (its size, its sha256).
    """
    return ChunkLoadError(
        spec.uri,
        f"the staged chunk was replaced since it loaded ({found}), so the rows it loaded "
        "cannot be told from it. Put the chunk back as staging wrote it, or delete those rows "
        "from the table yourself (and then this chunk's row in the chunk ledger)",
        expected="the staged chunk its load read",
        outcome=WITHDRAW_OUTCOME,
    )


def _pinned(spec: ChunkSpec) -> dict[str, Any]:
    """A GET of the chunk's object as planning saw it: its version, else its ETag."""
    request: dict[str, Any] = {"Bucket": spec.bucket, "Key": spec.object_key}
    if spec.version_id:
        request["VersionId"] = spec.version_id
    elif spec.etag:
        request["IfMatch"] = spec.etag
    return request


def at_object_line(error: DirectInputError, spec: ChunkSpec, client: Any) -> DirectInputError:
    """``error`` with its line counted from the object's start, not its range's.

    The reader counts the lines of the bytes it streams; a range after the first starts
    mid-object, so the lines before it are counted here, reading them pinned as the load did
    (on the error path only, up to :data:`COUNT_LINES_BUDGET_BYTES`; further in, the error names
    the range's line and where the range starts).
    """
    start = (spec.byte_range or [0])[0]
    if error.line is None or start == 0:
        return error
    if start > COUNT_LINES_BUDGET_BYTES:  # an error path does not read gigabytes
        return DirectInputError(
            error.source,
            f"{error.reason} (line {error.line} of the range that starts at byte {start}; the "
            "lines before it were not counted)",
            column=error.column,
            expected=error.expected,
        )
    body = client.get_object(Range=f"bytes=0-{start - 1}", **_pinned(spec))["Body"]
    before = 0
    try:
        while block := body.read(READ_BUFFER_BYTES):
            before += block.count(b"\n")
    finally:
        body.close()
    return DirectInputError(
        error.source,
        error.reason,
        line=before + error.line,
        column=error.column,
        expected=error.expected,
    )


@contextmanager
def open_chunk_stream(
    spec: ChunkSpec, *, aws_conn_id: str | None, client: Any = None, to_withdraw: bool = False
) -> Iterator[ChunkStream]:
    """A chunk's bytes as its loader reads them: a staged object, or a direct one's range.

    A direct chunk's object is read pinned to the version (or ETag) planning saw: an object
    changed since fails with :class:`ChunkLoadError` before anything loads.
    """
    if not spec.is_direct:
        with open_s3_stream(
            spec.uri, aws_conn_id=aws_conn_id, compression=spec.compression, client=client
        ) as stream:
            yield stream
        return
    s3 = client or s3_client(aws_conn_id)
    request = _pinned(spec)
    if spec.byte_range:
        request["Range"] = f"bytes={spec.byte_range[0]}-{spec.byte_range[1] - 1}"
    try:
        response = s3.get_object(**request)
    except Exception as exc:
        code = s3_error_code(exc)
        if to_withdraw and code in _GONE:
            raise _content_gone(spec, code) from exc
        if code in _GONE:
            raise DirectInputError(
                spec.uri,
                "the input object changed or went away after the load was planned "
                f"({code}); nothing of it was loaded. Run the load again: planning sees the "
                "object as it is now",
                expected=f"the object with ETag {spec.etag}",
            ) from exc
        raise
    body = response["Body"]
    try:
        raw: Any = gunzip_reader(body) if spec.compression == "gzip" else body
        yield DirectChunkStream(_DirectReader(raw, spec), spec)
    finally:
        body.close()


class DirectChunkStream(ChunkStream):
    """A direct chunk's stream; after it is read, :meth:`key_probe` has its first and last key."""

    as_stored = True

    def __init__(self, reader: _DirectReader, spec: ChunkSpec) -> None:
        super().__init__(reader, spec.uri)  # type: ignore[arg-type]
        self._reader = reader
        self._spec = spec

    def key_probe(self) -> tuple[list[str], list[str]] | None:
        """The first and last record's key (``None`` without a key or for multi-line records)."""
        if not self._spec.key_columns:
            return None
        return self._reader.key_probe(self._spec.columns or [], self._spec.key_columns)
