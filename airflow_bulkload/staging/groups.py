"""Staging across workers: one task per group of input files, then one manifest for them all.

:func:`~airflow_bulkload.staging.stager.stage` with ``group_bytes`` plans the groups (it stages
an input that fits one group itself). Each group is staged by :func:`stage_group` (a mapped task:
its temp disk and memory follow its group, never the whole input) under a key prefix of its
own (``group-NNNNN-``), with its own manifest written last; :func:`collect_groups` then writes
the input's manifest from theirs. Every step is idempotent: a group whose manifest is there is not staged
again, one without is cleared and staged from scratch, and the input's manifest is only written
once every group's is complete, so no chunk is listed twice and none is left out.

With a sort key, each group is sorted on its own: the chunks of one group are in key order, the
groups' key ranges may overlap.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.manifest import Manifest, read_manifest, write_manifest
from airflow_bulkload.staging.planning import MANIFEST_NAME, StagingGroup
from airflow_bulkload.staging.stager import (
    Resources,
    StagingOptions,
    delete_prefix,
    stage_files,
    staged_manifest,
)

log = logging.getLogger(__name__)


def stage_group(
    group: StagingGroup | dict[str, Any],
    *,
    s3: Any,
    resources: Resources | None = None,
    work_owner: str | None = None,
) -> Manifest:
    """Stage one group's files under its prefix (a no-op when its manifest is already there)."""
    group = StagingGroup.from_dict(group)
    manifest_uri = group.prefix + MANIFEST_NAME
    existing = read_manifest(s3, manifest_uri)
    if existing is not None and existing.input_fingerprint == group.group_fingerprint:
        log.info(
            "group %d is already staged (%d chunks, %d rows); nothing to do",
            group.index,
            len(existing.chunks),
            existing.total_rows,
        )
        return existing
    stale = delete_prefix(s3, group.prefix)
    if stale:
        log.info("deleted %d objects of an interrupted attempt under %s", stale, group.prefix)
    log.info("staging group %d: %d file(s)", group.index, len(group.sources))
    return stage_files(
        group.sources,
        s3=s3,
        prefix=group.prefix,
        manifest_uri=manifest_uri,
        fingerprint=group.group_fingerprint,
        options=StagingOptions.from_dict(group.options),
        resources=resources or Resources(),
        work_owner=work_owner or group.prefix,
    )


def collect_groups(
    groups: Sequence[StagingGroup | dict[str, Any]], *, s3: Any, max_map_length: int | None = None
) -> Manifest:
    """Write the input's manifest from its groups' manifests and return it (idempotent).

    Fails naming the group when one is not staged (yet), when the groups' files name other
    columns (a header that changed between files), or when the chunks are more than
    ``max_map_length`` (the load tasks could not be mapped).
    """
    planned = [StagingGroup.from_dict(g) for g in groups]
    if not planned:
        raise ValueError("no groups to collect")
    manifest_uri = planned[0].manifest_uri
    fingerprint = planned[0].fingerprint
    existing = read_manifest(s3, manifest_uri)
    if existing is not None and existing.input_fingerprint == fingerprint:
        return existing
    parts: list[Manifest] = []
    for group in sorted(planned, key=lambda g: g.index):
        part = read_manifest(s3, group.prefix + MANIFEST_NAME)
        if part is None or part.input_fingerprint != group.group_fingerprint:
            raise BulkLoadError(
                f"group {group.index} ({group.prefix}) is not staged: its manifest is missing or "
                "from another input; run its staging task again"
            )
        parts.append(part)
    # a group of empty files names no columns; files may order the same columns differently
    # (each chunk carries its own order, as in one staging task), but not name others
    named = [(g, p) for g, p in zip(planned, parts, strict=True) if p.chunks and p.columns]
    columns = named[0][1].columns if named else parts[0].columns
    for group, part in named:
        if sorted(part.columns or []) != sorted(columns or []):
            raise BulkLoadError(
                f"the input's files do not name the same columns: {group.sources[0].location} "
                f"(group {group.index}) has {part.columns}, {named[0][0].sources[0].location} "
                f"has {columns}"
            )
    options = StagingOptions.from_dict(planned[0].options)
    count = sum(len(part.chunks) for part in parts)
    if max_map_length is not None and count > max_map_length:
        raise BulkLoadError(
            f"the {len(parts)} groups made {count} chunks, more than Airflow maps in one task "
            f"(core.max_map_length = {max_map_length}); raise chunk_size or stage_group_size, "
            "or core.max_map_length, and clear the stage task"
        )
    # numbered across the input
    chunks = [
        replace(chunk, index=n) for n, chunk in enumerate(c for part in parts for c in part.chunks)
    ]
    sources = [source for group in planned for source in group.sources]
    rejected = sum(part.rejected_rows for part in parts)
    if rejected > options.max_errors:
        raise BulkLoadError(
            f"the groups set aside {rejected} records that do not read as the input's format, "
            f"more than max_errors ({options.max_errors}) for the whole input; nothing is "
            f"loaded. They are listed in {', '.join(r for part in parts for r in part.rejects)}"
        )
    manifest = replace(
        staged_manifest(fingerprint, columns, chunks, options, sources),
        rejected_rows=rejected,
        rejects=[uri for part in parts for uri in part.rejects],
    )
    write_manifest(s3, manifest_uri, manifest, options.upload_args)
    log.info(
        "collected %d groups: %d rows in %d chunks; manifest %s",
        len(parts),
        manifest.total_rows,
        len(chunks),
        manifest_uri,
    )
    return manifest


def collected_manifest(
    groups: Sequence[StagingGroup | dict[str, Any]] | None,
    manifest_uri: str,
    *,
    s3: Any,
    max_map_length: int | None = None,
) -> Manifest:
    """The input's manifest at ``manifest_uri``, written from ``groups`` first where there are any.

    With groups it is :func:`collect_groups`; without, the manifest the plan task wrote is read.
    ``groups`` must be the plan task's list of groups (``StagingGroup`` dicts): a template that
    rendered as text, or groups that write another manifest than ``manifest_uri``, are refused
    (``ValueError``) before anything is read or written.
    """
    if not groups:
        return read_manifest(s3, manifest_uri, required=True)
    if isinstance(groups, str) or not all(isinstance(g, StagingGroup | dict) for g in groups):
        raise ValueError(
            "the staging groups must be the plan task's list of group dicts (its output, or a "
            f"template rendered as a native object), got {type(groups).__name__}"
        )
    collects_to = StagingGroup.from_dict(groups[0]).manifest_uri
    if collects_to != manifest_uri:
        raise ValueError(
            f"the staging groups make the manifest {collects_to}, not the one given "
            f"({manifest_uri})"
        )
    return collect_groups(groups, s3=s3, max_map_length=max_map_length)
