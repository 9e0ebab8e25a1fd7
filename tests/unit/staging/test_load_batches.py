"""Dealing chunks to load tasks: one batch per session, bounded, each chunk exactly once."""

from __future__ import annotations

import random
from typing import Any

import pytest

from airflow_bulkload.staging.load_batches import (
    MAX_CHUNKS_PER_BATCH,
    batch_count,
    chunk_weight,
    deal_chunks,
)

MB = 1024**2


def _chunk(index: int, raw: int | None, stored: int = 0) -> dict[str, Any]:
    return {
        "uri": f"s3://b/k{index}",
        "checksum": "x",
        "index": index,
        "raw_bytes": raw,
        "bytes": stored,
    }


def test_one_batch_per_session_while_the_share_fits() -> None:
    batches = deal_chunks([_chunk(i, 40 * MB) for i in range(8)], sessions=2, batch_bytes=2048 * MB)
    assert [[c["index"] for c in b] for b in batches] == [[0, 2, 4, 6], [1, 3, 5, 7]]


def test_more_batches_when_a_share_would_pass_the_bound() -> None:
    chunks = [_chunk(i, 256 * MB) for i in range(40)]  # 10 GB
    batches = deal_chunks(chunks, sessions=2, batch_bytes=2048 * MB)
    assert len(batches) == 5
    assert max(sum(chunk_weight(c) for c in b) for b in batches) <= 2048 * MB


def test_never_more_batches_than_chunks_and_none_for_no_chunks() -> None:
    assert len(deal_chunks([_chunk(0, 10)], sessions=4, batch_bytes=1)) == 1
    assert deal_chunks([], sessions=2, batch_bytes=1) == []
    assert batch_count(0, 0, sessions=2, batch_bytes=1) == 0


def test_batches_keep_the_manifest_order_for_key_sorted_chunks() -> None:
    rng = random.Random(7)
    chunks = [_chunk(i, rng.randrange(1, 300) * MB) for i in range(50)]
    for batch in deal_chunks(chunks, sessions=3, batch_bytes=1024 * MB):
        indexes = [c["index"] for c in batch]
        assert indexes == sorted(indexes)


def test_every_chunk_lands_in_exactly_one_batch_and_no_batch_passes_bound_plus_one_chunk() -> None:
    rng = random.Random(11)
    for _ in range(200):
        chunks = [_chunk(i, rng.randrange(1, 500) * MB) for i in range(rng.randrange(1, 60))]
        bound = rng.randrange(50, 3000) * MB
        batches = deal_chunks(chunks, sessions=rng.randrange(1, 6), batch_bytes=bound)
        dealt = sorted(c["index"] for b in batches for c in b)
        assert dealt == list(range(len(chunks)))
        largest = max(chunk_weight(c) for c in chunks)
        assert all(sum(chunk_weight(c) for c in b) <= bound + largest for b in batches)


def test_weight_is_raw_bytes_else_stored_bytes_and_never_zero() -> None:
    assert chunk_weight(_chunk(0, 5, stored=2)) == 5
    assert chunk_weight(_chunk(0, None, stored=2)) == 2
    assert chunk_weight(_chunk(0, None)) == 1


@pytest.mark.parametrize(("sessions", "batch_bytes"), [(0, 1), (1, 0)])
def test_nonsense_bounds_are_refused(sessions: int, batch_bytes: int) -> None:
    with pytest.raises(ValueError):
        batch_count(10, 3, sessions=sessions, batch_bytes=batch_bytes)


def test_many_tiny_chunks_make_batches_of_a_bounded_count() -> None:
    """Each chunk costs its ledger claim and checks: ten thousand tiny objects are not two tasks."""
    chunks = [_chunk(i, 10_000) for i in range(10_000)]
    batches = deal_chunks(chunks, sessions=2, batch_bytes=2048 * MB)
    assert len(batches) == -(-10_000 // MAX_CHUNKS_PER_BATCH)
    assert max(len(b) for b in batches) <= MAX_CHUNKS_PER_BATCH
    assert sorted(c["index"] for b in batches for c in b) == list(range(10_000))
    # mixed sizes: the count bound holds even where bytes would put more tiny chunks together
    rng = random.Random(3)
    mixed = [_chunk(i, rng.choice([1, 1, 1, 500 * MB])) for i in range(300)]
    batches = deal_chunks(mixed, sessions=2, batch_bytes=4096 * MB)
    assert max(len(b) for b in batches) <= MAX_CHUNKS_PER_BATCH
    assert sorted(c["index"] for b in batches for c in b) == list(range(300))
