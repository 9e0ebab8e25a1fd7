from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_bulkload.bulk_mode.status import WaitSpec
from airflow_bulkload.triggers.bulk_mode import RdsParameterGroupInSyncTrigger


def test_trigger_serializes_to_its_own_constructor() -> None:
    spec = WaitSpec("db1", "bulkload-db1", "enter", reboot_allowed=True).to_dict()
    trigger = RdsParameterGroupInSyncTrigger(
        spec, 5, 10, aws_conn_id="aws", region_name="eu-west-1"
    )
    path, kwargs = trigger.serialize()
    assert path == "airflow_bulkload.triggers.bulk_mode.RdsParameterGroupInSyncTrigger"
    again = RdsParameterGroupInSyncTrigger(**kwargs)
    assert again.serialize() == (path, kwargs)
    assert WaitSpec.from_dict(kwargs["spec"]) == WaitSpec.from_dict(spec)


class _AsyncRds:
    """An aiobotocore RDS client's describe calls over fixed answers, counting them."""

    def __init__(self, apply_status: str) -> None:
        self.apply_status = apply_status
        self.calls = 0

    async def __aenter__(self) -> _AsyncRds:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    async def describe_db_instances(self, DBInstanceIdentifier: str) -> dict[str, Any]:
        self.calls += 1
        group = {"DBParameterGroupName": "bulkload-db1", "ParameterApplyStatus": self.apply_status}
        return {"DBInstances": [{"DBInstanceStatus": "available", "DBParameterGroups": [group]}]}


@pytest.mark.parametrize(
    ("apply_status", "event", "calls"),
    [("in-sync", "ready", 1), ("pending-reboot", "pending-reboot", 1), ("applying", "timeout", 3)],
)
def test_trigger_polls_with_the_shared_routine(
    monkeypatch: pytest.MonkeyPatch, apply_status: str, event: str, calls: int
) -> None:
    from airflow.providers.amazon.aws.hooks.rds import RdsHook

    client = _AsyncRds(apply_status)

    async def get_async_conn(self: Any) -> _AsyncRds:
        return client

    monkeypatch.setattr(RdsHook, "get_async_conn", get_async_conn)
    spec = WaitSpec("db1", "bulkload-db1", "enter").to_dict()
    trigger = RdsParameterGroupInSyncTrigger(spec, 0, 3)

    async def first_event() -> Any:
        return await anext(aiter(trigger.run()))

    assert asyncio.run(first_event()).payload["status"] == event
    assert client.calls == calls
