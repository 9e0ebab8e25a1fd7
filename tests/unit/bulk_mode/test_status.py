"""The pure side of waiting: evaluation of described state, and the one poll routine."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from airflow_bulkload.bulk_mode.status import WaitSpec, evaluate_instance, poll, poll_async


def test_evaluate_instance() -> None:
    def inst(status: str, group: str, apply: str) -> dict[str, object]:
        return {
            "DBInstanceStatus": status,
            "DBParameterGroups": [{"DBParameterGroupName": group, "ParameterApplyStatus": apply}],
        }

    assert evaluate_instance(inst("available", "g", "in-sync"), "g") == "ready"
    assert evaluate_instance(inst("available", "g", "pending-reboot"), "g") == "pending-reboot"
    assert evaluate_instance(inst("available", "g", "applying"), "g") == "wait"
    assert evaluate_instance(inst("rebooting", "g", "in-sync"), "g") == "wait"
    assert evaluate_instance(inst("available", "other", "in-sync"), "g") == "wait"


def _instance(status: str, group: str, apply: str) -> dict[str, Any]:
    return {
        "DBInstanceStatus": status,
        "DBParameterGroups": [{"DBParameterGroupName": group, "ParameterApplyStatus": apply}],
    }


def _cluster(group: str, members: dict[str, str]) -> dict[str, Any]:
    return {
        "Status": "available",
        "DBClusterParameterGroup": group,
        "DBClusterMembers": [
            {"DBInstanceIdentifier": m, "DBClusterParameterGroupStatus": s}
            for m, s in members.items()
        ],
    }


def test_the_sync_wait_and_the_trigger_run_the_same_poll() -> None:
    """Both drivers ask for the same descriptions, in the same order, and decide alike."""
    spec = WaitSpec("w", "pg", "enter", db_cluster_identifier="cl", cluster_parameter_group="cpg")
    described: dict[tuple[str, str], Mapping[str, Any]] = {
        ("instance", "w"): _instance("available", "pg", "in-sync"),
        ("cluster", "cl"): _cluster("cpg", {"w": "in-sync", "r": "pending-reboot"}),
        ("instance", "r"): {"DBInstanceStatus": "rebooting"},
    }
    asked: list[tuple[str, str]] = []

    def describe(kind: str, ident: str) -> Mapping[str, Any]:
        asked.append((kind, ident))
        return described[(kind, ident)]

    async def describe_async(kind: str, ident: str) -> Mapping[str, Any]:
        return describe(kind, ident)

    # the member is rebooting already: wait for it (the cluster is described again after it)
    steps = [("instance", "w"), ("cluster", "cl"), ("instance", "r"), ("cluster", "cl")]
    assert poll(spec, describe) == "wait"
    assert asked == steps
    asked.clear()
    assert asyncio.run(poll_async(spec, describe_async)) == "wait"
    assert asked == steps

    described[("instance", "r")] = {"DBInstanceStatus": "available"}
    assert poll(spec, describe) == "pending-reboot"
    assert asyncio.run(poll_async(spec, describe_async)) == "pending-reboot"

    described[("cluster", "cl")] = _cluster("cpg", {"w": "in-sync", "r": "in-sync"})
    asked.clear()
    assert poll(spec, describe) == "ready"
    assert asked == [("instance", "w"), ("cluster", "cl")]
    assert asyncio.run(poll_async(spec, describe_async)) == "ready"


def test_a_poll_of_one_part_describes_only_that_part() -> None:
    spec = WaitSpec("db1", "bulkload-db1", "exit")
    asked: list[tuple[str, str]] = []

    def describe(kind: str, ident: str) -> Mapping[str, Any]:
        asked.append((kind, ident))
        return _instance("available", "bulkload-db1", "applying")

    assert poll(spec, describe) == "wait"
    assert asked == [("instance", "db1")]
