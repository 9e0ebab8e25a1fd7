"""Compressed input: which codec a stored object uses, told by its first bytes, and a reader.

gzip is the fast path (ISA-L, :mod:`airflow_bulkload.gzip_codec`) and loads as stored; zstd and
bzip2 inputs are staged: staging decompresses them (DuckDB reads zstd itself; bzip2 is
decompressed to plain CSV first) and error tracing reads them through :func:`decompressed`. Every
reader streams: memory stays a few buffers whatever the object's size.
"""

from __future__ import annotations

import bz2
import io
import sys
from typing import BinaryIO, Literal

from airflow_bulkload.gzip_codec import GZIP_READ_ERRORS, ReadIntoAdapter, gunzip_reader

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

Codec = Literal["gzip", "zstd", "bz2", "none"]

#: how many leading bytes :func:`codec_of` needs
MAGIC_BYTES = 4

#: what reading damaged compressed bytes raises, by any of the codecs
DECOMPRESS_ERRORS: tuple[type[BaseException], ...] = (*GZIP_READ_ERRORS, zstd.ZstdError)


def codec_of(head: bytes) -> Codec:
    """The codec of stored bytes that start with ``head`` (at least :data:`MAGIC_BYTES`)."""
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    if head[:4] == b"\x28\xb5\x2f\xfd":
        return "zstd"
    # "BZh" and the block size digit: a text file starting "BZh1" is not impossible, but rare
    if head[:3] == b"BZh" and head[3:4].isdigit() and head[3:4] != b"0":
        return "bz2"
    return "none"


def decompressed(raw: BinaryIO) -> io.BufferedIOBase:
    """``raw``'s bytes decompressed by the codec its first bytes name (as they are if none)."""
    buffered = (
        raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(ReadIntoAdapter(raw))
    )
    codec = codec_of(buffered.peek(MAGIC_BYTES)[:MAGIC_BYTES])
    if codec == "gzip":
        return gunzip_reader(buffered)  # type: ignore[return-value]
    if codec == "zstd":
        return zstd.ZstdFile(buffered)
    if codec == "bz2":
        return bz2.BZ2File(buffered)
    return buffered
