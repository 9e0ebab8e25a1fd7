"""Planning direct chunks: the input objects listed, their headers read, large ones cut in ranges.

See :mod:`~airflow_bulkload.staging.direct` for what a direct chunk is, where a range is cut and
why that is safe; this module makes the chunk specs, :mod:`~airflow_bulkload.staging.direct`
reads them.
"""

from __future__ import annotations

import csv
import zlib
from collections.abc import Sequence
from typing import Any

from airflow_bulkload.compression import codec_of
from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.direct import (
    PEEK_BYTES,
    UTF8_BOM,
    DirectRefusedError,
    csv_fields,
    reads_bom,
)
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat
from airflow_bulkload.staging.normalize import MAX_RECORD_BYTES, InputFormatError, check_header
from airflow_bulkload.staging.options import StagingOptions
from airflow_bulkload.staging.origin import empty_header_line
from airflow_bulkload.staging.planning import GZIP_EXPANSION_ESTIMATE, SourceFile


def _get(s3: Any, source: SourceFile, start: int, end: int) -> tuple[bytes, dict[str, Any]]:
    """Bytes ``[start, end)`` of the object, pinned to the ETag it was listed with."""
    bucket, key = parse_s3_uri(source.location)
    response = s3.get_object(
        Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}", IfMatch=source.version
    )
    body = response["Body"]
    try:
        return body.read(), response
    finally:
        body.close()


def _first_line(data: bytes, gzipped: bool, location: str, fmt: FileFormat) -> bytes:
    if gzipped:
        # a multi-member object (``cat a.gz b.gz``) may hold its first line in a later member
        text, rest = b"", data
        try:
            while rest[:2] == b"\x1f\x8b" and b"\n" not in text and len(text) < MAX_RECORD_BYTES:
                member = zlib.decompressobj(zlib.MAX_WBITS | 16)
                text += member.decompress(rest, MAX_RECORD_BYTES - len(text))
                rest = member.unused_data if member.eof else b""
        except zlib.error as exc:
            raise InputFormatError(f"{location} is not a readable gzip object ({exc})") from exc
        data = text
    if b"\r" in data and b"\n" not in data:
        raise DirectRefusedError(f"{location} ends its lines with CR alone")
    if data.startswith(UTF8_BOM) and reads_bom(fmt):
        data = data[len(UTF8_BOM) :]
    end = data.find(b"\n")
    line = data[: end if end >= 0 else len(data)].rstrip(b"\r")
    if end >= 0 and not line.strip():
        raise InputFormatError(empty_header_line(location))
    return line


def _refuse_names_in_two_cases(
    where: str, names: Sequence[str], table_columns: Sequence[str] | None
) -> None:
    """Column names (a header's, or ``columns``) naming one column twice in two cases.

    Unless the table has both names. MySQL matches column names in any case: its loader would
    write both fields into one column.
    """
    folded = [name.casefold() for name in names]
    twice = sorted(
        name
        for name in names
        if folded.count(name.casefold()) > 1 and name not in (table_columns or ())
    )
    if twice:
        raise InputFormatError(
            f"{where}: the columns {list(names)} name {twice} twice, in two cases, and the table "
            "has not both: a loader matching names in any case would write both fields into one "
            "column. Rename them (in the file's header, or in columns=)"
        )


def _refuse_one_column(names: Sequence[str] | None) -> None:
    """A one-column input is staged.

    An empty line is a record there (its one value NULL), not padding between records, and the
    direct reader drops empty lines.
    """
    if names is not None and len(names) == 1:
        raise DirectRefusedError("a one-column input: its empty lines are records")


def _cut_points(s3: Any, source: SourceFile, chunk_size: int) -> list[int]:
    """Offsets just after the first line end at or after each multiple of ``chunk_size``."""
    cuts: list[int] = []
    nominal = chunk_size
    while nominal < source.size - chunk_size // 2:
        offset = max(nominal, cuts[-1] if cuts else 0)
        cut = None
        while cut is None and offset < source.size and offset - nominal <= MAX_RECORD_BYTES:
            window, _ = _get(s3, source, offset, min(offset + PEEK_BYTES, source.size))
            at = window.find(b"\n")
            if at >= 0:
                cut = offset + at + 1
            offset += len(window)
        if cut is None and offset >= source.size:
            break  # the last record runs to the end of the object
        if cut is None:
            raise InputFormatError(
                f"{source.location}: no line end within {MAX_RECORD_BYTES // 2**20} MB after byte "
                f"{nominal}: records are longer than a record may be"
            )
        if cut >= source.size:
            break
        cuts.append(cut)
        nominal = cut + chunk_size
    return cuts


def plan_direct(
    sources: Sequence[SourceFile],
    s3: Any,
    options: StagingOptions,
    *,
    ledger_prefix: str,
    manifest_uri: str,
) -> tuple[list[ChunkSpec], list[str] | None]:
    """Chunk specs that point at the input objects, and the input's columns (first file's).

    ``ledger_prefix`` is the staging prefix's key: each chunk's ledger key is
    ``<ledger_prefix>direct-NNNNN``, beside the manifest at ``manifest_uri``. With a header, each object is mapped
    by its own header (files naming other columns are refused, as staging does); without one,
    ``options.columns`` (else the table's columns) name the fields in file order.
    """
    fmt, chunk_size, columns = options.file_format, options.chunk_size, options.columns
    table_columns, key_columns = options.table_columns, options.probe_key
    chunks: list[ChunkSpec] = []
    first: tuple[str, list[str]] | None = None
    for source in sources:
        if source.size == 0:
            continue
        head, response = _get(s3, source, 0, min(PEEK_BYTES, source.size))
        codec = codec_of(head)
        if codec in ("zstd", "bz2"):
            raise DirectRefusedError(f"{source.location} is {codec}-compressed: staging reads it")
        gzipped = codec == "gzip"
        names = list(columns) if columns else list(table_columns) if table_columns else None
        if fmt.header:
            first_line = _first_line(head, gzipped, source.location, fmt)
            if not first_line:
                continue  # a gzip object of nothing: no header, no rows, as staging reads it
            try:
                header = csv_fields(first_line, fmt)
            except csv.Error as exc:
                raise InputFormatError(
                    f"{source.location}: its first line does not read as a CSV header ({exc}); "
                    "is it CSV (an object named .gz that is not gzip is read as plain text)?"
                ) from exc
            if any(name != name.strip() for name in header):
                raise DirectRefusedError(f"{source.location}'s header names hold spaces at an end")
            check_header(source.location, header, columns)
            names = list(columns) if columns else header
            if first is None:
                first = (source.location, names)
            elif set(names) != set(first[1]) or len(names) != len(first[1]):
                raise InputFormatError(
                    f"{source.location} has columns {names}, but {first[0]} has {first[1]}: "
                    "every file of one input must name the same columns"
                )
        elif first is None:
            first = (source.location, names or [])
        if names:  # the names the loader is given: the header's, or columns= for them
            _refuse_names_in_two_cases(source.location, names, table_columns)
        _refuse_one_column(names)
        whole = gzipped or options.quoted_newlines or source.size <= chunk_size + chunk_size // 2
        cuts = [] if whole else _cut_points(s3, source, chunk_size)
        bounds = list(zip([0, *cuts], [*cuts, source.size], strict=True))
        for start, end in bounds:
            index = len(chunks)
            chunks.append(
                ChunkSpec(
                    uri=source.location,
                    checksum=f"etag:{source.version}:{start}-{end}",
                    rows=None,
                    bytes=end - start,
                    raw_bytes=(end - start) * (GZIP_EXPANSION_ESTIMATE if gzipped else 1),
                    index=index,
                    compression="gzip" if gzipped else "none",
                    file_format=fmt.without_header().to_dict(),
                    columns=names,
                    key_columns=list(key_columns) or None,
                    etag=source.version,
                    ledger_key=f"{ledger_prefix}direct-{index:05d}",
                    manifest_uri=manifest_uri,
                    version_id=response.get("VersionId") or None,
                    byte_range=None if len(bounds) == 1 else [start, end],
                    skip_header=fmt.header and start == 0,
                )
            )
    return chunks, first[1] if first else None
