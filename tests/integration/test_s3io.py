"""``s3_client`` makes the client ``S3Hook.get_conn()`` makes, from the same connection."""

from __future__ import annotations

import inspect
import json

import pytest

from airflow_bulkload.s3io import s3_client
from tests.harness import MotoServer, unique_name


def _client_settings(client: object) -> dict[str, object]:
    meta = client.meta  # type: ignore[attr-defined]
    config = meta.config
    return {
        "endpoint_url": meta.endpoint_url,
        "region_name": meta.region_name,
        "connect_timeout": config.connect_timeout,
        "read_timeout": config.read_timeout,
        "retries": config.retries,
        "s3": config.s3,
        "verify": client._endpoint.http_session._verify,  # type: ignore[attr-defined]
    }


def test_reads_and_writes_through_the_connection(moto_server: MotoServer) -> None:
    s3 = s3_client("aws_default")
    bucket = unique_name("bl-s3io").replace("_", "-")
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="a.csv", Body=b"id\n1\n")
    assert s3.get_object(Bucket=bucket, Key="a.csv")["Body"].read() == b"id\n1\n"
    assert s3.meta.endpoint_url == moto_server.endpoint_url


def test_same_settings_as_the_hooks_client(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    conn_id = unique_name("bl_aws")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps(
            {
                "conn_type": "aws",
                "login": "testing",
                "password": "testing",
                "extra": {
                    "region_name": "eu-west-1",
                    "verify": False,
                    "config_kwargs": {
                        "connect_timeout": 3,
                        "read_timeout": 17,
                        "retries": {"max_attempts": 7, "mode": "standard"},
                        "s3": {"addressing_style": "path"},
                    },
                    "service_config": {"s3": {"endpoint_url": "http://127.0.0.1:9"}},
                },
            }
        ),
    )
    ours = _client_settings(s3_client(conn_id))
    assert ours == _client_settings(S3Hook(aws_conn_id=conn_id).get_conn())
    assert ours["endpoint_url"] == "http://127.0.0.1:9"
    assert ours["region_name"] == "eu-west-1"
    assert ours["read_timeout"] == 17
    assert ours["verify"] is False


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
