"""Staging in groups, one task each (staging/groups.py), against moto's S3 and a real small disk.

Inputs are gzip CSV objects in S3 as users keep them; the temp-space test gives the staging
tasks a real tmpfs smaller than the whole input (mounted for the test), so the input can only
be staged in groups.
"""

from __future__ import annotations

import gzip
import io
import random
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.groups import collect_groups, stage_group
from airflow_bulkload.staging.manifest import FileFormat, read_manifest
from airflow_bulkload.staging.planning import StagingGroup, plan_groups
from airflow_bulkload.staging.stager import Resources, StageResult, StagingOptions, stage
from tests.harness import MotoServer
from tests.staged_csv import Row, parse_staged

HEADER = "id,name,amount"


@pytest.fixture
def s3(moto_server: MotoServer) -> Any:
    return moto_server.client("s3")


def _put_parts(s3: Any, bucket: str, parts: int, rows_per_part: int, seed: int = 7) -> list[Row]:
    """``parts`` gzip objects with a header and shuffled ids; returns every row written."""
    rng = random.Random(seed)
    ids = list(range(parts * rows_per_part))
    rng.shuffle(ids)
    written: list[Row] = []
    for part in range(parts):
        lines = [HEADER]
        for n in ids[part * rows_per_part : (part + 1) * rows_per_part]:
            row = (str(n), f"name {n}, with comma" if n % 7 == 0 else f"n{n}", f"{n * 1.5}")
            written.append(row)
            quoted = f'"{row[1]}"' if "," in row[1] else row[1]
            lines.append(f"{row[0]},{quoted},{row[2]}")
        body = gzip.compress(("\n".join(lines) + "\n").encode())
        s3.put_object(Bucket=bucket, Key=f"in/part-{part:03d}.csv.gz", Body=body)
    return written


def _plan(s3: Any, bucket: str, group_bytes: int, **kwargs: Any) -> StageResult:
    resources = kwargs.pop("resources", Resources())
    return stage(
        f"s3://{bucket}/in/",
        s3=s3,
        staging_uri=f"s3://{bucket}/staging",
        dag_id="dag",
        table="public.t",
        run="2026-01-01",
        options=StagingOptions(file_format=FileFormat(header=True), **kwargs),
        resources=resources,
        group_bytes=group_bytes,
    )


def _rows(s3: Any, chunks: list[Any]) -> list[Row]:
    rows: list[Row] = []
    for chunk in chunks:
        bucket, key = chunk.bucket, chunk.object_key
        raw = gzip.decompress(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        rows.extend(parse_staged(raw.decode()))
    return rows


def _keys(s3: Any, bucket: str, prefix: str) -> list[str]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for page in pages for o in page.get("Contents", [])]


def test_plan_groups_keeps_listing_order_and_puts_a_large_file_alone() -> None:
    from airflow_bulkload.staging.planning import SourceFile

    files = [SourceFile(f"s3://b/{n}.csv", size, "e") for n, size in enumerate([4, 4, 9, 1, 1])]
    groups = plan_groups(files, 8)
    assert [[f.location for f in g] for g in groups] == [
        ["s3://b/0.csv", "s3://b/1.csv"],
        ["s3://b/2.csv"],
        ["s3://b/3.csv", "s3://b/4.csv"],
    ]
    with pytest.raises(ValueError, match="positive"):
        plan_groups(files, 0)


def test_groups_stage_apart_and_collect_into_one_exact_manifest(s3: Any, s3_bucket: str) -> None:
    written = _put_parts(s3, s3_bucket, parts=5, rows_per_part=2000)
    plan = _plan(
        s3, s3_bucket, group_bytes=1, chunk_size=20_000, sort_key=["id"], sort_types=["BIGINT"]
    )

    assert plan.manifest is None and len(plan.groups) == 5
    assert read_manifest(s3, plan.manifest_uri) is None  # not before every group is staged
    for group in plan.groups:
        staged = stage_group(group.to_dict(), s3=s3)
        assert staged.total_rows == 2000
        # each group sorted on its own
        ids = [int(r[0]) for r in _rows(s3, staged.chunks)]
        assert ids == sorted(ids)
    manifest = collect_groups([g.to_dict() for g in plan.groups], s3=s3)

    assert Counter(_rows(s3, manifest.chunks)) == Counter(written)
    assert manifest.total_rows == len(written)
    assert [c.index for c in manifest.chunks] == list(range(len(manifest.chunks)))
    assert len({c.uri for c in manifest.chunks}) == len(manifest.chunks)
    assert manifest.columns == HEADER.split(",")
    assert manifest.source_count == 5
    # grouped chunks sit beside the input's manifest, named by their group
    for chunk in manifest.chunks:
        assert chunk.manifest_location == plan.manifest_uri
        assert chunk.uri.rsplit("/", 1)[1].startswith("group-")
    assert read_manifest(s3, plan.manifest_uri, required=True) == manifest
    # a re-run finds the manifest and stages nothing
    again = _plan(
        s3, s3_bucket, group_bytes=1, chunk_size=20_000, sort_key=["id"], sort_types=["BIGINT"]
    )
    assert again.skipped and again.manifest == manifest and not again.groups


def test_a_group_killed_half_way_is_staged_again_and_no_chunk_is_listed_twice(
    s3: Any, s3_bucket: str
) -> None:
    written = _put_parts(s3, s3_bucket, parts=3, rows_per_part=1500)
    plan = _plan(s3, s3_bucket, group_bytes=1, chunk_size=10_000)
    for group in plan.groups:
        stage_group(group, s3=s3)
    # an attempt killed after uploading some chunks: its manifest gone, a stray chunk left
    victim = plan.groups[1]
    victim_keys = _keys(s3, s3_bucket, victim.prefix.split("/", 3)[3])
    manifest_key = next(k for k in victim_keys if k.endswith("manifest.json"))
    s3.delete_object(Bucket=s3_bucket, Key=manifest_key)
    s3.put_object(
        Bucket=s3_bucket,
        Key=manifest_key.replace("manifest.json", "chunk-09999.csv.gz"),
        Body=b"junk",
    )
    with pytest.raises(BulkLoadError, match=r"group 1 .* is not staged"):
        collect_groups(plan.groups, s3=s3)

    stage_group(victim, s3=s3)  # the retry
    manifest = collect_groups(plan.groups, s3=s3)

    assert Counter(_rows(s3, manifest.chunks)) == Counter(written)
    assert not any("chunk-09999" in k for k in _keys(s3, s3_bucket, "staging/"))
    # collecting again, or staging a done group again, changes nothing
    before = _keys(s3, s3_bucket, "staging/")
    assert collect_groups(plan.groups, s3=s3) == manifest
    stage_group(plan.groups[0], s3=s3)
    assert _keys(s3, s3_bucket, "staging/") == before


def test_files_whose_headers_differ_are_refused_naming_them(s3: Any, s3_bucket: str) -> None:
    _put_parts(s3, s3_bucket, parts=2, rows_per_part=10)
    body = gzip.compress(b"id,amount,note\n1,2,x\n")
    s3.put_object(Bucket=s3_bucket, Key="in/part-002.csv.gz", Body=body)
    plan = _plan(s3, s3_bucket, group_bytes=1)
    for group in plan.groups:
        stage_group(group, s3=s3)
    with pytest.raises(
        BulkLoadError, match=r"part-002.csv.gz \(group 2\) has \['id', 'amount', 'note'\]"
    ):
        collect_groups(plan.groups, s3=s3)


def test_an_input_that_fits_one_group_is_staged_at_once(s3: Any, s3_bucket: str) -> None:
    written = _put_parts(s3, s3_bucket, parts=2, rows_per_part=100)
    plan = _plan(s3, s3_bucket, group_bytes=10**9)
    assert plan.manifest is not None and not plan.groups
    assert Counter(_rows(s3, plan.manifest.chunks)) == Counter(written)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 6 MiB tmpfs: less than the whole input needs, more than one group does."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _incompressible_parts(s3: Any, bucket: str, parts: int, rows: int) -> list[Row]:
    rng = random.Random(3)
    written: list[Row] = []
    for part in range(parts):
        out = io.StringIO()
        out.write(HEADER + "\n")
        for n in range(part * rows, (part + 1) * rows):
            row = (str(n), f"{rng.getrandbits(120):030x}", str(n))
            written.append(row)
            out.write(",".join(row) + "\n")
        s3.put_object(
            Bucket=bucket,
            Key=f"in/part-{part:03d}.csv.gz",
            Body=gzip.compress(out.getvalue().encode()),
        )
    return written


def test_an_input_larger_than_a_tasks_temp_disk_stages_in_groups(
    s3: Any, s3_bucket: str, small_disk: Path
) -> None:
    # 6 parts of ≈1.6 MB raw each: ≈10 MB in all, on a 6 MiB disk
    written = _incompressible_parts(s3, s3_bucket, parts=6, rows=30_000)
    resources = Resources(temp_dir=str(small_disk), check_temp_space=False)

    with pytest.raises(Exception, match=r"(?i)no space left"):
        _plan(s3, s3_bucket, group_bytes=10**9, chunk_size=500_000, resources=resources)

    plan = _plan(s3, s3_bucket, group_bytes=2_000_000, chunk_size=500_000, resources=resources)
    assert len(plan.groups) >= 3
    for group in plan.groups:
        stage_group(StagingGroup.from_dict(group.to_dict()), s3=s3, resources=resources)
    manifest = collect_groups(plan.groups, s3=s3)
    assert Counter(_rows(s3, manifest.chunks)) == Counter(written)
    assert list(small_disk.iterdir()) in ([], [small_disk / "bulkload-staging"])


def test_plan_groups_cuts_as_few_groups_as_even_as_listing_order_allows() -> None:
    """Eight parts of 538 MB in groups of 4 GB made seven parts and one: one staging task did
    almost all of the work (79 s against 19 s at 50 M rows)."""
    from airflow_bulkload.staging.planning import SourceFile

    def cut(sizes: list[int], bound: int) -> list[list[int]]:
        files = [SourceFile(f"s3://b/{n}.csv", size, "e") for n, size in enumerate(sizes)]
        return [[f.size for f in group] for group in plan_groups(files, bound)]

    assert cut([538] * 8, 4000) == [[538] * 4, [538] * 4]
    assert cut([3000, 500, 500, 500], 2500) == [[3000], [500, 500, 500]]
    # never more groups, and none larger than the bound (unless one file alone is)
    import random

    rng = random.Random(7)
    for _ in range(300):
        sizes = [rng.randint(1, 60) for _ in range(rng.randint(1, 25))]
        bound = rng.randint(1, 120)
        greedy: list[list[int]] = [[]]
        for size in sizes:
            if greedy[-1] and sum(greedy[-1]) + size > bound:
                greedy.append([])
            greedy[-1].append(size)
        groups = cut(sizes, bound)
        assert [s for g in groups for s in g] == sizes
        assert len(groups) == len(greedy)
        assert all(sum(g) <= bound or len(g) == 1 for g in groups)
        assert max(map(sum, groups)) <= max(map(sum, greedy))


def test_a_group_staged_under_another_cut_of_the_same_input_is_not_taken_for_this_one() -> None:
    from airflow_bulkload.staging.planning import SourceFile

    files = [SourceFile(f"s3://b/{n}.csv", 10, "e") for n in range(4)]
    common = {
        "index": 0,
        "prefix": "s3://b/s/group-00000-",
        "manifest_uri": "m",
        "fingerprint": "fp",
    }
    seven = StagingGroup(sources=files[:3], options={}, **common)  # type: ignore[arg-type]
    four = StagingGroup(sources=files[:2], options={}, **common)  # type: ignore[arg-type]
    assert seven.group_fingerprint != four.group_fingerprint
    assert StagingGroup.from_dict(four.to_dict()).group_fingerprint == four.group_fingerprint
