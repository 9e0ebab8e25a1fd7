from __future__ import annotations

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
