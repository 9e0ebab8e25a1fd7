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
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from airflow_bulkload.exceptions import BulkLoadError, NulByteError
from airflow_bulkload.s3io import parse_s3_uri
from airflow_bulkload.staging.chunk_upload import split_and_upload
from airflow_bulkload.staging.direct import DirectRefusedError
from airflow_bulkload.staging.direct_planning import plan_direct
from airflow_bulkload.staging.manifest import (
    ChunkSpec,
    Manifest,
    first_out_of_order,
    read_manifest,
    write_manifest,
)
from airflow_bulkload.staging.normalize import normalize
from airflow_bulkload.staging.options import Resources, StagingOptions
from airflow_bulkload.staging.origin import find_nul
from airflow_bulkload.staging.planning import (
    MANIFEST_NAME,
    STAGED_FORMAT,
    SourceFile,
    StagingGroup,
    chunk_count,
    direct_refusal,
    estimate_raw_bytes,
    even_chunk_size,
    fit_chunk_size,
    format_size,
    group_prefix,
    grouping_options,
    input_fingerprint,
    plan_groups,
    staging_prefix,
    temp_space_needed,
)
from airflow_bulkload.staging.sources import (
    holds_text,
    materialize,
    open_source,
    resolve_sources,
)
from airflow_bulkload.staging.workdir import staging_workdir

log = logging.getLogger(__name__)


class InsufficientTempSpaceError(BulkLoadError):
    """The temp directory has less free space than a staging run needs."""


@dataclass(frozen=True)
class StageResult:
    """A staged input's manifest, or the groups still to stage (``manifest`` is then ``None``)."""

    manifest: Manifest | None
    manifest_uri: str
    prefix: str
    skipped: bool
    groups: list[StagingGroup] = field(default_factory=list)

    @property
    def chunks(self) -> list[ChunkSpec]:
        return self.manifest.chunks if self.manifest else []


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
    group_bytes: int | None = None,
) -> StageResult:
    """Stage ``source`` under a deterministic prefix and return its manifest.

    With ``group_bytes``, an input that needs staging and is larger than that (uncompressed,
    estimated) is not staged here: the result lists its groups, for
    :func:`~airflow_bulkload.staging.groups.stage_group` to stage each (one task each) and
    :func:`~airflow_bulkload.staging.groups.collect_groups` to write the manifest.

    A complete manifest for the same input fingerprint means the work is done: nothing is read
    and it is returned as is. Local files go to a working directory of this attempt (see
    :mod:`~airflow_bulkload.staging.workdir`; ``work_owner`` names the task instance in it),
    removed at the end, or by a later staging call on the worker if this one is killed. Anything else under the prefix (chunks of an interrupted attempt,
    a manifest that does not match) is deleted before staging, so chunks are never mixed.
    """
    resources = resources or Resources()
    sources = resolve_sources(source, s3)
    if options.direct:
        refusal = direct_refusal(
            sources, options.file_format, sort_key=options.sort_key, max_errors=options.max_errors
        )
        if refusal:
            log.info("the input is staged, not loaded as stored: %s", refusal)
            options = replace(options, direct=False)
    groups = plan_groups(sources, group_bytes) if group_bytes and not options.direct else []
    if len(groups) > 1:
        if len(groups) >= resources.max_map_length:
            raise ValueError(
                f"{len(groups)} staging groups of {format_size(group_bytes or 0)}: Airflow maps at "
                f"most {resources.max_map_length} tasks (core.max_map_length), and every group "
                "ends in a chunk of its own; raise stage_group_size"
            )
        # the chunk size fits Airflow's map length over the whole input, one partial chunk
        # per group included
        options = replace(
            options,
            chunk_size=fit_chunk_size(
                estimate_raw_bytes(sources),
                options.chunk_size,
                resources.max_map_length - len(groups),
                grow=resources.grow_chunk_size,
                what=f"input {', '.join(s.location for s in sources[:3])}",
            ),
        )
    grouping = grouping_options(group_bytes) if len(groups) > 1 else {}
    fingerprint = input_fingerprint(sources, options.fingerprint_options() | grouping)
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
    if len(groups) > 1:
        # each group's task clears its own prefix; nothing else lives under this one
        log.info(
            "staging %d file(s) in %d groups of at most %s each, one task per group, under %s",
            len(sources),
            len(groups),
            format_size(group_bytes or 0),
            prefix,
        )
        planned = [
            StagingGroup(
                index=n,
                sources=list(members),
                prefix=group_prefix(prefix, n),
                manifest_uri=manifest_uri,
                fingerprint=fingerprint,
                options=options.to_dict(),
            )
            for n, members in enumerate(groups)
        ]
        return StageResult(None, manifest_uri, prefix, skipped=False, groups=planned)
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
                group_bytes=group_bytes,
            )
    manifest = stage_files(
        sources,
        s3=s3,
        prefix=prefix,
        manifest_uri=manifest_uri,
        fingerprint=fingerprint,
        options=options,
        resources=resources,
        work_owner=work_owner or f"{dag_id}/{table}/{run}",
    )
    return StageResult(manifest, manifest_uri, prefix, skipped=False)


def stage_files(
    sources: Sequence[SourceFile],
    *,
    s3: Any,
    prefix: str,
    manifest_uri: str,
    fingerprint: str,
    options: StagingOptions,
    resources: Resources,
    work_owner: str,
) -> Manifest:
    """Normalize (+ sort) ``sources``, split them into chunks under ``prefix``, write the manifest.

    The caller has made sure nothing else is under ``prefix``; the manifest goes last.
    """
    input_bytes = sum(s.size for s in sources)
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
    with staging_workdir(temp_root, work_owner) as work_dir:
        local = materialize(sources, work_dir / "input", s3, log)
        names = {str(p): s.location for p, s in zip(local, sources, strict=True)}
        normalized_path = work_dir / "normalized.csv"
        spill = work_dir / "duckdb-spill"
        spill.mkdir()
        normalized = normalize(
            [path for path in local if holds_text(path)],  # an empty part adds no rows
            normalized_path,
            options.file_format,
            # no header, no columns= and records set aside: the table's columns set the width
            columns=options.columns
            or (
                options.table_columns
                if options.max_errors and not options.file_format.header
                else None
            ),
            sort_key=options.sort_key,
            sort_types=options.sort_types,
            keep_order=bool(options.presorted_key),
            memory_limit=resources.memory_limit,
            threads=resources.threads,
            temp_dir=spill,
            path_names=names,
            table_types=options.table_types,
            max_errors=options.max_errors,
            rejects_path=work_dir / "rejects.csv",
        )
        rejects = []
        if normalized.rejected:
            rejects = [_upload_rejects(s3, work_dir / "rejects.csv", prefix, options)]
            log.warning(
                "%d records do not read as the input's format and were set aside (max_errors "
                "%d): %s",
                normalized.rejected,
                options.max_errors,
                rejects[0],
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
        fitted = fit_chunk_size(
            normalized_bytes,
            options.chunk_size,
            resources.max_map_length,
            grow=resources.grow_chunk_size,
            what=f"input {', '.join(s.location for s in sources[:3])}",
        )
        if fitted != options.chunk_size:
            log.warning(
                "chunk size raised from %s to %s to stay within max_map_length %d",
                format_size(options.chunk_size),
                format_size(fitted),
                resources.max_map_length,
            )
        chunk_size = even_chunk_size(normalized_bytes, fitted)
        if chunk_size != fitted:
            log.info(
                "%d chunks of about %s each (chunk size %s), so no load session waits on one "
                "long last chunk",
                chunk_count(normalized_bytes, fitted),
                format_size(chunk_size),
                format_size(fitted),
            )
        try:
            chunks = split_and_upload(
                s3,
                normalized_path,
                work_dir,
                prefix,
                chunk_size=chunk_size,
                options=options,
                columns=normalized.columns,
            )
        except NulByteError as exc:
            if options.file_format.self_describing:  # no lines to name in Parquet / JSON Lines
                raise
            raise _nul_at_source(exc, [s.location for s in sources], s3) from exc
    output_columns = list(options.columns) if options.columns else None
    if output_columns is None and (
        options.file_format.header or options.file_format.self_describing
    ):
        output_columns = normalized.columns or None
    chunks = [ChunkSpec.from_dict({**c.to_dict(), "columns": output_columns}) for c in chunks]
    manifest = replace(
        staged_manifest(fingerprint, output_columns, chunks, options, sources),
        rejected_rows=normalized.rejected,
        rejects=rejects,
    )
    if manifest.total_rows != normalized.rows:
        raise BulkLoadError(
            f"staging wrote {manifest.total_rows} rows in chunks but read {normalized.rows}; "
            "no manifest written"
        )
    write_manifest(s3, manifest_uri, manifest, options.upload_args)
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
    return manifest


def _upload_rejects(s3: Any, path: Path, prefix: str, options: StagingOptions) -> str:
    """Put the rejects file beside the chunks (``<prefix>rejects.csv``) or in ``reject_uri``.

    In ``reject_uri`` it is named by its staging key (dots for slashes), unique per input.
    """
    name = prefix + "rejects.csv"
    # in a shared folder, named by the whole staging key: runs, tables and groups never collide
    uri = (
        options.reject_uri + parse_s3_uri(name)[1].replace("/", ".") if options.reject_uri else name
    )
    bucket, key = parse_s3_uri(uri)
    extra = {**options.upload_args, "ContentType": "text/csv; charset=utf-8"}
    s3.upload_file(str(path), bucket, key, ExtraArgs=extra)
    return uri


def staged_manifest(
    fingerprint: str,
    columns: list[str] | None,
    chunks: list[ChunkSpec],
    options: StagingOptions,
    sources: Sequence[SourceFile],
) -> Manifest:
    """The manifest of staged ``chunks`` made from ``sources``, totals summed over the chunks."""
    if options.presorted_key and chunks and chunks[0].key_columns == options.presorted_key:
        broken = first_out_of_order(chunks)
        if broken is not None:
            log.warning(
                "the input is declared in the order of %s, but chunk %d's keys run back: it loads "
                "as unsorted input does (slower on MySQL, the same rows); sort it, or drop "
                "'presorted' to let staging sort it",
                options.presorted_key,
                broken,
            )
    return Manifest(
        input_fingerprint=fingerprint,
        file_format=STAGED_FORMAT.to_dict(),
        columns=columns,
        chunks=chunks,
        sort_key=options.ordered_by,
        total_rows=sum(c.rows or 0 for c in chunks),
        total_bytes=sum(c.bytes for c in chunks),
        created_at=datetime.now(UTC).isoformat(),
        sort_key_types=list(options.sort_types) or None,
        total_raw_bytes=sum(c.raw_bytes or 0 for c in chunks),
        source_count=len(sources),
        source_bytes=sum(s.size for s in sources),
        sources=[s.location for s in sources],
        source_format=options.file_format.to_dict(),
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
        sources, s3, options, ledger_prefix=parse_s3_uri(prefix)[1], manifest_uri=manifest_uri
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
        sort_key=options.ordered_by,
        total_rows=0,  # not known before the load: the ledger counts what loaded
        total_bytes=sum(c.bytes for c in chunks),
        created_at=datetime.now(UTC).isoformat(),
        total_raw_bytes=sum(c.raw_bytes or 0 for c in chunks),
        source_count=len(sources),
        source_bytes=input_bytes,
        sources=[s.location for s in sources],
        source_format=options.file_format.to_dict(),
    )
    write_manifest(s3, manifest_uri, manifest, options.upload_args)
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
