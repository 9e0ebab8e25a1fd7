"""``aws_client`` makes the client the amazon provider's hooks make, without their stack walk."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest

from airflow_bulkload.connections import aws_client
from tests.harness import unique_name


def _client_settings(client: Any) -> dict[str, object]:
    meta = client.meta
    config = meta.config
    return {
        "service": meta.service_model.service_name,
        "endpoint_url": meta.endpoint_url,
        "region_name": meta.region_name,
        "connect_timeout": config.connect_timeout,
        "read_timeout": config.read_timeout,
        "retries": config.retries,
        "s3": config.s3,
        "verify": client._endpoint.http_session._verify,
    }


@pytest.fixture
def aws_conn_id(monkeypatch: pytest.MonkeyPatch) -> str:
    """A connection with a region, timeouts, retries, S3 addressing, ``verify`` off and S3 and
    RDS endpoints."""
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
                    "service_config": {
                        "rds": {"endpoint_url": "http://127.0.0.1:9"},
                        "s3": {"endpoint_url": "http://127.0.0.1:8"},
                    },
                },
            }
        ),
    )
    return conn_id


@pytest.mark.parametrize("region_name", [None, "ap-south-1"])
def test_an_rds_client_has_the_rds_hooks_settings(
    aws_conn_id: str, region_name: str | None
) -> None:
    from airflow.providers.amazon.aws.hooks.rds import RdsHook

    ours = _client_settings(aws_client("rds", aws_conn_id, region_name))
    assert ours == _client_settings(RdsHook(aws_conn_id=aws_conn_id, region_name=region_name).conn)
    assert ours["endpoint_url"] == "http://127.0.0.1:9"
    assert ours["region_name"] == (region_name or "eu-west-1")
    assert ours["read_timeout"] == 17
    assert ours["verify"] is False


def test_an_s3_client_has_the_s3_hooks_settings(aws_conn_id: str) -> None:
    from airflow.providers.amazon.aws.hooks.s3 import S3Hook

    from airflow_bulkload.s3io import s3_client

    ours = _client_settings(s3_client(aws_conn_id))
    assert ours == _client_settings(S3Hook(aws_conn_id=aws_conn_id).get_conn())
    assert ours["endpoint_url"] == "http://127.0.0.1:8"
    assert ours["s3"] == {"addressing_style": "path"}
    assert ours["verify"] is False


def test_an_ec2_client_has_the_base_hooks_settings(aws_conn_id: str) -> None:
    from airflow.providers.amazon.aws.hooks.base_aws import AwsBaseHook

    ours = _client_settings(aws_client("ec2", aws_conn_id, "us-east-2"))
    hooks = AwsBaseHook(aws_conn_id=aws_conn_id, client_type="ec2", region_name="us-east-2")
    assert ours == _client_settings(hooks.get_conn())
    assert ours["region_name"] == "us-east-2"


def test_making_a_client_does_not_walk_the_stack(
    aws_conn_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hooks' user-agent tag walks ``inspect.stack()``: 0.2 s of every task making a client."""
    walked: list[object] = []
    stack = inspect.stack

    def counted_stack(*args: Any, **kwargs: Any) -> list[inspect.FrameInfo]:
        walked.append(args)
        return stack(*args, **kwargs)

    monkeypatch.setattr(inspect, "stack", counted_stack)
    for service in ("rds", "ec2", "s3"):
        aws_client(service, aws_conn_id)
    assert walked == []
    from airflow.providers.amazon.aws.hooks.rds import RdsHook

    RdsHook(aws_conn_id=aws_conn_id).conn  # noqa: B018  # the provider's client does walk it
    assert walked
