from __future__ import annotations

import json

import pytest

from airflow_bulkload.advice import InputSummary, LoadPlan, evaluate, recommend_plan
from airflow_bulkload.advice.plan import (
    DEFAULT_CHUNK_SIZE,
    DEFAULT_PARALLELISM,
    optimal_parallelism,
    recommend_chunk_size,
)
from airflow_bulkload.catalog import ServerFacts
from tests.unit.advice.factories import GB, MB, inputs, staged, table


@pytest.mark.parametrize(
    ("engine", "vcpus", "expected"),
    [
        ("mysql", 16, 10),
        ("mysql", 8, 5),
        ("mysql", 4, 2),
        ("mysql", 2, 2),
        ("mysql", 1, 1),
        ("postgres", 8, 7),
        ("postgres", 3, 2),
        ("postgres", 2, 2),
        ("postgres", 1, 1),
    ],
)
def test_optimal_parallelism(engine: str, vcpus: int, expected: int) -> None:
    assert optimal_parallelism(engine, vcpus) == expected


def test_parallelism_defaults_when_vcpus_unknown_and_is_capped_by_chunks() -> None:
    assert recommend_plan(inputs("postgres")).parallelism == DEFAULT_PARALLELISM
    plan = recommend_plan(inputs("postgres", vcpus=32, input=staged(300 * MB, 300 * MB, 10 * MB)))
    assert plan.parallelism == 3
    assert "capped" in plan.rationale["parallelism"]


def test_chunk_size_stays_within_bounds() -> None:
    assert recommend_chunk_size(None, 4) == DEFAULT_CHUNK_SIZE
    assert recommend_chunk_size(50 * MB, 4) == 100 * MB
    assert recommend_chunk_size(1000 * GB, 4) == 1 * GB
    assert recommend_chunk_size(8 * GB, 4) == 1 * GB
    assert recommend_chunk_size(2 * GB, 4) == 250 * MB


def test_unstaged_estimate_caps_parallelism_by_expected_chunks() -> None:
    plan = recommend_plan(inputs("postgres", vcpus=16, input=InputSummary(total_bytes=150 * MB)))
    assert plan.chunk_size == 100 * MB
    assert plan.parallelism == 2


def test_sort_on_mysql_with_a_key_not_on_postgres() -> None:
    assert recommend_plan(inputs("mysql", table())).sort is True
    assert recommend_plan(inputs("mysql", table(pk={}))).sort is False
    assert recommend_plan(inputs("postgres", table())).sort is False
    presorted = staged(200 * MB, sorted_by=("id",))
    assert recommend_plan(inputs("mysql", table(), input=presorted)).sort is False


def test_drop_indexes_unknown_input_on_large_table_keeps_them() -> None:
    t = table(indexes={"a": ["x"]}, size_bytes=10 * GB)
    plan = recommend_plan(inputs("mysql", t))
    assert plan.drop_indexes is False
    assert "unknown" in plan.rationale["drop_indexes"]


def test_plan_round_trips_through_json() -> None:
    plan = evaluate(inputs("mysql", table(indexes={"a": ["x"]}), vcpus=16)).plan
    again = LoadPlan.from_dict(json.loads(json.dumps(plan.to_dict())))
    assert again == plan


def test_resolve_applies_explicit_knobs_only() -> None:
    plan = LoadPlan(parallelism=5, drop_indexes=True, sort=True, chunk_size=256 * MB)
    assert plan.resolve() == plan
    assert plan.resolve(parallelism=None, sort="auto") == plan
    resolved = plan.resolve(parallelism=2, drop_indexes="false", sort=False, chunk_size="300000000")
    assert (resolved.parallelism, resolved.drop_indexes, resolved.sort, resolved.chunk_size) == (
        2,
        False,
        False,
        300 * MB,
    )
    with pytest.raises(ValueError):
        plan.resolve(sort="maybe")


def test_index_rebuilds_use_every_vcpu_even_when_few_chunks_load() -> None:
    plan = recommend_plan(inputs("postgres", vcpus=8, input=staged(300 * MB)))
    assert (plan.parallelism, plan.index_build_parallelism) == (1, 9)
    assert recommend_plan(inputs("mysql")).index_build_parallelism == DEFAULT_PARALLELISM + 1
    assert LoadPlan.from_dict(plan.to_dict()) == plan


def test_a_partitioned_table_keeps_its_partitioned_indexes() -> None:
    """An empty table's indexes are dropped by the plan, but never a partitioned table's: prepare
    refuses that, so a plan that asked for it would fail every load of such a table."""
    empty = table(indexes={"t_note": ["note"]})
    partitioned = table(indexes={"t_note": ["note"]}, extra={"relkind": "p"})
    assert recommend_plan(inputs("postgres", empty)).drop_indexes is True
    plan = recommend_plan(inputs("postgres", partitioned))
    assert plan.drop_indexes is False
    assert "partitioned" in plan.rationale["drop_indexes"]


@pytest.mark.parametrize(("mode", "expected"), [(0, 1), (1, 1), (2, 5), (None, 5)])
def test_an_auto_increment_table_loads_alone_below_lock_mode_2(
    mode: int | None, expected: int
) -> None:
    """Below innodb_autoinc_lock_mode 2 each LOAD DATA holds the table's AUTO-INC lock."""
    server = ServerFacts("mysql", extra={} if mode is None else {"innodb_autoinc_lock_mode": mode})
    t = table(extra={"identity_columns": ["id"]})
    plan = recommend_plan(inputs("mysql", t, server=server, vcpus=8))
    assert plan.parallelism == expected
    # no AUTO_INCREMENT column: the vCPU rule
    assert recommend_plan(inputs("mysql", server=server, vcpus=8)).parallelism == 5


def test_a_postgres_identity_column_is_no_autoinc_lock() -> None:
    """The AUTO-INC lock is InnoDB's: PostgreSQL identity columns keep the vCPU rule."""
    t = table(extra={"identity_columns": ["id"]})
    server = ServerFacts("postgres", extra={"innodb_autoinc_lock_mode": 1})
    assert evaluate(inputs("postgres", t, server=server, vcpus=8)).plan.parallelism == 7
