"""Bulk mode on an RDS/Aurora DB instance: parameter-group changes that are always undone.

Where the state lives: in tags on the parameter group that carries the bulk values — the
instance's own custom group (strategy ``modify-in-place``) or the bulk copy
``bulkload-<instance>`` (strategy ``swap``); for Aurora cluster-level parameters, the cluster's
own custom DB cluster parameter group (modify-in-place only), with the same tags and lease rules.
Every run that touches the instance or cluster reads the same tags, whatever database or Airflow
deployment it comes from:

- ``bulkload:mode`` — ``modify-in-place`` or ``swap``;
- ``bulkload:reboot`` — the reboot policy bulk mode was entered with (exit of a swap reuses it);
- ``bulkload:swapped-from`` — (swap) the group to go back to;
- ``bulkload:orig:<parameter>`` — (modify-in-place) the value to restore, ``-`` = not set in the
  group (restored with a reset to the engine default), else ``=`` + base64url of the value;
- ``bulkload:lease:<token>`` — one per holder: ``<expiry epoch> <dag/table/date>``.

Tags are not a lock: enter/exit of several runs on one instance at the very same moment can race.
Put the bulk-mode tasks in one Airflow pool with one slot per instance to serialise them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import Any

from airflow_bulkload.bulk_mode_policy import (
    KNOWN_STATIC_SETTINGS,
    TAG_PREFIX,
    Lease,
    LeaseKey,
    check_reboot_policy,
    check_strategy,
    decode_tag_value,
    encode_tag_value,
    maintenance_window_overlaps,
    refuse_static,
    resolve_bulk_settings,
    split_leases,
    tag_safe,
)
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

log = logging.getLogger(__name__)

MODE_TAG = TAG_PREFIX + "mode"
REBOOT_TAG = TAG_PREFIX + "reboot"
SWAPPED_FROM_TAG = TAG_PREFIX + "swapped-from"
ORIGINAL_TAG = TAG_PREFIX + "orig:"
LEASE_TAG = TAG_PREFIX + "lease:"
MAX_TAGS = 50  # AWS limit per resource
MAX_PARAMETERS_PER_CALL = 20  # ModifyDBParameterGroup / ResetDBParameterGroup limit


@dataclass(frozen=True)
class ParameterInfo:
    name: str
    value: str | None  # None: not set in the group (engine default applies)
    apply_type: str  # "static" | "dynamic"
    modifiable: bool

    @property
    def static(self) -> bool:
        return self.apply_type == "static" or self.name in KNOWN_STATIC_SETTINGS


@dataclass
class WaitSpec:
    """What to wait for after a change: the instance ``available`` with ``parameter_group``
    ``in-sync`` and/or (Aurora cluster-level parameters) every member of the cluster reporting
    ``cluster_parameter_group`` ``in-sync``. ``reboot_allowed``: reboot what reports
    ``pending-reboot``."""

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
        parts = []
        if self.db_instance_identifier:
            parts.append(self.db_instance_identifier)
        if self.db_cluster_identifier:
            parts.append(f"cluster {self.db_cluster_identifier}")
        return " and ".join(parts) or "-"

    @property
    def groups(self) -> str:
        """The parameter group(s) waited for, for messages."""
        parts = []
        if self.parameter_group:
            parts.append(self.parameter_group)
        if self.cluster_parameter_group:
            parts.append(f"{self.cluster_parameter_group} (cluster)")
        return " and ".join(parts) or "-"

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


def evaluate_instance(instance: dict[str, Any], parameter_group: str) -> str:
    """``ready`` (available, group in-sync), ``pending-reboot``, or ``wait``.

    Pure, so the trigger (async client) and the polling path (sync client) decide alike.
    """
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
    cluster: dict[str, Any],
    cluster_parameter_group: str,
    member_status: Mapping[str, str] | None = None,
) -> str:
    """``ready`` (cluster available, uses the group, every member reports it ``in-sync``),
    ``pending-reboot`` (some member waits for a reboot), or ``wait``. ``member_status`` (instance
    id -> DBInstanceStatus, of the members reporting ``pending-reboot``): a member that is not
    ``available`` is rebooting already, so wait for it. Pure, like :func:`evaluate_instance`."""
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


def combine_status(*statuses: str) -> str:
    """Both parts of a wait: ``pending-reboot`` if either needs a reboot, ``ready`` if both are."""
    if "pending-reboot" in statuses:
        return "pending-reboot"
    return "ready" if all(s == "ready" for s in statuses) else "wait"


def cluster_members_pending_reboot(cluster: dict[str, Any]) -> list[str]:
    return [
        str(m["DBInstanceIdentifier"])
        for m in cluster.get("DBClusterMembers") or []
        if m.get("DBClusterParameterGroupStatus") == "pending-reboot"
    ]


@dataclass
class RdsBulkState:
    holder_group: str  # the group whose tags hold the state
    tags: dict[str, str]
    mode: str | None
    bulk_group_exists: bool
    leases: list[Lease] = field(default_factory=list)

    @property
    def originals(self) -> dict[str, str | None]:
        return {
            k[len(ORIGINAL_TAG) :]: decode_tag_value(v)
            for k, v in self.tags.items()
            if k.startswith(ORIGINAL_TAG)
        }


def _parse_leases(tags: dict[str, str]) -> list[Lease]:
    leases = []
    for key, value in tags.items():
        if key.startswith(LEASE_TAG):
            expiry, _, holder = value.partition(" ")
            try:
                expires_at = float(expiry)
            except ValueError:
                expires_at = 0.0  # unreadable: treat as expired rather than holding forever
            leases.append(Lease(key[len(LEASE_TAG) :], expires_at, holder))
    return leases


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


class GroupApi:
    """The calls for one kind of parameter group: DB parameter groups, or (``cluster=True``) DB
    cluster parameter groups. Both carry the same bulk-mode tags."""

    def __init__(self, client: Any, *, cluster: bool) -> None:
        self.client = client
        self.cluster = cluster
        self.kind = "DB cluster parameter group" if cluster else "parameter group"

    def describe(self, name: str) -> dict[str, Any] | None:
        try:
            if self.cluster:
                found = self.client.describe_db_cluster_parameter_groups(
                    DBClusterParameterGroupName=name
                )["DBClusterParameterGroups"]
            else:
                found = self.client.describe_db_parameter_groups(DBParameterGroupName=name)[
                    "DBParameterGroups"
                ]
        except self.client.exceptions.DBParameterGroupNotFoundFault:
            return None
        return dict(found[0]) if found else None

    def arn(self, name: str) -> str:
        found = self.describe(name)
        if found is None:
            raise BulkModeStateError(f"{self.kind} {name} not found")
        key = "DBClusterParameterGroupArn" if self.cluster else "DBParameterGroupArn"
        return str(found[key])

    def parameters(self, name: str) -> dict[str, ParameterInfo]:
        found: dict[str, ParameterInfo] = {}
        if self.cluster:
            pages = self.client.get_paginator("describe_db_cluster_parameters").paginate(
                DBClusterParameterGroupName=name
            )
        else:
            pages = self.client.get_paginator("describe_db_parameters").paginate(
                DBParameterGroupName=name
            )
        for page in pages:
            for p in page.get("Parameters", []):
                pname = p["ParameterName"]
                found[pname] = ParameterInfo(
                    name=pname,
                    # only a user-set value needs putting back; a reset restores the rest
                    value=p.get("ParameterValue") if p.get("Source") == "user" else None,
                    apply_type=str(p.get("ApplyType", "dynamic")),
                    modifiable=bool(p.get("IsModifiable", True)),
                )
        return found

    def modify(self, name: str, batch: list[dict[str, str]]) -> None:
        if self.cluster:
            self.client.modify_db_cluster_parameter_group(
                DBClusterParameterGroupName=name, Parameters=batch
            )
        else:
            self.client.modify_db_parameter_group(DBParameterGroupName=name, Parameters=batch)

    def reset(self, name: str, batch: list[dict[str, str]]) -> None:
        if self.cluster:
            self.client.reset_db_cluster_parameter_group(
                DBClusterParameterGroupName=name, ResetAllParameters=False, Parameters=batch
            )
        else:
            self.client.reset_db_parameter_group(
                DBParameterGroupName=name, ResetAllParameters=False, Parameters=batch
            )


class RdsBulkModeBackend:
    """Bulk mode for one RDS DB instance (RDS PostgreSQL/MySQL, or an Aurora writer instance)
    and/or one Aurora DB cluster (cluster-level parameters).

    Each setting goes where it lives: a parameter the instance's DB parameter group has is
    instance-level; one only the cluster's DB *cluster* parameter group has is cluster-level and
    is changed there, in place only (the cluster group must be custom and used by no other
    cluster). Each changed group carries its own tags: originals and leases.

    :param db_instance_identifier: the instance (Aurora: the writer), for instance-level settings.
    :param db_cluster_identifier: the Aurora cluster, for cluster-level settings.
    :param settings: overrides of the engine's default bulk settings (``None`` drops one), in RDS
        parameter units (e.g. ``max_wal_size`` in MB).
    :param strategy: ``auto`` (modify-in-place where possible, else swap), ``modify-in-place``,
        ``swap``.
    :param reboot_policy: ``never`` (default) or ``allowed``. Swap and static parameters need
        ``allowed``.
    :param expected_load_duration: warn when the maintenance window falls within it.
    """

    def __init__(
        self,
        db_instance_identifier: str | None = None,
        *,
        db_cluster_identifier: str | None = None,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
        settings: dict[str, Any] | None = None,
        strategy: str = "auto",
        reboot_policy: str = "never",
        expected_load_duration: timedelta | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not db_instance_identifier and not db_cluster_identifier:
            raise ValueError(
                "RDS bulk mode needs db_instance_identifier and/or db_cluster_identifier"
            )
        self.db_instance_identifier = db_instance_identifier
        self.db_cluster_identifier = db_cluster_identifier
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name
        self.setting_overrides = settings
        self.strategy = check_strategy(strategy)
        self.reboot_policy = check_reboot_policy(reboot_policy)
        self.expected_load_duration = expected_load_duration or timedelta(hours=2)
        self.clock = clock

    @cached_property
    def client(self) -> Any:
        from airflow.providers.amazon.aws.hooks.rds import RdsHook

        return RdsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name).conn

    @cached_property
    def db_groups(self) -> GroupApi:
        return GroupApi(self.client, cluster=False)

    @cached_property
    def cluster_groups(self) -> GroupApi:
        return GroupApi(self.client, cluster=True)

    @property
    def bulk_group_name(self) -> str:
        return f"bulkload-{self.db_instance_identifier}"

    # -- reads ------------------------------------------------------------------------------------
    def instance(self, ident: str | None = None) -> dict[str, Any]:
        found = self.client.describe_db_instances(
            DBInstanceIdentifier=ident or self.db_instance_identifier
        )
        return dict(found["DBInstances"][0])

    def cluster(self, ident: str | None = None) -> dict[str, Any]:
        found = self.client.describe_db_clusters(
            DBClusterIdentifier=ident or self.db_cluster_identifier
        )
        return dict(found["DBClusters"][0])

    def clusters_using(self, group: str) -> list[str]:
        users = []
        for page in self.client.get_paginator("describe_db_clusters").paginate():
            for clu in page.get("DBClusters", []):
                if clu.get("DBClusterParameterGroup") == group:
                    users.append(clu["DBClusterIdentifier"])
        return users

    @staticmethod
    def writer_of(cluster: dict[str, Any]) -> str | None:
        return next(
            (
                str(m["DBInstanceIdentifier"])
                for m in cluster.get("DBClusterMembers") or []
                if m.get("IsClusterWriter")
            ),
            None,
        )

    @staticmethod
    def current_group(instance: dict[str, Any]) -> tuple[str, str]:
        groups = instance.get("DBParameterGroups") or []
        if not groups:
            raise BulkModeStateError(
                f"{instance['DBInstanceIdentifier']} reports no DB parameter group"
            )
        return groups[0]["DBParameterGroupName"], groups[0].get("ParameterApplyStatus", "")

    def group_exists(self, name: str) -> bool:
        return self.db_groups.describe(name) is not None

    def group_arn(self, name: str, api: GroupApi | None = None) -> str:
        return (api or self.db_groups).arn(name)

    def tags(self, group: str, api: GroupApi | None = None) -> dict[str, str]:
        found = self.client.list_tags_for_resource(ResourceName=self.group_arn(group, api))
        return {t["Key"]: t["Value"] for t in found.get("TagList", [])}

    def parameters(self, group: str, api: GroupApi | None = None) -> dict[str, ParameterInfo]:
        return (api or self.db_groups).parameters(group)

    def instances_using(self, group: str) -> list[str]:
        users = []
        paginator = self.client.get_paginator("describe_db_instances")
        for page in paginator.paginate():
            for inst in page.get("DBInstances", []):
                names = [g["DBParameterGroupName"] for g in inst.get("DBParameterGroups") or []]
                if group in names:
                    users.append(inst["DBInstanceIdentifier"])
        return users

    def read_state(self, instance: dict[str, Any]) -> RdsBulkState:
        if self.group_exists(self.bulk_group_name):
            tags = self.tags(self.bulk_group_name)
            return RdsBulkState(self.bulk_group_name, tags, "swap", True, _parse_leases(tags))
        group, _ = self.current_group(instance)
        tags = self.tags(group)
        return RdsBulkState(group, tags, tags.get(MODE_TAG), False, _parse_leases(tags))

    # -- writes -----------------------------------------------------------------------------------
    def _add_tags(self, group: str, tags: dict[str, str], api: GroupApi | None = None) -> None:
        if tags:
            self.client.add_tags_to_resource(
                ResourceName=self.group_arn(group, api),
                Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
            )

    def _remove_tags(self, group: str, keys: list[str], api: GroupApi | None = None) -> None:
        if keys:
            self.client.remove_tags_from_resource(
                ResourceName=self.group_arn(group, api), TagKeys=keys
            )

    def _lease_tag(self, key: LeaseKey, ttl: float) -> dict[str, str]:
        expires = int(self.clock() + ttl) + 1
        return {LEASE_TAG + key.token: f"{expires} {tag_safe(key.describe())}"}

    def _modify(
        self,
        group: str,
        values: dict[str, str],
        info: dict[str, ParameterInfo],
        api: GroupApi | None = None,
    ) -> None:
        params = [
            {
                "ParameterName": name,
                "ParameterValue": value,
                "ApplyMethod": "pending-reboot" if info[name].static else "immediate",
            }
            for name, value in values.items()
        ]
        for batch in _chunks(params, MAX_PARAMETERS_PER_CALL):
            (api or self.db_groups).modify(group, batch)

    def _reset(
        self,
        group: str,
        names: list[str],
        info: dict[str, ParameterInfo],
        api: GroupApi | None = None,
    ) -> None:
        params = [
            {
                "ParameterName": name,
                "ApplyMethod": "pending-reboot"
                if name in info and info[name].static
                else "immediate",
            }
            for name in names
        ]
        for batch in _chunks(params, MAX_PARAMETERS_PER_CALL):
            (api or self.db_groups).reset(group, batch)

    def _drop_expired(
        self, state: RdsBulkState, keep: str | None = None, api: GroupApi | None = None
    ) -> list[Lease]:
        """Remove expired leases' tags (except ``keep``) and return the live ones."""
        live, expired = split_leases(state.leases, self.clock())
        stale = [lease for lease in expired if lease.token != keep]
        for lease in stale:
            log.warning(
                "bulk mode on %s: lease of %s expired; dropping it",
                state.holder_group,
                lease.holder or lease.token,
            )
        self._remove_tags(state.holder_group, [LEASE_TAG + lease.token for lease in stale], api)
        return live

    # -- checks -----------------------------------------------------------------------------------
    def _preflight(self, instance: dict[str, Any]) -> None:
        ident = self.db_instance_identifier
        status = instance.get("DBInstanceStatus")
        if status != "available":
            raise BulkModeStateError(
                f"{ident} is {status!r}; bulk mode changes an instance only when it is 'available'"
            )
        pending = {k: v for k, v in (instance.get("PendingModifiedValues") or {}).items() if v}
        if pending:
            raise BulkModeStateError(
                f"{ident} has pending modifications {sorted(pending)}; apply them (or wait for "
                "the maintenance window) before entering bulk mode, so a reboot we cause does not "
                "apply someone else's change"
            )
        _, apply_status = self.current_group(instance)
        if apply_status and apply_status != "in-sync":
            raise BulkModeStateError(
                f"{ident}'s parameter group is {apply_status!r}, not 'in-sync': a change is "
                "waiting to be applied; reboot or wait before entering bulk mode"
            )
        window = instance.get("PreferredMaintenanceWindow")
        now = datetime.fromtimestamp(self.clock(), tz=UTC)
        if window and maintenance_window_overlaps(window, now, self.expected_load_duration):
            log.warning(
                "%s: maintenance window %s falls within the expected load time (%s); a "
                "maintenance reboot during the load would apply pending changes and interrupt it",
                ident,
                window,
                self.expected_load_duration,
            )
        log.info(
            "%s: Multi-AZ is %s; bulk mode never changes it",
            ident,
            "on" if instance.get("MultiAZ") else "off",
        )

    def _split_settings(
        self,
        settings: dict[str, str],
        instance: dict[str, Any] | None,
        cluster: dict[str, Any] | None,
    ) -> tuple[dict[str, str], dict[str, str]]:
        """(instance-level, cluster-level) settings, asking RDS which group has which parameter.

        A parameter in the instance's DB parameter group is instance-level (Aurora lists some in
        both groups; the instance's value wins). One found only in the DB cluster parameter group
        is cluster-level. Without an instance the cluster's writer's group decides; without a
        cluster, the cluster of the instance (if any). Refuses, before any change, a setting
        whose level was not given, and names not found in either group. Only reads.
        """
        if not settings:
            return {}, {}
        if cluster is None and instance is not None and instance.get("DBClusterIdentifier"):
            cluster_seen: dict[str, Any] | None = self.cluster(instance["DBClusterIdentifier"])
        else:
            cluster_seen = cluster
        instance_seen = instance
        if instance_seen is None and cluster_seen is not None:
            writer = self.writer_of(cluster_seen)
            instance_seen = self.instance(writer) if writer else None
        instance_names: set[str] = set()
        instance_group = None
        if instance_seen is not None:
            instance_group, _ = self.current_group(instance_seen)
            instance_names = set(self.parameters(instance_group))
        cluster_names: set[str] = set()
        cluster_group = None
        if cluster_seen is not None:
            cluster_group = str(cluster_seen["DBClusterParameterGroup"])
            cluster_names = set(self.parameters(cluster_group, self.cluster_groups))
        on_instance = {n: v for n, v in settings.items() if n in instance_names}
        on_cluster = {
            n: v for n, v in settings.items() if n not in instance_names and n in cluster_names
        }
        unknown = sorted(set(settings) - set(on_instance) - set(on_cluster))
        if unknown:
            where = " or ".join(
                f"{kind} {g}"
                for kind, g in (
                    ("parameter group", instance_group),
                    ("DB cluster parameter group", cluster_group),
                )
                if g
            )
            raise BulkModeRefusedError(
                f"{where} has no parameter(s) {', '.join(unknown)}; check the names for this "
                "engine version"
            )
        if on_cluster and not self.db_cluster_identifier:
            assert cluster_seen is not None  # found in a cluster group
            ident = cluster_seen["DBClusterIdentifier"]
            raise BulkModeRefusedError(
                f"{', '.join(sorted(on_cluster))}: cluster-level parameter(s), found only in the "
                f"DB cluster parameter group {cluster_group} of cluster {ident}, not in "
                f"{instance_group}; pass db_cluster_identifier={ident!r} (to enter and exit "
                "alike) so bulk mode changes them there, or drop them from settings"
            )
        if on_instance and not self.db_instance_identifier:
            assert instance_seen is not None  # found in an instance's group
            hint = f"db_instance_identifier={instance_seen['DBInstanceIdentifier']!r} (the writer)"
            raise BulkModeRefusedError(
                f"{', '.join(sorted(on_instance))}: instance-level parameter(s), found in the "
                f"instances' DB parameter group {instance_group}, not only in the DB cluster "
                f"parameter group {cluster_group}; pass {hint} as well, or drop them from "
                "settings (a value of None drops a default)"
            )
        return on_instance, on_cluster

    def _check_parameters(
        self, settings: dict[str, str], info: dict[str, ParameterInfo], group: str
    ) -> list[str]:
        unknown = sorted(set(settings) - set(info))
        if unknown:
            raise BulkModeRefusedError(
                f"parameter group {group} has no parameter(s) {', '.join(unknown)}; check the "
                "names for this engine version"
            )
        fixed = sorted(n for n in settings if not info[n].modifiable)
        if fixed:
            raise BulkModeRefusedError(f"{', '.join(fixed)} cannot be modified on RDS")
        static = [n for n in settings if info[n].static]
        refuse_static(static, self.reboot_policy, str(self.db_instance_identifier))
        return static

    def _choose_strategy(self, group: str) -> str:
        ident = self.db_instance_identifier
        default = group.startswith("default.")
        shared_with = [] if default else [i for i in self.instances_using(group) if i != ident]
        in_place_ok = not default and not shared_with
        if self.strategy == "auto":
            if in_place_ok:
                return "modify-in-place"
            if self.reboot_policy == "allowed":
                return "swap"
        elif self.strategy == "modify-in-place" and in_place_ok:
            return "modify-in-place"
        elif self.strategy == "swap":
            if self.reboot_policy != "allowed":
                raise BulkModeRefusedError(
                    f"strategy 'swap' associates a copy of {group} with {ident}, which takes "
                    "effect only after a reboot (twice: enter and exit); pass "
                    "reboot_policy='allowed' to permit that, or use 'modify-in-place' with a "
                    "custom parameter group that only this instance uses"
                )
            return "swap"
        if default:
            raise BulkModeRefusedError(
                f"{ident} uses the default parameter group {group}, which cannot be modified. "
                f"Create a custom copy (aws rds copy-db-parameter-group --source-db-parameter-"
                f"group-identifier {group} ...), associate it with {ident} and reboot once in a "
                "maintenance window; bulk mode then modifies it in place without reboots. Or "
                "pass strategy='swap' with reboot_policy='allowed'."
            )
        raise BulkModeRefusedError(
            f"parameter group {group} is shared with {', '.join(shared_with)}; modifying it in "
            f"place would put those instances in bulk mode too. Give {ident} its own copy "
            "(associate + one reboot), or pass strategy='swap' with reboot_policy='allowed'."
        )

    # -- enter ------------------------------------------------------------------------------------
    def enter(self, key: LeaseKey, ttl: float) -> WaitSpec | None:
        """Take ``key``'s lease and make sure the bulk values are set; returns what to wait for.

        Every refusal (instance and cluster) comes before the first change."""
        instance = self.instance() if self.db_instance_identifier else None
        cluster = self.cluster() if self.db_cluster_identifier else None
        if instance is not None and cluster is not None:
            member_of = instance.get("DBClusterIdentifier")
            if member_of != cluster["DBClusterIdentifier"]:
                raise BulkModeRefusedError(
                    f"{self.db_instance_identifier} is not a member of cluster "
                    f"{self.db_cluster_identifier} (it belongs to {member_of or 'no cluster'})"
                )
        engine = str((instance or cluster or {})["Engine"])
        settings = resolve_bulk_settings(engine, self.setting_overrides, rds=True)
        on_instance, on_cluster = self._split_settings(settings, instance, cluster)
        cluster_plan = None
        if on_cluster:
            assert cluster is not None  # _split_settings refused cluster-level without a cluster
            cluster_plan = self._check_cluster(cluster, on_cluster)
        instance_spec = None
        if instance is not None and (on_instance or not on_cluster):
            instance_spec = self._enter_instance(key, ttl, instance, on_instance)
        cluster_spec = None
        if cluster_plan is not None:
            cluster_spec = self._enter_cluster(key, ttl, on_cluster, *cluster_plan)
        elif instance is None:
            log.info(
                "cluster %s: no bulk settings for engine %s; nothing to change",
                self.db_cluster_identifier,
                engine,
            )
        return merge_specs(instance_spec, cluster_spec)

    def _enter_instance(
        self, key: LeaseKey, ttl: float, instance: dict[str, Any], settings: dict[str, str]
    ) -> WaitSpec | None:
        state = self.read_state(instance)
        group, _ = self.current_group(instance)
        if state.mode == "swap" and group != self.bulk_group_name:
            # a swap that never got associated (enter died half-way) or a finished exit that did
            # not get to delete its copy: clean it up and start afresh
            self._delete_if_unused(self.bulk_group_name)
            state = self.read_state(instance)
        if state.mode is None:
            return self._enter_fresh(key, ttl, instance, settings)
        return self._join(key, ttl, state, settings)

    def _enter_fresh(
        self, key: LeaseKey, ttl: float, instance: dict[str, Any], settings: dict[str, str]
    ) -> WaitSpec | None:
        ident = self.db_instance_identifier
        self._preflight(instance)
        group, _ = self.current_group(instance)
        info = self.parameters(group)
        static = self._check_parameters(settings, info, group)
        if not settings:
            log.info(
                "%s: no bulk settings for engine %s; nothing to change", ident, instance["Engine"]
            )
            return None
        strategy = self._choose_strategy(group)
        log.info("%s: entering bulk mode (%s) with %s", ident, strategy, settings)
        base = {MODE_TAG: strategy, REBOOT_TAG: self.reboot_policy, **self._lease_tag(key, ttl)}
        if strategy == "modify-in-place":
            originals = {ORIGINAL_TAG + n: encode_tag_value(info[n].value) for n in settings}
            existing = self.tags(group)
            if len(existing) + len(base) + len(originals) > MAX_TAGS:
                raise BulkModeRefusedError(
                    f"parameter group {group} has {len(existing)} tags; recording bulk-mode state "
                    f"needs {len(base) + len(originals)} more (AWS allows {MAX_TAGS})"
                )
            # originals first: if we die after this, exit knows what to put back
            self._add_tags(group, {**originals, **base})
            self._modify(group, settings, info)
            return WaitSpec(ident, group, "enter", reboot_allowed=bool(static))
        # swap: copy (never a blank group: the user's custom settings must survive), override
        bulk = self.bulk_group_name
        self.client.copy_db_parameter_group(
            SourceDBParameterGroupIdentifier=group,
            TargetDBParameterGroupIdentifier=bulk,
            TargetDBParameterGroupDescription=tag_safe(
                f"airflow-bulkload bulk mode copy of {group} for {ident}"
            ),
            Tags=[{"Key": k, "Value": v} for k, v in {**base, SWAPPED_FROM_TAG: group}.items()],
        )
        self._modify(bulk, settings, info)
        self.client.modify_db_instance(
            DBInstanceIdentifier=ident, DBParameterGroupName=bulk, ApplyImmediately=True
        )
        return WaitSpec(ident, bulk, "enter", reboot_allowed=True)

    def _join(
        self, key: LeaseKey, ttl: float, state: RdsBulkState, settings: dict[str, str]
    ) -> WaitSpec | None:
        """Bulk mode is already on (another holder, or our own earlier attempt): add our lease and
        set any of our settings not yet set."""
        ident = self.db_instance_identifier
        live = self._drop_expired(state, keep=key.token)
        others = [lease for lease in live if lease.token != key.token]
        log.info(
            "%s: bulk mode already on (%s); %d other holder(s)", ident, state.mode, len(others)
        )
        group = state.holder_group
        info = self.parameters(group)
        if state.mode == "swap":
            missing = {n: v for n, v in settings.items() if n in info and info[n].value != v}
            missing.update({n: v for n, v in settings.items() if n not in info})
        else:
            missing = {n: v for n, v in settings.items() if n not in state.originals}
        self._check_parameters(missing, info, group)
        if len(state.tags) + 1 + len(missing) > MAX_TAGS:
            raise BulkModeRefusedError(f"too many bulk-mode holders on {group} (tag limit)")
        new_tags = self._lease_tag(key, ttl)
        if missing and state.mode != "swap":
            new_tags.update({ORIGINAL_TAG + n: encode_tag_value(info[n].value) for n in missing})
        self._add_tags(group, new_tags)
        if missing:
            log.info("%s: adding bulk settings %s", ident, missing)
            self._modify(group, missing, info)
        reboot_ok = state.tags.get(REBOOT_TAG) == "allowed" or self.reboot_policy == "allowed"
        return WaitSpec(ident, group, "enter", reboot_allowed=reboot_ok)

    # -- cluster (Aurora cluster-level parameters; modify-in-place only) --------------------------
    def _cluster_state(self, group: str) -> RdsBulkState:
        tags = self.tags(group, self.cluster_groups)
        return RdsBulkState(group, tags, tags.get(MODE_TAG), False, _parse_leases(tags))

    def _check_cluster(
        self, cluster: dict[str, Any], settings: dict[str, str]
    ) -> tuple[str, dict[str, ParameterInfo]]:
        """Every refusal for the cluster part, before any change: default or shared cluster
        group, a cluster not ready, unmodifiable or (without a reboot policy) static parameters,
        no room for the tags. Returns the group and its parameters."""
        ident = str(self.db_cluster_identifier)
        group = str(cluster["DBClusterParameterGroup"])
        if group.startswith("default."):
            raise BulkModeRefusedError(
                f"cluster {ident} uses the default DB cluster parameter group {group}, which "
                "cannot be modified, so cluster-level parameters "
                f"({', '.join(sorted(settings))}) cannot be set in place. Create a custom copy "
                "(aws rds copy-db-cluster-parameter-group --source-db-cluster-parameter-group-"
                f"identifier {group} ...), associate it with the cluster (aws rds modify-db-cluster "
                "--db-cluster-parameter-group-name ...) and reboot its instances once in a "
                "maintenance window; bulk mode then modifies it in place. Or drop these settings."
            )
        shared_with = [c for c in self.clusters_using(group) if c != ident]
        if shared_with:
            raise BulkModeRefusedError(
                f"DB cluster parameter group {group} is shared with cluster(s) "
                f"{', '.join(shared_with)}; modifying it in place would put those clusters in bulk "
                f"mode too. Give cluster {ident} its own copy (associate + one reboot of its "
                "instances), or drop the cluster-level settings."
            )
        info = self.parameters(group, self.cluster_groups)
        fixed = sorted(n for n in settings if not info[n].modifiable)
        if fixed:
            raise BulkModeRefusedError(f"{', '.join(fixed)} cannot be modified on RDS")
        refuse_static(
            [n for n in settings if info[n].static], self.reboot_policy, f"cluster {ident}"
        )
        state = self._cluster_state(group)
        if state.mode is None:
            # fresh: the cluster must be settled, so a reboot we cause applies only our change
            status = cluster.get("Status")
            if status != "available":
                raise BulkModeStateError(
                    f"cluster {ident} is {status!r}; bulk mode changes a cluster only when it is "
                    "'available'"
                )
            unsettled = {
                m["DBInstanceIdentifier"]: m.get("DBClusterParameterGroupStatus")
                for m in cluster.get("DBClusterMembers") or []
                if m.get("DBClusterParameterGroupStatus") != "in-sync"
            }
            if unsettled:
                raise BulkModeStateError(
                    f"cluster {ident}: DB cluster parameter group {group} is not 'in-sync' on "
                    f"{unsettled}; a change is waiting to be applied; reboot or wait before "
                    "entering bulk mode"
                )
        missing = [n for n in settings if n not in state.originals]
        needed = 1 + len(missing) + (2 if state.mode is None else 0)
        if len(state.tags) + needed > MAX_TAGS:
            raise BulkModeRefusedError(
                f"DB cluster parameter group {group} has {len(state.tags)} tags; recording "
                f"bulk-mode state needs {needed} more (AWS allows {MAX_TAGS})"
            )
        return group, info

    def _enter_cluster(
        self,
        key: LeaseKey,
        ttl: float,
        settings: dict[str, str],
        group: str,
        info: dict[str, ParameterInfo],
    ) -> WaitSpec:
        ident = self.db_cluster_identifier
        api = self.cluster_groups
        state = self._cluster_state(group)
        new_tags: dict[str, str] = {}
        if state.mode is None:
            log.info("cluster %s: entering bulk mode (modify-in-place) with %s", ident, settings)
            new_tags.update({MODE_TAG: "modify-in-place", REBOOT_TAG: self.reboot_policy})
        else:
            live = self._drop_expired(state, keep=key.token, api=api)
            others = [lease for lease in live if lease.token != key.token]
            log.info("cluster %s: bulk mode already on; %d other holder(s)", ident, len(others))
        missing = {n: v for n, v in settings.items() if n not in state.originals}
        new_tags.update({ORIGINAL_TAG + n: encode_tag_value(info[n].value) for n in missing})
        new_tags.update(self._lease_tag(key, ttl))
        # originals (and the lease) first: if we die after this, exit knows what to put back
        self._add_tags(group, new_tags, api)
        if missing:
            self._modify(group, missing, info, api)
        reboot_ok = state.tags.get(REBOOT_TAG) == "allowed" or self.reboot_policy == "allowed"
        return WaitSpec(
            None,
            None,
            "enter",
            reboot_allowed=reboot_ok,
            db_cluster_identifier=ident,
            cluster_parameter_group=group,
        )

    def _cluster_holder_group(self) -> str | None:
        """The cluster's custom group (the one that can carry bulk-mode tags), else ``None``."""
        group = str(self.cluster()["DBClusterParameterGroup"])
        return None if group.startswith("default.") else group

    # -- renew ------------------------------------------------------------------------------------
    def renew(self, key: LeaseKey, ttl: float) -> bool:
        """Extend ``key``'s lease on every group (instance, cluster) where it holds one; ``False``
        when it holds none (expired and dropped, or never)."""
        held = False
        if self.db_instance_identifier:
            state = self.read_state(self.instance())
            if any(lease.token == key.token for lease in state.leases):
                self._add_tags(state.holder_group, self._lease_tag(key, ttl))
                held = True
        if self.db_cluster_identifier:
            group = self._cluster_holder_group()
            if group and any(
                lease.token == key.token for lease in self._cluster_state(group).leases
            ):
                self._add_tags(group, self._lease_tag(key, ttl), self.cluster_groups)
                held = True
        return held

    # -- exit -------------------------------------------------------------------------------------
    def exit(self, key: LeaseKey) -> WaitSpec | None:
        """Release ``key``'s lease on the instance's and/or the cluster's group; where no live
        lease is left, restore. Safe when enter never ran or failed half-way: restores what was
        changed, does nothing when nothing was. A failure on one part does not skip the other."""
        parts: list[Callable[[LeaseKey], WaitSpec | None]] = []
        if self.db_instance_identifier:
            parts.append(self._exit_instance)
        if self.db_cluster_identifier:
            parts.append(self._exit_cluster)
        specs: list[WaitSpec | None] = []
        errors: list[Exception] = []
        for part in parts:
            try:
                specs.append(part(key))
            except Exception as exc:  # restore the other part too, then report the first failure
                log.error("bulk mode exit (%s) failed: %r", part.__name__, exc)
                errors.append(exc)
        if errors:
            raise errors[0]
        instance_spec = specs[0] if self.db_instance_identifier else None
        cluster_spec = specs[-1] if self.db_cluster_identifier else None
        return merge_specs(instance_spec, cluster_spec)

    def _release(self, key: LeaseKey, state: RdsBulkState, api: GroupApi, label: str) -> bool:
        """Drop ``key``'s lease and the expired ones; ``True`` when other live holders remain."""
        if any(lease.token == key.token for lease in state.leases):
            self._remove_tags(state.holder_group, [LEASE_TAG + key.token], api)
            state.leases = [lease for lease in state.leases if lease.token != key.token]
        live = self._drop_expired(state, api=api)
        if live and state.mode is not None:
            log.info(
                "%s: %d other holder(s) still in bulk mode (%s); leaving the bulk values on",
                label,
                len(live),
                ", ".join(lease.holder or lease.token for lease in live),
            )
            return True
        return False

    def _restore_in_place(self, state: RdsBulkState, api: GroupApi, label: str) -> bool | None:
        """Put the recorded originals back into ``state.holder_group``; ``None`` when none are
        recorded, else whether a static one needs a reboot."""
        originals = state.originals
        if not originals:
            log.info("%s: not in bulk mode; nothing to restore", label)
            return None
        group = state.holder_group
        info = self.parameters(group, api)
        log.info("%s: last holder left; restoring %s", label, originals)
        to_set = {n: v for n, v in originals.items() if v is not None}
        to_reset = [n for n, v in originals.items() if v is None]
        if to_set:
            self._modify(group, to_set, info, api)
        if to_reset:
            self._reset(group, to_reset, info, api)
        # only now forget the originals: dying before this line means the next exit restores again
        self._remove_tags(
            group,
            [k for k in state.tags if k.startswith(ORIGINAL_TAG)] + [MODE_TAG, REBOOT_TAG],
            api,
        )
        return any(n in info and info[n].static for n in originals)

    def _exit_instance(self, key: LeaseKey) -> WaitSpec | None:
        ident = self.db_instance_identifier
        instance = self.instance()
        state = self.read_state(instance)
        if self._release(key, state, self.db_groups, str(ident)):
            return None
        if state.mode == "swap":
            return self._exit_swap(instance, state)
        needs_reboot = self._restore_in_place(state, self.db_groups, str(ident))
        if needs_reboot is None:
            return None
        return WaitSpec(ident, state.holder_group, "exit", reboot_allowed=needs_reboot)

    def _exit_cluster(self, key: LeaseKey) -> WaitSpec | None:
        ident = self.db_cluster_identifier
        label = f"cluster {ident}"
        group = self._cluster_holder_group()
        if group is None:
            log.info("%s: uses a default DB cluster parameter group; nothing to restore", label)
            return None
        state = self._cluster_state(group)
        if self._release(key, state, self.cluster_groups, label):
            return None
        needs_reboot = self._restore_in_place(state, self.cluster_groups, label)
        if needs_reboot is None:
            return None
        return WaitSpec(
            None,
            None,
            "exit",
            reboot_allowed=needs_reboot,
            db_cluster_identifier=ident,
            cluster_parameter_group=group,
        )

    def _exit_swap(self, instance: dict[str, Any], state: RdsBulkState) -> WaitSpec | None:
        ident = self.db_instance_identifier
        bulk = self.bulk_group_name
        original = state.tags.get(SWAPPED_FROM_TAG)
        group, _ = self.current_group(instance)
        if group != bulk:
            log.info("%s: uses %s, not the bulk copy; removing the unused copy", ident, group)
            self._delete_if_unused(bulk)
            return None
        if not original:
            raise BulkModeStateError(
                f"{bulk} carries no {SWAPPED_FROM_TAG} tag; cannot tell which group to return "
                f"{ident} to. Associate the right group by hand and delete {bulk}."
            )
        log.info("%s: last holder left; swapping back to %s (reboot follows)", ident, original)
        self.client.modify_db_instance(
            DBInstanceIdentifier=ident, DBParameterGroupName=original, ApplyImmediately=True
        )
        # swap was only ever entered with reboots allowed; going back needs one too
        return WaitSpec(ident, original, "exit", reboot_allowed=True, cleanup_group=bulk)

    def _delete_if_unused(self, group: str) -> bool:
        if not self.group_exists(group):
            return False
        users = self.instances_using(group)
        if users:
            log.warning("%s is still used by %s; not deleting it", group, ", ".join(users))
            return False
        self.client.delete_db_parameter_group(DBParameterGroupName=group)
        log.info("deleted bulk parameter group %s", group)
        return True

    # -- waiting ----------------------------------------------------------------------------------
    def check(self, spec: WaitSpec) -> str:
        """One poll: ``ready``, ``pending-reboot`` or ``wait`` (both parts of the spec)."""
        statuses = []
        if spec.needs_instance:
            instance = self.instance(spec.db_instance_identifier)
            statuses.append(evaluate_instance(instance, str(spec.parameter_group)))
        if spec.needs_cluster:
            cluster = self.cluster(spec.db_cluster_identifier)
            pending = cluster_members_pending_reboot(cluster)
            members = {m: str(self.instance(m).get("DBInstanceStatus")) for m in pending}
            if pending:
                # look again after the members: one seen rebooting is waited for, not rebooted
                cluster = self.cluster(spec.db_cluster_identifier)
            statuses.append(evaluate_cluster(cluster, str(spec.cluster_parameter_group), members))
        return combine_status(*statuses)

    def reboot(self, spec: WaitSpec) -> WaitSpec:
        """Reboot what reports ``pending-reboot``: the instance, and every cluster member still
        waiting for the cluster group (Aurora applies static cluster parameters per instance)."""
        if not spec.reboot_allowed:
            raise BulkModeStateError(
                f"{spec.target}: parameter group {spec.groups} is 'pending-reboot' and the reboot "
                "policy does not allow a reboot; reboot it in a maintenance window"
            )
        if spec.rebooted:
            raise BulkModeStateError(f"{spec.target} is still 'pending-reboot' after a reboot")
        targets: list[str] = []
        if spec.needs_instance:
            instance = self.instance(spec.db_instance_identifier)
            if evaluate_instance(instance, str(spec.parameter_group)) == "pending-reboot":
                targets.append(str(spec.db_instance_identifier))
        if spec.needs_cluster:
            cluster = self.cluster(spec.db_cluster_identifier)
            targets += [m for m in cluster_members_pending_reboot(cluster) if m not in targets]
        for ident in targets:
            log.info("%s: rebooting to apply %s", ident, spec.groups)
            self.client.reboot_db_instance(DBInstanceIdentifier=ident)
        spec.rebooted = True
        return spec

    def finish(self, spec: WaitSpec) -> None:
        """After the wait: drop the swap's bulk copy once nothing uses it."""
        if spec.cleanup_group:
            self._delete_if_unused(spec.cleanup_group)

    def wait(self, spec: WaitSpec, *, delay: float, max_attempts: int) -> None:
        """Poll until ready, rebooting once when the group is pending-reboot and that is allowed."""
        for _ in range(max_attempts):
            status = self.check(spec)
            if status == "ready":
                self.finish(spec)
                return
            if status == "pending-reboot":
                spec = self.reboot(spec)
            time.sleep(delay)
        raise BulkModeStateError(
            f"{spec.target}: parameter group {spec.groups} not in-sync "
            f"after {max_attempts} checks {delay}s apart"
        )
