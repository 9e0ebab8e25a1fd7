"""Test helper: put a chunk object into the moto S3 server and describe it as a manifest entry."""

from __future__ import annotations

import gzip
import hashlib
from typing import Any

from tests.harness import MotoServer


def put_chunk(
    moto: MotoServer,
    bucket: str,
    key: str,
    data: bytes,
    *,
    rows: int | None,
    compress: bool = True,
    file_format: dict[str, Any] | None = None,
    columns: list[str] | None = None,
    truncate_to: int | None = None,
) -> dict[str, Any]:
    """Upload ``data`` (gzipped unless ``compress=False``; cut to ``truncate_to`` bytes after
    compression to fake a broken object) and return its ChunkSpec dict."""
    body = gzip.compress(data, compresslevel=1) if compress else data
    if truncate_to is not None:
        body = body[:truncate_to]
    moto.client("s3").put_object(Bucket=bucket, Key=key, Body=body)
    return {
        "uri": f"s3://{bucket}/{key}",
        "checksum": hashlib.sha256(body).hexdigest(),
        "rows": rows,
        "bytes": len(body),
        "raw_bytes": len(data),
        "compression": "gzip" if compress else "none",
        "file_format": file_format or {},
        "columns": columns,
    }
