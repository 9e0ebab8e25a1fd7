"""``s3_client`` reads and writes S3 through the connection, without the hook's stack walk.

That it makes the client ``S3Hook.get_conn()`` makes: ``tests/unit/test_connections.py``.
"""

from __future__ import annotations

import inspect

import pytest

from airflow_bulkload.s3io import s3_client
from tests.harness import MotoServer, unique_name


def test_reads_and_writes_through_the_connection(moto_server: MotoServer) -> None:
    s3 = s3_client("aws_default")
    bucket = unique_name("bl-s3io").replace("_", "-")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a.csv", Body=b"id\n1\n")
    assert s3.get_object(Bucket=bucket, Key="a.csv")["Body"].read() == b"id\n1\n"
    assert s3.meta.endpoint_url == moto_server.endpoint_url


@pytest.fixture
def stack_walks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every ``inspect.stack()`` call made while the test runs (the calls still happen)."""
    walked: list[object] = []
    stack = inspect.stack

    def counted_stack(*args: object, **kwargs: object) -> list[inspect.FrameInfo]:
        walked.append(args)
        return stack(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inspect, "stack", counted_stack)
    return walked


def test_does_not_walk_the_stack(moto_server: MotoServer, stack_walks: list[object]) -> None:
    """The hook's user-agent tag walks ``inspect.stack()`` (0.2 s per task): the client skips it."""
    s3 = s3_client("aws_default")
    assert s3.list_buckets()["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert stack_walks == []


def test_region_lookup_does_not_walk_the_stack(
    moto_server: MotoServer, stack_walks: list[object]
) -> None:
    """Server-side loads ask for the region once per chunk: no user-agent stack walk either."""
    from airflow_bulkload.s3io import s3_region

    assert s3_region("aws_default") == moto_server.region
    client = s3_client("aws_default")
    assert s3_region("unused", client) == client.meta.region_name
    assert stack_walks == []
