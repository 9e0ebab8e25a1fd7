"""Compressed input: which codec a stored object uses, told by its first bytes, and a reader.

gzip is the fast path (ISA-L, :mod:`airflow_bulkload.gzip_codec`) and loads as stored; zstd and
bzip2 inputs are staged: staging decompresses them to plain CSV as they are downloaded
(:func:`decompress_strictly`, which refuses what a lenient reader would skip), and error tracing
reads them through :func:`decompressed`. Every reader streams: memory stays a few buffers
whatever the object's size.
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
MAGIC_BYTES = 10

#: what reading damaged compressed bytes raises, by any of the codecs
DECOMPRESS_ERRORS: tuple[type[BaseException], ...] = (*GZIP_READ_ERRORS, zstd.ZstdError)

_ZSTD_FRAME = b"\x28\xb5\x2f\xfd"
#: a bzip2 stream's first block ("pi") or, for an empty stream, its end-of-stream marker ("e")
_BZ2_AFTER_HEADER = (b"\x31\x41\x59\x26\x53\x59", b"\x17\x72\x45\x38\x50\x90")
_BLOCK = 1024 * 1024


def codec_of(head: bytes) -> Codec:
    """The codec of stored bytes that start with ``head`` (at least :data:`MAGIC_BYTES`)."""
    if head[:2] == b"\x1f\x8b":
        return "gzip"
    # a zstd frame, or a skippable frame first (0x184D2A5?, as pzstd writes)
    if head[:4] == _ZSTD_FRAME or (
        head[:1] and head[0] & 0xF0 == 0x50 and head[1:4] == b"\x2a\x4d\x18"
    ):
        return "zstd"
    # "BZh", the block size digit, then a block or the end of the stream: text rarely does that
    if head[:3] == b"BZh" and head[3:4] in b"123456789" and head[4:10] in _BZ2_AFTER_HEADER:
        return "bz2"
    return "none"


def decompress_strictly(source: BinaryIO, out: BinaryIO, codec: Codec) -> int:
    """Decompress every zstd frame or bzip2 stream of ``source`` into ``out``; bytes written.

    Frames and streams may follow each other (``cat a.zst b.zst``), but anything after one that
    does not decompress, or one cut short, raises: Python's ``BZ2File`` would skip such bytes
    and a load would miss their rows. Memory stays a few blocks.
    """
    new = {"zstd": zstd.ZstdDecompressor, "bz2": bz2.BZ2Decompressor}[codec]
    decompressor, fed, written = new(), False, 0
    data = b""
    while True:
        if not data:
            data = source.read(_BLOCK)
            if not data:
                break
        chunk = decompressor.decompress(data, max_length=_BLOCK)
        fed, data = True, b""
        while True:
            out.write(chunk)
            written += len(chunk)
            if decompressor.eof or decompressor.needs_input:
                break
            chunk = decompressor.decompress(b"", max_length=_BLOCK)
        if decompressor.eof:  # the next frame or stream, if any, starts in what is left
            data, decompressor, fed = decompressor.unused_data, new(), False
    if fed and not decompressor.eof:
        raise EOFError("the compressed data ends before its end-of-stream marker")
    return written


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
