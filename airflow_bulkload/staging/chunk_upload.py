"""Split a normalized input into chunks and upload each to S3 while the next one is written."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.manifest import ChunkSpec
from airflow_bulkload.staging.planning import STAGED_FORMAT, chunk_name, format_size
from airflow_bulkload.staging.splitter import SplitProgress, split_into_chunks

if TYPE_CHECKING:
    from airflow_bulkload.staging.options import StagingOptions

log = logging.getLogger("airflow_bulkload.staging.stager")


def _upload(
    s3: Any, path: Path, uri: str, compression: str, upload_args: Mapping[str, str]
) -> None:
    bucket, key = parse_s3_uri(uri)
    extra = {**upload_args, "ContentType": "text/csv; charset=utf-8"}
    if compression == "gzip":
        # RDS aws_s3.table_import_from_s3 decompresses objects stored with this encoding
        extra["ContentEncoding"] = "gzip"
    s3.upload_file(str(path), bucket, key, ExtraArgs=extra)
    path.unlink()


def split_and_upload(
    s3: Any,
    normalized_path: Path,
    work_dir: Path,
    prefix: str,
    *,
    chunk_size: int,
    options: StagingOptions,
    columns: Sequence[str],
) -> list[ChunkSpec]:
    """Split into chunks and upload each while the next is written (one upload in flight)."""
    # normalize() checked the sort key against the columns; an empty input has neither
    known = list(columns) or list(options.table_columns or [])
    key = list(options.probe_key) or list(options.sort_key)
    if key and not all(k in known for k in key):
        log.warning(
            "the input does not hold every column of the key %s: chunks record no first/last "
            "key, so a re-run cannot check their rows by key",
            key,
        )
        key = []
    key_indexes = [known.index(k) for k in key]
    chunk_dir = work_dir / "chunks"
    chunk_dir.mkdir()
    started = time.monotonic()

    def report(progress: SplitProgress) -> None:
        elapsed = max(time.monotonic() - started, 1e-6)
        log.info(
            "split: %s read, %d rows, %d chunks written, %.1f MB/s",
            format_size(progress.bytes_read),
            progress.rows,
            progress.chunks,
            progress.bytes_read / 1e6 / elapsed,
        )

    specs: list[ChunkSpec] = []
    pending: Future[None] | None = None
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="bulkload-upload") as uploader:
        for chunk in split_into_chunks(
            normalized_path,
            chunk_dir,
            chunk_size=chunk_size,
            compression=options.compression,
            compress_level=options.compress_level,
            key_indexes=key_indexes,
            progress=report,
        ):
            if pending is not None:
                pending.result()  # at most two chunk files on disk at a time
            uri = prefix + chunk_name(chunk.index, options.compression)
            pending = uploader.submit(
                _upload, s3, chunk.path, uri, options.compression, options.upload_args
            )
            specs.append(
                ChunkSpec(
                    uri=uri,
                    checksum=chunk.sha256,
                    rows=chunk.rows,
                    bytes=chunk.stored_bytes,
                    raw_bytes=chunk.raw_bytes,
                    index=chunk.index,
                    compression="gzip" if options.compression == "gzip" else "none",
                    file_format=STAGED_FORMAT.to_dict(),
                    first_key=list(chunk.first_key) if chunk.first_key is not None else None,
                    last_key=list(chunk.last_key) if chunk.last_key is not None else None,
                    key_columns=key or None,
                )
            )
        if pending is not None:
            pending.result()
    return specs
