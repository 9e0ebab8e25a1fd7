"""The benchmark's datasets: the key-ordered classic rows are the classic rows, sorted."""

from __future__ import annotations

from pathlib import Path

from benchmarks.datasets import CLASSIC, CLASSIC_SORTED, generate
from benchmarks.engines import duckdb_checksum


def test_classic_sorted_holds_the_classic_rows_in_key_order(tmp_path: Path) -> None:
    shuffled = generate(CLASSIC, 2000, tmp_path / "shuffled", files=3)
    ordered = generate(CLASSIC_SORTED, 2000, tmp_path / "sorted", files=3)
    assert duckdb_checksum(CLASSIC, shuffled) == duckdb_checksum(CLASSIC_SORTED, ordered)
    ids = [
        int(line.split(",")[0]) for path in ordered for line in path.read_text().splitlines()[1:]
    ]
    assert ids == list(range(1, 2001))
