"""Which objects a source names: a prefix its own objects only, globs one level unless **, and
a missing bucket said plainly."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_bulkload.exceptions import BulkLoadError
from airflow_bulkload.staging.manifest import FileFormat
from airflow_bulkload.staging.sources import NoInputError, resolve_sources
from airflow_bulkload.staging.stager import StagingOptions, stage
from tests.harness import MotoServer


@pytest.fixture
def s3(moto_server: MotoServer) -> Any:
    return moto_server.client("s3")


def put(s3: Any, bucket: str, *keys: str) -> None:
    for key in keys:
        s3.put_object(Bucket=bucket, Key=key, Body=b"1,a\n")


def names(sources: list[Any]) -> list[str]:
    return [s.location.split("/", 3)[3] for s in sources]


def test_a_prefix_reads_its_own_objects_not_nested_folders(s3: Any, s3_bucket: str) -> None:
    put(s3, s3_bucket, "day/a.csv", "day/b.csv", "day/archive/old.csv", "day/x/y/z.csv")
    assert names(resolve_sources(f"s3://{s3_bucket}/day/", s3)) == ["day/a.csv", "day/b.csv"]
    assert names(resolve_sources(f"s3://{s3_bucket}/day", s3)) == ["day/a.csv", "day/b.csv"]


def test_a_glob_stays_in_its_folder_unless_double_star(s3: Any, s3_bucket: str) -> None:
    put(s3, s3_bucket, "day/a.csv", "day/archive/old.csv", "day/b.txt")
    assert names(resolve_sources(f"s3://{s3_bucket}/day/*.csv", s3)) == ["day/a.csv"]
    assert names(resolve_sources(f"s3://{s3_bucket}/day/**/*.csv", s3)) == [
        "day/a.csv",
        "day/archive/old.csv",
    ]


def test_a_missing_source_bucket_is_named(s3: Any) -> None:
    with pytest.raises(NoInputError, match=r"source bucket 'no-such-bucket-x' does not exist"):
        resolve_sources("s3://no-such-bucket-x/day/", s3)


def test_a_missing_staging_bucket_is_named(s3: Any, s3_bucket: str) -> None:
    put(s3, s3_bucket, "day/a.csv")
    with pytest.raises(BulkLoadError, match=r"staging bucket 'no-such-staging-x' does not exist"):
        stage(
            f"s3://{s3_bucket}/day/",
            s3=s3,
            staging_uri="s3://no-such-staging-x/staging",
            dag_id="d",
            table="t",
            run="r",
            options=StagingOptions(file_format=FileFormat(), columns=["id", "v"]),
        )


def test_the_manifest_lists_the_objects_read(s3: Any, s3_bucket: str) -> None:
    put(s3, s3_bucket, "day/a.csv", "day/b.csv", "day/archive/old.csv")
    result = stage(
        f"s3://{s3_bucket}/day/",
        s3=s3,
        staging_uri=f"s3://{s3_bucket}/staging",
        dag_id="d",
        table="t",
        run="r",
        options=StagingOptions(file_format=FileFormat(), columns=["id", "v"]),
    )
    assert result.manifest.sources == [f"s3://{s3_bucket}/day/a.csv", f"s3://{s3_bucket}/day/b.csv"]
