"""S3 for every layer: ``s3://`` URIs, clients, and streaming reads of bounded memory."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from functools import cache
from typing import Any, BinaryIO

from airflow_bulkload.connections import aws_client
from airflow_bulkload.exceptions import ChunkLoadError
from airflow_bulkload.gzip_codec import GZIP_READ_ERRORS, gunzip_reader

#: bytes read from S3 per request on the streaming path; memory per load task is a small multiple
READ_BUFFER_BYTES = 1024 * 1024


_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/key`` -> ``(bucket, key)``; the key may be empty (a bucket or prefix root)."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an S3 URI (expected s3://bucket/key): {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"S3 URI has no bucket: {uri!r}")
    return bucket, key


#: upload arguments staging sets itself on what it writes (the chunks' type and encoding)
RESERVED_UPLOAD_ARGS = frozenset({"ContentType", "ContentEncoding"})
#: SSE-C: every read of a staged object (manifests, chunk loads) would need the customer key
_SSE_C_ARGS = frozenset({"SSECustomerAlgorithm", "SSECustomerKey", "SSECustomerKeyMD5"})
_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "boolean": (bool,),
    "timestamp": (str, datetime),
    "integer": (int,),
    "long": (int,),
}


@cache
def _put_object_args() -> tuple[Any, frozenset[str]]:
    """PutObject's input shape and the upload arguments staging may pass (loaded once)."""
    from boto3.s3.transfer import S3Transfer
    from botocore.session import get_session

    put_object: Any = get_session().get_service_model("s3").operation_model("PutObject").input_shape
    allowed = {
        key
        for key in set(S3Transfer.ALLOWED_UPLOAD_ARGS) & set(put_object.members)
        if key == "ChecksumAlgorithm" or not key.startswith("Checksum")
    }
    return put_object, frozenset(allowed - RESERVED_UPLOAD_ARGS - _SSE_C_ARGS)


def check_upload_args(args: Any) -> None:
    """Refuse what S3 uploads do not take: ``ValueError`` naming the key or value.

    Staging passes ``args`` to every object it writes (``upload_file`` for chunks, ``put_object``
    for manifests), as S3Hook passes its ``extra_args``: e.g. ``{"ServerSideEncryption":
    "aws:kms", "SSEKMSKeyId": "alias/etl"}``. Keys both take, with values of PutObject's types;
    not the per-object checksums, not SSE-C (no reader of staged objects has its key).
    """
    if not isinstance(args, Mapping):
        raise ValueError(
            f"staging_extra_args must be a dict of S3 upload arguments, got {type(args).__name__}"
            " (a template renders text unless the DAG sets render_template_as_native_obj=True)"
        )
    if not args:
        return
    put_object, allowed = _put_object_args()
    sse_c = sorted(set(args) & _SSE_C_ARGS)
    if sse_c:
        raise ValueError(
            f"staging_extra_args {sse_c}: SSE-C needs the customer key on every read of a staged "
            "object, which the loads do not pass; use SSE-KMS (ServerSideEncryption aws:kms)"
        )
    unknown = sorted(set(args) - allowed)
    if unknown:
        raise ValueError(
            f"S3 upload arguments {unknown} are not taken by staging's uploads "
            f"(allowed: {', '.join(sorted(allowed))})"
        )
    for key, value in args.items():
        shape = put_object.members[key]
        if shape.type_name == "map":
            good = isinstance(value, Mapping) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            )
        else:
            good = isinstance(value, _PYTHON_TYPES.get(shape.type_name, (str,)))
        if not good:
            expected = "a dict of text to text" if shape.type_name == "map" else shape.type_name
            raise ValueError(f"staging_extra_args {key}={value!r}: expected {expected}")


def s3_error_code(exc: BaseException) -> str:
    """The S3 error code of a botocore ``ClientError`` (``NoSuchKey``, ``404``...), else ``""``."""
    return str(getattr(exc, "response", {}).get("Error", {}).get("Code", ""))


class _HashingReader:
    """Hashes the stored bytes as they are read, before any gunzipping."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.sha256 = hashlib.sha256()
        self.stored_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._inner.read(size)
        self.sha256.update(data)
        self.stored_bytes += len(data)
        return data

    def readable(self) -> bool:
        return True


class ChunkStream:
    """A read-only byte stream over an S3 object (gunzipped when it is gzip).

    Counts the bytes it hands out and turns decode failures into :class:`ChunkLoadError`.
    :meth:`verify` proves, before the loading transaction commits, that the stored bytes are
    the ones staging wrote (the manifest's sha256).
    """

    #: the bytes are the input object's as stored (a direct chunk), not a staged copy: a loader
    #: whose reading of CSV differs from staging's rewrites them in flight
    as_stored: bool = False

    def __init__(self, inner: BinaryIO, source: str, stored: _HashingReader | None = None) -> None:
        self._inner = inner
        self.source = source
        self.bytes_read = 0
        self._stored = stored

    def verify(self, checksum: str) -> None:
        """Read what the consumer left unread, then compare the stored bytes' sha256.

        Raises :class:`ChunkLoadError` when it is not ``checksum``. A checksum that is not a
        sha256 (a direct chunk's ETag) is not checked here: its reads are pinned to the ETag.
        """
        if self._stored is None or not _SHA256_HEX.match(checksum):
            return
        while self.read(READ_BUFFER_BYTES):
            pass
        while self._stored.read(READ_BUFFER_BYTES):
            pass
        actual = self._stored.sha256.hexdigest()
        if actual != checksum:
            raise ChunkLoadError(
                self.source,
                f"the stored object changed after staging: its sha256 is {actual}, the manifest "
                f"says {checksum}; nothing of it was committed. Stage the input again (a new "
                "run, or clear the stage task after deleting the manifest)",
                expected="the chunk exactly as staging wrote it",
            )

    def read(self, size: int = READ_BUFFER_BYTES) -> bytes:
        """Up to ``size`` bytes (never the whole object: a negative size reads one buffer)."""
        if size is None or size < 0:
            size = READ_BUFFER_BYTES
        try:
            data = self._inner.read(size)
        except GZIP_READ_ERRORS as exc:
            raise ChunkLoadError(
                self.source,
                f"the gzip stream is corrupt or truncated, or ends in bytes that are not gzip ({exc})",
                expected="a complete gzip object",
            ) from exc
        self.bytes_read += len(data)
        return data

    def __iter__(self) -> Iterator[bytes]:
        while data := self.read(READ_BUFFER_BYTES):
            yield data


def s3_client(aws_conn_id: str | None) -> Any:
    """A boto3 S3 client for the AWS connection, made as ``S3Hook.get_conn()`` makes it.

    Without the hook's user-agent stack walk (see :func:`~airflow_bulkload.connections.aws_client`).
    """
    return aws_client("s3", aws_conn_id)


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
        code = s3_error_code(exc)
        if code in ("NoSuchKey", "404", "NoSuchBucket"):
            raise ChunkLoadError(
                uri, "the S3 object does not exist", expected="a staged chunk"
            ) from exc
        raise
    body = response["Body"]
    try:
        stored = _HashingReader(body)
        raw: BinaryIO = stored  # type: ignore[assignment]
        if compression == "gzip":
            raw = gunzip_reader(stored)  # type: ignore[arg-type]
        yield ChunkStream(raw, uri, stored)
    finally:
        body.close()


def s3_region(aws_conn_id: str | None, client: Any = None) -> str:
    """The region the AWS connection points at (server-side loads need it).

    Read from its client (``client``, else a new one), so boto3's own defaults (environment,
    profile) count as they do for every read.
    """
    s3 = client or s3_client(aws_conn_id)
    return str(s3.meta.region_name or "us-east-1")
