"""Hostile checks of balanced staging groups (plan_groups cut evenly, group fingerprints naming
their files), against moto's S3 and the local PostgreSQL/MariaDB.

The upgrade case: a date staged and loaded in groups under the previous release (greedy cut,
``<fingerprint>/group-NNNNN`` group fingerprints) is staged again under this one, which cuts
the same input differently under the same input prefix and the same chunk keys.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from airflow_bulkload.hooks import BulkLoadHook
from airflow_bulkload.staging import stager
from airflow_bulkload.staging.planning import (
    SourceFile,
    StagingGroup,
    _cut_in_order,
    estimate_raw_bytes,
    plan_groups,
)
from airflow_bulkload.staging.stager import delete_prefix
from tests.harness import MotoServer, TestDatabase
from tests.integration.test_hostile_mapped import (
    Staged,
    create_notes,
    notes,
    put,
    stage_grouped,
    stage_groups,
)

#: eight parts of equal size (4-digit ids): 1508 bytes each
PARTS = 8
PART_BYTES = len(notes(1000, 1099))
#: the previous release cut seven parts and one; this one cuts four and four
GROUP_BYTES = 7 * PART_BYTES


def _put_parts(s3: Any, bucket: str) -> None:
    for part in range(PARTS):
        first = 1000 + 100 * part
        put(s3, bucket, f"in/part-{part}.csv", notes(first, first + 99))


def _previous_release(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan and fingerprint groups as the release before 8d098bd did."""

    def greedy(sources: list[SourceFile], group_bytes: int) -> list[list[SourceFile]]:
        sizes = [estimate_raw_bytes([s]) for s in sources]
        return [[sources[i] for i in g] for g in _cut_in_order(sizes, group_bytes)]

    monkeypatch.setattr(stager, "plan_groups", greedy)
    monkeypatch.setattr(
        stager, "grouping_options", lambda group_bytes: {"group_bytes": group_bytes}
    )
    monkeypatch.setattr(
        StagingGroup,
        "group_fingerprint",
        property(lambda self: f"{self.fingerprint}/group-{self.index:05d}"),
    )


def _load_every_chunk(hook: BulkLoadHook, staged: Staged) -> list[Exception]:
    """As Airflow runs the mapped loads: every chunk's task runs, whatever the others did."""
    hook.reconcile("notes", staged.manifest_uri, load_id="test/run")
    failed: list[Exception] = []
    for chunk in staged.manifest.chunks:
        try:
            hook.load_chunk("notes", chunk, load_id="test/run")
        except Exception as exc:  # a red mapped task; the others still run
            failed.append(exc)
    return failed


def test_plan_groups_fuzz_against_the_greedy_cut_and_the_optimum() -> None:
    """Every file once and in order, as many groups as the greedy cut, none above the bound
    unless alone, the largest as small as any in-order cut into that many groups allows."""
    rng = random.Random(11)

    def optimum(sizes: list[int], count: int, bound: int) -> int:
        best: dict[tuple[int, int], float] = {}

        def f(i: int, k: int) -> float:
            if i == len(sizes):
                return 0
            if k == 0:
                return float("inf")
            if (i, k) not in best:
                value, total = float("inf"), 0
                for j in range(i, len(sizes)):
                    total += sizes[j]
                    if total > bound and j > i:
                        break
                    value = min(value, max(total, f(j + 1, k - 1)))
                best[i, k] = value
            return best[i, k]

        return int(f(0, count))

    for _ in range(1500):
        sizes = [
            rng.choice([0, 0, 1, rng.randint(0, 60), rng.randint(50, 200)])
            for _ in range(rng.randint(0, 12))
        ]
        bound = rng.randint(1, 150)
        gz = rng.random() < 0.2
        files = [
            SourceFile(f"s3://b/{n}.csv{'.gz' if gz else ''}", s, "e") for n, s in enumerate(sizes)
        ]
        raw = [estimate_raw_bytes([f]) for f in files]
        greedy = _cut_in_order(raw, bound)
        groups = plan_groups(files, bound)
        assert [f for g in groups for f in g] == files
        assert all(groups) and len(groups) == len(greedy)
        sums = [estimate_raw_bytes(g) for g in groups]
        assert all(s <= bound or len(g) == 1 for s, g in zip(sums, groups, strict=True))
        if groups:
            assert max(sums) == optimum(raw, len(greedy), bound)
            assert max(sums) <= max(sum(raw[i] for i in g) for g in greedy)
    # 20 000 listed files plan in well under a second or two
    files = [SourceFile(f"s3://b/{n}.csv.gz", rng.randint(0, 10**8), "e") for n in range(20_000)]
    assert len(plan_groups(files, 4 * 10**9)) == len(
        _cut_in_order([estimate_raw_bytes([f]) for f in files], 4 * 10**9)
    )


def test_groups_staged_by_the_previous_release_are_staged_again_and_load_exactly_once(
    pg_db: TestDatabase, moto_server: MotoServer, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The previous release staged every group (seven parts and one) but the run died before
    collecting; after the upgrade the run is cleared: the new cut (four and four) must restage
    both groups, list no chunk twice and load every row once."""
    create_notes(pg_db, key=False)
    s3 = moto_server.client("s3")
    _put_parts(s3, s3_bucket)
    source = f"s3://{s3_bucket}/in/"
    with monkeypatch.context() as old:
        _previous_release(old)
        before = stage_groups(s3, s3_bucket, source, group_bytes=GROUP_BYTES, probe_key=[])
        assert [len(g.sources) for g in before.groups] == [7, 1]

    staged = stage_grouped(s3, s3_bucket, source, group_bytes=GROUP_BYTES, probe_key=[])
    assert staged.groups == 2
    keys = [c.key for c in staged.manifest.chunks]
    assert len(keys) == len(set(keys))
    assert staged.manifest.total_rows == PARTS * 100
    assert _load_every_chunk(BulkLoadHook(conn_id=pg_db.conn_id), staged) == []
    assert pg_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(800, 800)]


@pytest.mark.parametrize("upgraded", [False, True], ids=["same-release", "upgraded"])
def test_a_loaded_date_staged_again_after_the_upgrade_never_loads_a_row_twice(
    pg_db: TestDatabase,
    moto_server: MotoServer,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    upgraded: bool,
) -> None:
    """What the user did: a date's input (eight parts) was staged in groups and loaded by the
    previous release, the load verified. The staging bucket's lifecycle rule then expired the
    staged objects (the docs: keep them "until a run's load is final"; it was). After upgrading,
    the user cleared the date's run (a backfill "to be sure"). Under the previous release that
    restages the same chunks under the same keys, and every load skips.

    What happened (found in review, before the cut became part of the fingerprint): the input
    fingerprint, hence the staging prefix, was unchanged, and so were the chunk keys
    (``group-NNNNN-chunk-MMMMM``), but the new cut (four and four, not seven and one) put other
    rows under them. Keys the old load used got chunks with other checksums
    (ChunkConflictError), and keys it never used (group 1 had more chunks) loaded rows of parts
    4-6 that were already in the table: a keyless table held them twice.

    What should happen: the rerun loads no row twice (it skips, or it refuses before loading).
    ``same-release`` is the control: the previous release staging again passes.
    """
    create_notes(pg_db, key=False)
    s3 = moto_server.client("s3")
    hook = BulkLoadHook(conn_id=pg_db.conn_id)
    _put_parts(s3, s3_bucket)
    source = f"s3://{s3_bucket}/in/"
    with monkeypatch.context() as old:
        _previous_release(old)
        first = stage_grouped(s3, s3_bucket, source, group_bytes=GROUP_BYTES, probe_key=[])
        assert first.groups == 2
        assert _load_every_chunk(hook, first) == []
        hook.verify_load("notes", first.manifest_uri, load_id="test/run")
    assert pg_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(800, 800)]

    delete_prefix(s3, first.manifest_uri.rsplit("/", 1)[0] + "/")  # the lifecycle rule

    if not upgraded:
        _previous_release(monkeypatch)
    second = stage_grouped(s3, s3_bucket, source, group_bytes=GROUP_BYTES, probe_key=[])
    # the new cut stages under a prefix of its own (the cut is part of the fingerprint)
    assert (second.manifest_uri == first.manifest_uri) is not upgraded
    try:
        failed = _load_every_chunk(hook, second)
    except Exception:  # refused before any chunk loaded: acceptable
        failed = []
    assert pg_db.query("SELECT count(*), count(DISTINCT id) FROM notes") == [(800, 800)], failed
