"""The load modes' pure parts: names, arguments, the columns a merge writes, batch ranges."""

from __future__ import annotations

import pytest

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.modes import (
    batch_bounds,
    merge_columns,
    old_table,
    parse_mode,
    parse_upsert_keys,
    work_table,
)
from airflow_bulkload.pipeline_args import check_pipeline_arguments


def test_modes_parse_as_templates_render_them() -> None:
    assert parse_mode("append") == "append"
    assert parse_mode(" REPLACE ") == "replace"
    for bad in ("merge", "", None, "replace; DROP TABLE x", 1):
        with pytest.raises(ValueError, match="mode must be one of"):
            parse_mode(bad)


def test_upsert_keys_from_a_list_or_a_param_text() -> None:
    assert parse_upsert_keys(None) is None
    assert parse_upsert_keys("") is None
    assert parse_upsert_keys("None") is None
    assert parse_upsert_keys("tenant_id, email") == ["tenant_id", "email"]
    assert parse_upsert_keys(["id"]) == ["id"]
    for bad in ("a,,b", ["a", "a"], [1], 5, []):
        with pytest.raises(ValueError, match="upsert_keys"):
            parse_upsert_keys(bad)


def test_work_tables_are_named_from_the_target_and_fit_the_engine() -> None:
    ref = TableRef("items", "shop")
    assert work_table(ref, "replace", 63) == TableRef("items__bl_new", "shop")
    assert work_table(ref, "upsert", 63) == TableRef("items__bl_upsert", "shop")
    assert old_table(ref, 64) == TableRef("items__bl_old", "shop")
    long_a, long_b = TableRef("x" * 60 + "a"), TableRef("x" * 60 + "b")
    a, b = work_table(long_a, "upsert", 63), work_table(long_b, "upsert", 63)
    assert len(a.name.encode()) <= 63 and a.name.endswith("__bl_upsert")
    assert a != b  # two long names sharing a prefix get work tables of their own
    wide = TableRef("é" * 40)
    assert len(work_table(wide, "replace", 63).name.encode()) <= 63


def test_a_merge_writes_the_input_columns_and_updates_all_but_the_key() -> None:
    table = ["id", "name", "price", "updated_at"]
    assert merge_columns(table, None, ["id"]) == (table, ["name", "price", "updated_at"])
    assert merge_columns(table, ["price", "id"], ["id"]) == (["id", "price"], ["price"])
    assert merge_columns(table, ["id"], ["id"]) == (["id"], [])
    with pytest.raises(ValueError, match="upsert key column"):
        merge_columns(table, ["name", "price"], ["id"])


def test_batches_cover_every_page_and_the_last_is_open_ended() -> None:
    assert batch_bounds(0, 10) == [(0, -1)]
    assert batch_bounds(25, 10) == [(0, 10), (10, 20), (20, -1)]
    assert batch_bounds(10, 10) == [(0, -1)]
    with pytest.raises(ValueError):
        batch_bounds(5, 0)


def _check(**overrides: object) -> None:
    arguments: dict[str, object] = {
        "method": "client",
        "bulk_mode": "auto",
        "parallelism": "auto",
        "drop_indexes": "auto",
        "drop_primary_key": "auto",
        "reboot_policy": "never",
        "mode": "append",
        "upsert_keys": None,
    }
    check_pipeline_arguments(**(arguments | overrides))  # type: ignore[arg-type]


def test_the_pipeline_refuses_modes_and_keys_no_run_could_use() -> None:
    _check(mode="replace")
    _check(mode="upsert", upsert_keys=["email"])
    _check(mode="{{ params.mode }}", upsert_keys="{{ params.keys }}")  # checked when rendered
    with pytest.raises(ValueError, match="mode must be one of"):
        _check(mode="merge")
    with pytest.raises(ValueError, match="upsert_keys is for mode='upsert'"):
        _check(mode="replace", upsert_keys=["email"])


def test_arguments_that_render_later_are_left_for_their_tasks() -> None:
    """A ``{% ... %}`` template is as much a template as ``{{ ... }}``: checked once rendered."""
    statement = "{% if params.full %}replace{% else %}append{% endif %}"
    _check(mode=statement)
    _check(mode="upsert", upsert_keys="{% if params.k %}{{ params.k }}{% endif %}")
    _check(reboot_policy="{% if params.reboot %}allowed{% else %}never{% endif %}")
    _check(load_batch_size="{% if params.big %}8GB{% else %}2GB{% endif %}")
    with pytest.raises(ValueError, match="load_batch_size"):
        _check(load_batch_size="lots")
    with pytest.raises(ValueError, match="reboot_policy"):
        _check(reboot_policy="sometimes")


def test_wait_for_input_takes_s3_and_templates_not_local_paths() -> None:
    from airflow_bulkload.pipeline_args import check_waitable

    check_waitable(["s3://in/x/", "{{ params.src }}", "{% if x %}s3://a/{% endif %}"])
    with pytest.raises(ValueError, match="not local paths"):
        check_waitable("/data/in/*.csv")
