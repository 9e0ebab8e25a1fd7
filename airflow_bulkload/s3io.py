"""Streaming reads of S3 objects: bounded memory whatever the object size."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO

from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.staging.manifest import parse_s3_uri

#: bytes read from S3 per request on the streaming path; memory per load task is a small multiple
READ_BUFFER_BYTES = 1024 * 1024


class ChunkStream:
    """A read-only byte stream over an S3 object (gunzipped when it is gzip).

    Counts the bytes it hands out and turns decode failures into :class:`ChunkLoadError`.
    """

    def __init__(self, inner: BinaryIO, source: str) -> None:
        self._inner = inner
        self.source = source
        self.bytes_read = 0

    def read(self, size: int = READ_BUFFER_BYTES) -> bytes:
        """Up to ``size`` bytes (never the whole object: a negative size reads one buffer)."""
        if size is None or size < 0:
            size = READ_BUFFER_BYTES
        try:
            data = self._inner.read(size)
        except (EOFError, OSError, zlib.error) as exc:
            raise ChunkLoadError(
                self.source,
                f"the gzip stream is corrupt or truncated ({exc})",
                expected="a complete gzip object",
            ) from exc
        self.bytes_read += len(data)
        return data

    def __iter__(self) -> Iterator[bytes]:
        while data := self.read(READ_BUFFER_BYTES):
            yield data


def s3_client(aws_conn_id: str | None) -> Any:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    return S3Hook(aws_conn_id=aws_conn_id).get_conn()


@contextmanager
def open_s3_stream(
    uri: str, *, aws_conn_id: str | None, compression: str = "gzip", client: Any = None
) -> Iterator[ChunkStream]:
    """Open ``uri`` for streaming reads, gunzipping on the fly when ``compression == "gzip"``.

    Memory stays bounded by the read size the consumer asks for (plus zlib's window), never the
    object size. A missing object raises :class:`ChunkLoadError` naming the URI.
    """
    bucket, key = parse_s3_uri(uri)
    s3 = client or s3_client(aws_conn_id)
    try:
        response = s3.get_object(Bucket=bucket, Key=key)
    except Exception as exc:
        code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
        if code in ("NoSuchKey", "404", "NoSuchBucket"):
            raise ChunkLoadError(
                uri, "the S3 object does not exist", expected="a staged chunk"
            ) from exc
        raise
    body = response["Body"]
    try:
        raw: BinaryIO = body
        if compression == "gzip":
            raw = gzip.GzipFile(fileobj=body, mode="rb")  # type: ignore[assignment]
        yield ChunkStream(raw, uri)
    finally:
        body.close()


def s3_region(aws_conn_id: str | None) -> str:
    """The region the AWS connection points at (server-side loads need it)."""
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    hook = S3Hook(aws_conn_id=aws_conn_id)
    return str(hook.conn_region_name or "us-east-1")
