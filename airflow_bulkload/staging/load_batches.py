"""Dealing a manifest's chunks to load tasks: a few tasks that each load several chunks.

Every Airflow task costs a launch (a scheduler pass, a process that parses the DAG file, its
hook's connection): with one task per chunk, eight small chunks on two sessions pay that eight
times in four rounds. Dealing the chunks into batches, one per load session, pays it once per
session, as a hand-written loader would. Each chunk in a batch is still its own transaction
with its own ledger entry, so a retried batch skips what it committed and loads the rest.

A batch is bounded, in bytes (``batch_bytes``, uncompressed, estimated) and in chunks
(:data:`MAX_CHUNKS_PER_BATCH`: each chunk costs its ledger claim and checks, so ten thousand tiny
objects are not two tasks of five thousand): a larger input makes more batches, never longer
ones, so no task's time grows with the whole input.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping, Sequence
from typing import Any

#: the default bound of one load task's batch (uncompressed, estimated): ``"2GB"``
DEFAULT_BATCH_BYTES = 2_000_000_000
#: at most this many chunks in one batch
MAX_CHUNKS_PER_BATCH = 32


def chunk_weight(chunk: Mapping[str, Any]) -> int:
    """A chunk's uncompressed size as the manifest gives it (estimated for a direct gzip object)."""
    raw = chunk.get("raw_bytes")
    return max(int(raw if raw is not None else chunk.get("bytes") or 0), 1)


def batch_count(total_bytes: int, chunks: int, *, sessions: int, batch_bytes: int) -> int:
    """How many load tasks ``chunks`` chunks of ``total_bytes`` make.

    One per session, and more when a session's share would pass ``batch_bytes`` or
    :data:`MAX_CHUNKS_PER_BATCH` chunks; never more than one per chunk.
    """
    if chunks <= 0:
        return 0
    if sessions < 1:
        raise ValueError(f"sessions must be 1 or more, got {sessions}")
    if batch_bytes < 1:
        raise ValueError(f"batch_bytes must be 1 or more, got {batch_bytes}")
    by_size = math.ceil(total_bytes / batch_bytes)
    by_count = math.ceil(chunks / MAX_CHUNKS_PER_BATCH)
    return min(chunks, max(sessions, by_size, by_count))


def deal_chunks(
    chunks: Sequence[Mapping[str, Any]], *, sessions: int, batch_bytes: int
) -> list[list[dict[str, Any]]]:
    """Deal ``chunks`` into batches of about equal bytes, each in the manifest's order.

    The largest chunk goes to the lightest batch first (so the batches finish together); within
    a batch the chunks keep the manifest's order, so key-sorted chunks load in key order.
    No batch holds more than :data:`MAX_CHUNKS_PER_BATCH` chunks, and while that bound does not
    bind, none holds more than ``batch_bytes`` plus one chunk.
    """
    weights = [chunk_weight(c) for c in chunks]
    count = batch_count(sum(weights), len(chunks), sessions=sessions, batch_bytes=batch_bytes)
    if not count:
        return []
    # (bytes so far, batch number): the lightest batch first, ties to the lower number
    loads = [(0, number) for number in range(count)]
    members: list[list[int]] = [[] for _ in range(count)]
    for position in sorted(range(len(chunks)), key=lambda p: (-weights[p], p)):
        taken, number = heapq.heappop(loads)
        members[number].append(position)
        if len(members[number]) < MAX_CHUNKS_PER_BATCH:  # a full batch takes no more
            heapq.heappush(loads, (taken + weights[position], number))
    return [[dict(chunks[p]) for p in sorted(batch)] for batch in members if batch]
