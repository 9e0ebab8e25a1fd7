"""Waiting for an RDS parameter change: what to wait for, and one poll of it.

A change to a parameter group is in effect when the instance is ``available`` with the group
``in-sync``, and (Aurora cluster-level parameters) when every member of the cluster reports the DB
cluster parameter group ``in-sync``. :func:`poll_steps` is the one routine that decides this from
the described state; it asks for each description it needs instead of calling AWS itself, so the
synchronous wait (:func:`poll`, boto3) and the deferrable trigger (:func:`poll_async`,
aiobotocore) run the very same steps and decide alike.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

#: One poll's verdict: in effect, waits for a reboot, or not yet.
Status = Literal["ready", "pending-reboot", "wait"]
#: A description a poll needs: ``("instance", DBInstanceIdentifier)`` or
#: ``("cluster", DBClusterIdentifier)``.
Describe = tuple[Literal["instance", "cluster"], str]


def describe_request(kind: str, ident: str) -> tuple[str, dict[str, str], str]:
    """The RDS call that describes one instance or cluster: method, arguments, result list."""
    if kind == "cluster":
        return "describe_db_clusters", {"DBClusterIdentifier": ident}, "DBClusters"
    return "describe_db_instances", {"DBInstanceIdentifier": ident}, "DBInstances"


def describe(client: Any, kind: str, ident: str) -> dict[str, Any]:
    """The description of one instance or cluster (``kind``), read with a boto3 RDS client."""
    method, arguments, results = describe_request(kind, ident)
    return dict(getattr(client, method)(**arguments)[results][0])


def writer_of(cluster: Mapping[str, Any]) -> str | None:
    """The cluster's writer instance, if it has one."""
    return next(
        (
            str(m["DBInstanceIdentifier"])
            for m in cluster.get("DBClusterMembers") or []
            if m.get("IsClusterWriter")
        ),
        None,
    )


def _named(*names: str | None) -> str:
    """The names given, joined for a message (``-`` for none)."""
    return " and ".join(name for name in names if name) or "-"


@dataclass
class WaitSpec:
    """What to wait for after a change.

    The instance ``available`` with ``parameter_group`` ``in-sync`` and/or (Aurora cluster-level
    parameters) every member of the cluster reporting ``cluster_parameter_group`` ``in-sync``.
    ``reboot_allowed``: reboot what reports ``pending-reboot``.
    """

    db_instance_identifier: str | None
    parameter_group: str | None
    purpose: str  # "enter" | "exit"
    reboot_allowed: bool = False
    rebooted: bool = False
    cleanup_group: str | None = None  # delete once unused (the swap's bulk copy, on exit)
    db_cluster_identifier: str | None = None
    cluster_parameter_group: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> WaitSpec:
        return cls(**data)

    @property
    def target(self) -> str:
        """The instance and/or cluster, for messages."""
        cluster = self.db_cluster_identifier
        return _named(self.db_instance_identifier, cluster and f"cluster {cluster}")

    @property
    def groups(self) -> str:
        """The parameter group(s) waited for, for messages."""
        cluster = self.cluster_parameter_group
        return _named(self.parameter_group, cluster and f"{cluster} (cluster)")

    @property
    def needs_instance(self) -> bool:
        return bool(self.db_instance_identifier and self.parameter_group)

    @property
    def needs_cluster(self) -> bool:
        return bool(self.db_cluster_identifier and self.cluster_parameter_group)


def merge_specs(instance: WaitSpec | None, cluster: WaitSpec | None) -> WaitSpec | None:
    """One wait for both parts (instance group, cluster group); ``None`` when neither changed."""
    if instance is None or cluster is None:
        return instance or cluster
    instance.db_cluster_identifier = cluster.db_cluster_identifier
    instance.cluster_parameter_group = cluster.cluster_parameter_group
    instance.reboot_allowed = instance.reboot_allowed or cluster.reboot_allowed
    return instance


def evaluate_instance(instance: Mapping[str, Any], parameter_group: str) -> Status:
    """``ready`` (available, group in-sync), ``pending-reboot``, or ``wait``."""
    if instance.get("DBInstanceStatus") != "available":
        return "wait"
    groups = instance.get("DBParameterGroups") or []
    group = next((g for g in groups if g.get("DBParameterGroupName") == parameter_group), None)
    if group is None:
        return "wait"
    status = group.get("ParameterApplyStatus")
    if status == "in-sync":
        return "ready"
    if status == "pending-reboot":
        return "pending-reboot"
    return "wait"


def evaluate_cluster(
    cluster: Mapping[str, Any],
    cluster_parameter_group: str,
    member_status: Mapping[str, str] | None = None,
) -> Status:
    """``ready``, ``pending-reboot`` or ``wait`` for a cluster and its members.

    ``ready``: the cluster is available, uses the group, and every member reports it ``in-sync``;
    ``pending-reboot``: some member waits for a reboot. ``member_status`` (instance id ->
    DBInstanceStatus, of the members reporting ``pending-reboot``): a member that is not
    ``available`` is rebooting already, so wait for it.
    """
    if cluster.get("Status") != "available":
        return "wait"
    if cluster.get("DBClusterParameterGroup") != cluster_parameter_group:
        return "wait"
    members = cluster.get("DBClusterMembers") or []
    statuses = [m.get("DBClusterParameterGroupStatus") for m in members]
    pending = cluster_members_pending_reboot(cluster)
    busy = [m for m in pending if (member_status or {}).get(m, "available") != "available"]
    if pending and not busy:
        return "pending-reboot"
    if all(s == "in-sync" for s in statuses):
        return "ready"
    return "wait"


def combine_status(*statuses: Status) -> Status:
    """Both parts of a wait: ``pending-reboot`` if either needs a reboot, ``ready`` if both are."""
    if "pending-reboot" in statuses:
        return "pending-reboot"
    return "ready" if all(s == "ready" for s in statuses) else "wait"


def cluster_members_pending_reboot(cluster: Mapping[str, Any]) -> list[str]:
    """The members of ``cluster`` that wait for a reboot to apply its DB cluster parameter group."""
    return [
        str(m["DBInstanceIdentifier"])
        for m in cluster.get("DBClusterMembers") or []
        if m.get("DBClusterParameterGroupStatus") == "pending-reboot"
    ]


def poll_steps(spec: WaitSpec) -> Generator[Describe, Mapping[str, Any], Status]:
    """One poll of ``spec``, as the descriptions it needs: the one waiting routine.

    Yields each description it needs (see :data:`Describe`) and is sent the described instance or
    cluster back; returns the verdict of both parts of the spec. Drive it with :func:`poll`
    (synchronous) or :func:`poll_async` (the trigger).
    """
    statuses: list[Status] = []
    if spec.needs_instance:
        instance = yield ("instance", str(spec.db_instance_identifier))
        statuses.append(evaluate_instance(instance, str(spec.parameter_group)))
    if spec.needs_cluster:
        ident = str(spec.db_cluster_identifier)
        cluster = yield ("cluster", ident)
        pending = cluster_members_pending_reboot(cluster)
        members: dict[str, str] = {}
        for member in pending:
            described = yield ("instance", member)
            members[member] = str(described.get("DBInstanceStatus"))
        if pending:
            # look again after the members: one seen rebooting is waited for, not rebooted
            cluster = yield ("cluster", ident)
        statuses.append(evaluate_cluster(cluster, str(spec.cluster_parameter_group), members))
    return combine_status(*statuses)


def poll(spec: WaitSpec, describe: Callable[[str, str], Mapping[str, Any]]) -> Status:
    """One poll of ``spec`` with a blocking ``describe(kind, identifier)``."""
    steps = poll_steps(spec)
    try:
        request = next(steps)
        while True:
            request = steps.send(describe(*request))
    except StopIteration as done:
        return done.value


async def poll_async(
    spec: WaitSpec, describe: Callable[[str, str], Awaitable[Mapping[str, Any]]]
) -> Status:
    """One poll of ``spec`` with an awaitable ``describe(kind, identifier)`` (the trigger's)."""
    steps = poll_steps(spec)
    try:
        request = next(steps)
        while True:
            request = steps.send(await describe(*request))
    except StopIteration as done:
        return done.value
