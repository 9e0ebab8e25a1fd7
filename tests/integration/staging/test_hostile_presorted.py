"""Input declared in key order ("presorted"): staging keeps its order, and checks it fairly.

From a hostile round: unsorted staging let DuckDB reorder rows across threads, so a correctly
sorted input came out scrambled (and was then loaded as if sorted, with a warning that blamed
the input); a composite key in order was reported out of order because its numeric part was
compared as text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat, first_out_of_order
from airflow_bulkload.staging.normalize import normalize


def test_a_presorted_input_keeps_its_order_through_staging_on_every_thread_count(
    tmp_path: Path,
) -> None:
    paths, first = [], 0
    for part in range(4):
        path = tmp_path / f"part-{part:03d}.csv"
        path.write_text(
            "id,v,note\n"
            + "".join(f"{first + k},{k},note-{first + k}-{'x' * 16}\n" for k in range(120))
        )
        first += 120
        paths.append(path)
    (tmp_path / "spill").mkdir()
    for trial, threads in enumerate([1, 2, 4] * 4):
        out = tmp_path / f"out{trial}.csv"
        normalize(
            paths,
            out,
            FileFormat.from_dict({"format": "csv", "header": True}),
            keep_order=True,
            temp_dir=tmp_path / "spill",
            threads=threads,
        )
        ids = [int(line.split(",")[0].strip('"')) for line in out.read_text().splitlines()]
        assert ids == list(range(480)), f"trial {trial} ({threads} threads): rows reordered"


def _chunk(index: int, first: list[str], last: list[str]) -> ChunkSpec:
    return ChunkSpec(
        uri=f"s3://b/c{index}",
        checksum="x",
        index=index,
        first_key=first,
        last_key=last,
        key_columns=["k", "n"],
    )


@pytest.mark.parametrize(
    ("chunks", "expected"),
    [
        ([_chunk(0, ["a", "1"], ["a", "9"]), _chunk(1, ["a", "10"], ["a", "20"])], None),
        ([_chunk(0, ["a", "9"], ["b", "1"]), _chunk(1, ["b", "2"], ["b", "10"])], None),
        ([_chunk(0, ["a", "1"], ["b", "5"]), _chunk(1, ["b", "4"], ["c", "1"])], 1),
        ([_chunk(0, ["b", "1"], ["a", "2"])], 0),
    ],
)
def test_a_composite_key_compares_part_by_part(
    chunks: list[ChunkSpec], expected: int | None
) -> None:
    assert first_out_of_order(chunks) == expected
