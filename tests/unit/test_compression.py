"""Codecs told by their first bytes, and the streaming reader over each."""

from __future__ import annotations

import bz2
import gzip
import io

import pytest
from backports import zstd

from airflow_bulkload.compression import MAGIC_BYTES, codec_of, decompress_strictly, decompressed

TEXT = b"id,note\n" + b"".join(b"%d,note %d\n" % (i, i) for i in range(50_000))


@pytest.mark.parametrize(
    ("packed", "codec"),
    [
        (gzip.compress(TEXT), "gzip"),
        (zstd.compress(TEXT), "zstd"),
        (bz2.compress(TEXT), "bz2"),
        (TEXT, "none"),
        (b"BZh0 is not a bzip2 block size\n", "none"),
        (b"BZ", "none"),
        (b"", "none"),
    ],
)
def test_the_first_bytes_name_the_codec_and_the_reader_gives_the_text_back(
    packed: bytes, codec: str
) -> None:
    assert codec_of(packed[:MAGIC_BYTES]) == codec
    with decompressed(io.BytesIO(packed)) as reader:
        assert reader.read() == (packed if codec == "none" else TEXT)


@pytest.mark.parametrize("codec", ["zstd", "bz2"])
def test_strict_decompression_reads_every_frame_and_refuses_what_follows(codec: str) -> None:
    compress = zstd.compress if codec == "zstd" else bz2.compress
    half = len(TEXT) // 2
    joined = compress(TEXT[:half]) + compress(TEXT[half:])  # cat a.zst b.zst
    out = io.BytesIO()
    assert decompress_strictly(io.BytesIO(joined), out, codec) == len(TEXT)  # type: ignore[arg-type]
    assert out.getvalue() == TEXT
    for damaged in (joined + b"id,note\n1,x\n", joined[:-5]):  # plain text after, cut short
        with pytest.raises((OSError, EOFError, zstd.ZstdError)):
            decompress_strictly(io.BytesIO(damaged), io.BytesIO(), codec)  # type: ignore[arg-type]
