"""OpenLineage naming of the S3 inputs and the target table."""

from __future__ import annotations

from dataclasses import replace

from airflow_bulkload.catalog import TableInfo, TableRef
from airflow_bulkload.lineage import MAX_INPUT_DATASETS, input_dataset_names, table_dataset_name
from tests.unit.advice.factories import table


def _table(schema: str | None, name: str) -> TableInfo:
    return replace(table(), table=TableRef(name=name, schema=schema))


def test_s3_objects_are_named_by_bucket_and_key_once_each_in_order() -> None:
    uris = ["s3://in/day/b.csv.gz", "s3://in/day/a.csv.gz", "s3://in/day/b.csv.gz", "s3://other/x"]
    assert input_dataset_names(uris) == [
        ("s3://in", "day/b.csv.gz"),
        ("s3://in", "day/a.csv.gz"),
        ("s3://other", "x"),
    ]
    assert input_dataset_names(["s3://in"]) == [("s3://in", "/")]


def test_many_objects_are_named_by_their_common_folder_per_bucket() -> None:
    uris = [f"s3://in/exports/2026-11-21/part-{i:05}.csv.gz" for i in range(MAX_INPUT_DATASETS + 1)]
    assert input_dataset_names([*uris, "s3://side/one/two.csv", "s3://side/one/three.csv"]) == [
        ("s3://in", "exports/2026-11-21/"),
        ("s3://side", "one/"),
    ]
    # no common folder: the bucket's root, not half a file name
    spread = [f"s3://in/p{i}.csv" for i in range(MAX_INPUT_DATASETS + 1)]
    assert input_dataset_names(spread) == [("s3://in", "/")]


def test_tables_are_named_database_schema_table_or_database_table() -> None:
    assert table_dataset_name("shop", _table("public", "events")) == "shop.public.events"
    # MySQL: the schema is the database and the provider gives none of its own
    assert table_dataset_name(None, _table("shop", "events")) == "shop.events"
