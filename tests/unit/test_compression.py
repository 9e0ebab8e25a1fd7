"""Codecs told by their first bytes, and the streaming reader over each."""

from __future__ import annotations

import bz2
import gzip
import io

import pytest
from backports import zstd

from airflow_bulkload.compression import codec_of, decompressed

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
    assert codec_of(packed[:4]) == codec
    with decompressed(io.BytesIO(packed)) as reader:
        assert reader.read() == (packed if codec == "none" else TEXT)
