"""Staging one input to S3: resolve, fingerprint, skip if done, normalize (+ sort), split, upload.

The operator is a thin wrapper around :func:`stage`; everything here takes an S3 client so it
runs the same in a task, a script or a test.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_bulkload.exceptions import BulkLoadError, NulByteError
from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.direct import DirectRefusedError, direct_refusal, plan_direct
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, Manifest, read_manifest
from airflow_bulkload.staging.normalize import normalize
from airflow_bulkload.staging.origin import find_nul
from airflow_bulkload.staging.planning import (
    DEFAULT_MAX_MAP_LENGTH,
    MANIFEST_NAME,
    STAGED_FORMAT,
    SourceFile,
    chunk_name,
    fit_chunk_size,
    format_size,
    input_fingerprint,
    staging_prefix,
    temp_space_needed,
)
from airflow_bulkload.staging.sources import materialize, open_source, resolve_sources
from airflow_bulkload.staging.splitter import SplitProgress, split_into_chunks
from airflow_bulkload.staging.workdir import staging_workdir

log = logging.getLogger(__name__)

COMPRESSIONS = ("gzip", "none")


class InsufficientTempSpaceError(BulkLoadError):
    """The temp directory has less free space than a staging run needs."""


@dataclass(frozen=True)
class StagingOptions:
    """Everything that shapes the staged chunks (and so belongs in the fingerprint)."""

    file_format: FileFormat = field(default_factory=FileFormat)
    columns: list[str] | None = None
    sort_key: list[str] = field(default_factory=list)
    sort_types: list[str] = field(default_factory=list)
    chunk_size: int = 256_000_000
    compression: str = "gzip"
    compress_level: int = 1
    #: the table's key (primary, else a NOT NULL unique one): each chunk records its first and
    #: last record's key, for the ledger's checks; not part of the fingerprint (no rewrite)
    probe_key: list[str] = field(default_factory=list)
    #: the table's loadable columns, naming the input's columns when it has neither a header
    #: nor ``columns``
    table_columns: list[str] | None = None
    #: load S3 objects as they are stored when the input needs no rewrite (see
    #: :mod:`~airflow_bulkload.staging.direct`); the caller sets it only for an engine whose
    #: loader reads CSV as written, with the ``client`` method
    direct: bool = False
    #: quoted values may hold line ends (the safe default): direct objects are loaded whole;
    #: ``False`` declares they never do, and large plain objects are cut in byte ranges
    quoted_newlines: bool = True

    def __post_init__(self) -> None:
        if self.compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {COMPRESSIONS}, got {self.compression!r}")
        if len(self.sort_types) != len(self.sort_key):
            raise ValueError("sort_types needs one type per sort_key column")
        if not 0 <= self.compress_level <= 9:
            raise ValueError(f"compress_level must be 0-9, got {self.compress_level}")

    def fingerprint_options(self) -> dict[str, Any]:
        return {
            "file_format": self.file_format.to_dict(),
            "columns": self.columns,
            "sort_key": self.sort_key,
            "sort_types": self.sort_types,
            "chunk_size": self.chunk_size,
            "compression": self.compression,
            "compress_level": self.compress_level,
            **({"direct": True, "quoted_newlines": self.quoted_newlines} if self.direct else {}),
        }


@dataclass(frozen=True)
class Resources:
    """Local resources a staging run may use."""

    temp_dir: str | None = None
    memory_limit: str = "1GB"
    threads: int | None = None
    check_temp_space: bool = True
    max_map_length: int = DEFAULT_MAX_MAP_LENGTH
    grow_chunk_size: bool = False


@dataclass(frozen=True)
class StageResult:
    manifest: Manifest
    manifest_uri: str
    prefix: str
    skipped: bool


def delete_prefix(s3: Any, prefix_uri: str) -> int:
    """Delete every object under ``prefix_uri``; returns how many there were."""
    bucket, prefix = parse_s3_uri(prefix_uri)
    deleted = 0
    paginator = s3.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=prefix):
        keys = [{"Key": obj["Key"]} for obj in page.get("Contents", [])]
        if keys:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": keys, "Quiet": True})
            deleted += len(keys)
    return deleted


def _check_temp_space(path: Path, sources: Sequence[SourceFile], options: StagingOptions) -> None:
    needed = temp_space_needed(sources, sort=bool(options.sort_key), chunk_size=options.chunk_size)
    free = shutil.disk_usage(path).free
    if free < needed:
        raise InsufficientTempSpaceError(
            f"temp directory {path} has {format_size(free)} free, but staging this input needs "
            f"about {format_size(needed)} (downloads + normalized copy"
            f"{' + sort spill' if options.sort_key else ''} + chunks in flight); point temp_dir "
            "at a larger volume, or set check_temp_space=False if the estimate is too high"
        )


def _upload(s3: Any, path: Path, uri: str, compression: str) -> None:
    bucket, key = parse_s3_uri(uri)
    extra = {"ContentType": "text/csv; charset=utf-8"}
    if compression == "gzip":
        # RDS aws_s3.table_import_from_s3 decompresses objects stored with this encoding
        extra["ContentEncoding"] = "gzip"
    s3.upload_file(str(path), bucket, key, ExtraArgs=extra)
    path.unlink()


def stage(
    source: str | Sequence[str],
    *,
    s3: Any,
    staging_uri: str,
    dag_id: str,
    table: str,
    run: str,
    options: StagingOptions,
    resources: Resources | None = None,
    work_owner: str | None = None,
) -> StageResult:
    """Stage ``source`` under a deterministic prefix and return its manifest.

    A complete manifest for the same input fingerprint means the work is done: nothing is read
    and it is returned as is. Local files go to a working directory of this attempt (see
    :mod:`~airflow_bulkload.staging.workdir`; ``work_owner`` names the task instance in it),
    removed at the end, or by a later staging call on the worker if this one is killed. Anything else under the prefix (chunks of an interrupted attempt,
    a manifest that does not match) is deleted before staging, so chunks are never mixed.
    """
    resources = resources or Resources()
    sources = resolve_sources(source, s3)
    if options.direct:
        refusal = direct_refusal(sources, options.file_format, sort_key=options.sort_key)
        if refusal:
            log.info("the input is staged, not loaded as stored: %s", refusal)
            options = replace(options, direct=False)
    fingerprint = input_fingerprint(sources, options.fingerprint_options())
    prefix = staging_prefix(
        staging_uri, dag_id=dag_id, table=table, run=run, fingerprint=fingerprint
    )
    manifest_uri = prefix + MANIFEST_NAME
    existing = read_manifest(s3, manifest_uri)
    if existing is not None and existing.input_fingerprint == fingerprint:
        log.info(
            "%s already holds a complete manifest for this input (%d chunks, %d rows); "
            "nothing to stage",
            manifest_uri,
            len(existing.chunks),
            existing.total_rows,
        )
        return StageResult(existing, manifest_uri, prefix, skipped=True)
    stale = delete_prefix(s3, prefix)
    if stale:
        log.info("deleted %d objects of an earlier, incomplete attempt under %s", stale, prefix)

    input_bytes = sum(s.size for s in sources)
    if options.direct:
        try:
            return _plan_direct(s3, sources, options, prefix, fingerprint, input_bytes, resources)
        except DirectRefusedError as exc:
            log.info("the input is staged, not loaded as stored: %s", exc)
            return stage(
                source,
                s3=s3,
                staging_uri=staging_uri,
                dag_id=dag_id,
                table=table,
                run=run,
                options=replace(options, direct=False),
                resources=resources,
                work_owner=work_owner,
            )
    log.info(
        "staging %d file(s), %s, to %s (chunk size %s, %s, sort key %s)",
        len(sources),
        format_size(input_bytes),
        prefix,
        format_size(options.chunk_size),
        options.compression,
        options.sort_key or "none",
    )
    temp_root = Path(resources.temp_dir or tempfile.gettempdir())
    temp_root.mkdir(parents=True, exist_ok=True)
    if resources.check_temp_space:
        _check_temp_space(temp_root, sources, options)

    started = time.monotonic()
    with staging_workdir(temp_root, work_owner or f"{dag_id}/{table}/{run}") as work_dir:
        local = materialize(sources, work_dir / "input", s3, log)
        names = {str(p): s.location for p, s in zip(local, sources, strict=True)}
        normalized_path = work_dir / "normalized.csv"
        spill = work_dir / "duckdb-spill"
        spill.mkdir()
        normalized = normalize(
            local,
            normalized_path,
            options.file_format,
            columns=options.columns,
            sort_key=options.sort_key,
            sort_types=options.sort_types,
            memory_limit=resources.memory_limit,
            threads=resources.threads,
            temp_dir=spill,
            path_names=names,
        )
        shutil.rmtree(work_dir / "input")  # downloads are no longer needed; free the space
        normalized_bytes = normalized_path.stat().st_size
        log.info(
            "normalized%s %d rows (%s) in %.1f s",
            " and sorted" if options.sort_key else "",
            normalized.rows,
            format_size(normalized_bytes),
            normalized.seconds,
        )
        chunk_size = fit_chunk_size(
            normalized_bytes,
            options.chunk_size,
            resources.max_map_length,
            grow=resources.grow_chunk_size,
            what=f"input {', '.join(s.location for s in sources[:3])}",
        )
        if chunk_size != options.chunk_size:
            log.warning(
                "chunk size raised from %s to %s to stay within max_map_length %d",
                format_size(options.chunk_size),
                format_size(chunk_size),
                resources.max_map_length,
            )
        try:
            chunks = _split_and_upload(
                s3,
                normalized_path,
                work_dir,
                prefix,
                chunk_size=chunk_size,
                options=options,
                columns=normalized.columns,
            )
        except NulByteError as exc:
            raise _nul_at_source(exc, [s.location for s in sources], s3) from exc
    output_columns = list(options.columns) if options.columns else None
    if output_columns is None and options.file_format.header:
        output_columns = normalized.columns or None
    chunks = [ChunkSpec.from_dict({**c.to_dict(), "columns": output_columns}) for c in chunks]
    manifest = Manifest(
        input_fingerprint=fingerprint,
        file_format=STAGED_FORMAT.to_dict(),
        columns=output_columns,
        chunks=chunks,
        sort_key=list(options.sort_key) or None,
        total_rows=sum(c.rows or 0 for c in chunks),
        total_bytes=sum(c.bytes for c in chunks),
        created_at=datetime.now(UTC).isoformat(),
        sort_key_types=list(options.sort_types) or None,
        total_raw_bytes=sum(c.raw_bytes or 0 for c in chunks),
        source_count=len(sources),
        source_bytes=input_bytes,
        sources=[s.location for s in sources],
        source_format=options.file_format.to_dict(),
    )
    if manifest.total_rows != normalized.rows:
        raise BulkLoadError(
            f"staging wrote {manifest.total_rows} rows in chunks but read {normalized.rows}; "
            "no manifest written"
        )
    _write_manifest(s3, manifest_uri, manifest)
    elapsed = time.monotonic() - started
    log.info(
        "staged %d rows in %d chunks (%s raw, %s stored) in %.1f s (%.1f MB/s of input); "
        "manifest %s",
        manifest.total_rows,
        len(chunks),
        format_size(manifest.total_raw_bytes),
        format_size(manifest.total_bytes),
        elapsed,
        input_bytes / 1e6 / elapsed if elapsed > 0 else 0.0,
        manifest_uri,
    )
    return StageResult(manifest, manifest_uri, prefix, skipped=False)


def _write_manifest(s3: Any, manifest_uri: str, manifest: Manifest) -> None:
    """Written last: its presence is what says staging (or planning) completed."""
    bucket, key = parse_s3_uri(manifest_uri)
    s3.put_object(
        Bucket=bucket,
        Key=key,
        Body=manifest.to_json().encode("utf-8"),
        ContentType="application/json",
    )


def _plan_direct(
    s3: Any,
    sources: Sequence[SourceFile],
    options: StagingOptions,
    prefix: str,
    fingerprint: str,
    input_bytes: int,
    resources: Resources,
) -> StageResult:
    """The direct path.

    Chunk specs that point at the input objects; only the manifest is written under ``prefix``.
    """
    started = time.monotonic()
    manifest_uri = prefix + MANIFEST_NAME
    chunks, columns = plan_direct(
        sources,
        s3,
        options.file_format,
        ledger_prefix=parse_s3_uri(prefix)[1],
        manifest_uri=manifest_uri,
        chunk_size=options.chunk_size,
        columns=options.columns,
        table_columns=options.table_columns,
        key_columns=options.probe_key,
        quoted_newlines=options.quoted_newlines,
    )
    if len(chunks) > resources.max_map_length:
        raise DirectRefusedError(
            f"{len(chunks)} objects or ranges are more chunks than Airflow maps in one task "
            f"(max_map_length {resources.max_map_length}); staging joins them into fewer"
        )
    manifest = Manifest(
        input_fingerprint=fingerprint,
        file_format=options.file_format.without_header().to_dict(),
        columns=columns,
        chunks=chunks,
        total_rows=0,  # not known before the load: the ledger counts what loaded
        total_bytes=sum(c.bytes for c in chunks),
        created_at=datetime.now(UTC).isoformat(),
        total_raw_bytes=sum(c.raw_bytes or 0 for c in chunks),
        source_count=len(sources),
        source_bytes=input_bytes,
        sources=[s.location for s in sources],
        source_format=options.file_format.to_dict(),
    )
    _write_manifest(s3, manifest_uri, manifest)
    log.info(
        "planned %d direct chunk(s) over %d object(s), %s, loaded as stored (nothing copied) "
        "in %.1f s; manifest %s",
        len(chunks),
        len(sources),
        format_size(input_bytes),
        time.monotonic() - started,
        manifest_uri,
    )
    return StageResult(manifest, manifest_uri, prefix, skipped=False)


def _nul_at_source(error: NulByteError, sources: Sequence[str], s3: Any) -> NulByteError:
    """The NUL byte's input file and line (the inputs are read again: an error path only)."""
    try:
        found = find_nul(sources, lambda source: open_source(source, s3))
    except Exception as exc:  # tracing is a courtesy: never hide the error itself
        log.warning("could not find the NUL byte in the input files: %s", exc)
        return error
    return NulByteError(f"{found.source}, line {found.line}") if found else error


def _split_and_upload(
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
            pending = uploader.submit(_upload, s3, chunk.path, uri, options.compression)
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
