"""Parameter groups as RDS bulk mode uses them: values, and the tags that hold its state.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from airflow_bulkload.bulk_mode.policy import (
    KNOWN_STATIC_SETTINGS,
    TAG_PREFIX,
    Lease,
    LeaseKey,
    decode_tag_value,
    split_leases,
    tag_safe,
)
from airflow_bulkload.bulk_mode.status import describe
from airflow_bulkload.exceptions import BulkModeStateError

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
    """One parameter of a group, as DescribeDBParameters reports it."""

    name: str
    value: str | None  # None: not set in the group (engine default applies)
    apply_type: str  # "static" | "dynamic"
    modifiable: bool

    @property
    def static(self) -> bool:
        return self.apply_type == "static" or self.name in KNOWN_STATIC_SETTINGS


@dataclass
class RdsBulkState:
    """Bulk mode's state as the tags of ``holder_group`` record it."""

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


def parse_leases(tags: dict[str, str]) -> list[Lease]:
    """The leases recorded in ``tags``."""
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
    """One kind of parameter group: DB parameter groups, or (``cluster=True``) DB cluster ones.

    Both kinds carry the same bulk-mode tags, so everything bulk mode does to one group lives
    here: read its parameters and tags, change values in batches, take and drop leases, restore
    the recorded originals.
    """

    def __init__(
        self, client: Any, *, cluster: bool, clock: Callable[[], float] = time.time
    ) -> None:
        self.client = client
        self.cluster = cluster
        self.clock = clock
        self.kind = "DB cluster parameter group" if cluster else "parameter group"

    # -- reads ------------------------------------------------------------------------------------
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

    def exists(self, name: str) -> bool:
        return self.describe(name) is not None

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

    def tags(self, name: str) -> dict[str, str]:
        found = self.client.list_tags_for_resource(ResourceName=self.arn(name))
        return {t["Key"]: t["Value"] for t in found.get("TagList", [])}

    def state(self, name: str) -> RdsBulkState:
        """The state ``name``'s tags record (modify-in-place, or none)."""
        tags = self.tags(name)
        return RdsBulkState(name, tags, tags.get(MODE_TAG), False, parse_leases(tags))

    # -- writes -----------------------------------------------------------------------------------
    def add_tags(self, name: str, tags: dict[str, str]) -> None:
        if tags:
            self.client.add_tags_to_resource(
                ResourceName=self.arn(name),
                Tags=[{"Key": k, "Value": v} for k, v in tags.items()],
            )

    def remove_tags(self, name: str, keys: list[str]) -> None:
        if keys:
            self.client.remove_tags_from_resource(ResourceName=self.arn(name), TagKeys=keys)

    def modify(self, name: str, values: dict[str, str], info: dict[str, ParameterInfo]) -> None:
        """Set ``values``: static ones at the next reboot, dynamic ones at once."""
        params = [
            {
                "ParameterName": pname,
                "ParameterValue": value,
                "ApplyMethod": "pending-reboot" if info[pname].static else "immediate",
            }
            for pname, value in values.items()
        ]
        for batch in _chunks(params, MAX_PARAMETERS_PER_CALL):
            if self.cluster:
                self.client.modify_db_cluster_parameter_group(
                    DBClusterParameterGroupName=name, Parameters=batch
                )
            else:
                self.client.modify_db_parameter_group(DBParameterGroupName=name, Parameters=batch)

    def reset(self, name: str, names: list[str], info: dict[str, ParameterInfo]) -> None:
        """Reset ``names`` to the engine default (unset them in the group)."""
        params = [
            {
                "ParameterName": pname,
                "ApplyMethod": "pending-reboot"
                if pname in info and info[pname].static
                else "immediate",
            }
            for pname in names
        ]
        for batch in _chunks(params, MAX_PARAMETERS_PER_CALL):
            if self.cluster:
                self.client.reset_db_cluster_parameter_group(
                    DBClusterParameterGroupName=name, ResetAllParameters=False, Parameters=batch
                )
            else:
                self.client.reset_db_parameter_group(
                    DBParameterGroupName=name, ResetAllParameters=False, Parameters=batch
                )

    # -- leases -----------------------------------------------------------------------------------
    def lease_tag(self, key: LeaseKey, ttl: float) -> dict[str, str]:
        """The tag recording ``key``'s lease for ``ttl`` seconds from now."""
        expires = int(self.clock() + ttl) + 1
        return {LEASE_TAG + key.token: f"{expires} {tag_safe(key.describe())}"}

    def drop_expired(self, state: RdsBulkState, keep: str | None = None) -> list[Lease]:
        """Remove expired leases' tags (except ``keep``) and return the live ones."""
        live, expired = split_leases(state.leases, self.clock())
        stale = [lease for lease in expired if lease.token != keep]
        for lease in stale:
            log.warning(
                "bulk mode on %s: lease of %s expired; dropping it",
                state.holder_group,
                lease.holder or lease.token,
            )
        self.remove_tags(state.holder_group, [LEASE_TAG + lease.token for lease in stale])
        return live

    def release(self, key: LeaseKey, state: RdsBulkState, label: str) -> bool:
        """Drop ``key``'s lease and the expired ones; ``True`` when other live holders remain."""
        if any(lease.token == key.token for lease in state.leases):
            self.remove_tags(state.holder_group, [LEASE_TAG + key.token])
            state.leases = [lease for lease in state.leases if lease.token != key.token]
        live = self.drop_expired(state)
        if live and state.mode is not None:
            log.info(
                "%s: %d other holder(s) still in bulk mode (%s); leaving the bulk values on",
                label,
                len(live),
                ", ".join(lease.holder or lease.token for lease in live),
            )
            return True
        return False

    def restore_in_place(self, state: RdsBulkState, label: str) -> bool | None:
        """Put the recorded originals back into ``state.holder_group``.

        ``None`` when none are recorded, else whether a static one needs a reboot.
        """
        originals = state.originals
        if not originals:
            log.info("%s: not in bulk mode; nothing to restore", label)
            return None
        group = state.holder_group
        info = self.parameters(group)
        log.info("%s: last holder left; restoring %s", label, originals)
        to_set = {n: v for n, v in originals.items() if v is not None}
        to_reset = [n for n, v in originals.items() if v is None]
        if to_set:
            self.modify(group, to_set, info)
        if to_reset:
            self.reset(group, to_reset, info)
        # only now forget the originals: dying before this line means the next exit restores again
        self.remove_tags(
            group, [k for k in state.tags if k.startswith(ORIGINAL_TAG)] + [MODE_TAG, REBOOT_TAG]
        )
        return any(n in info and info[n].static for n in originals)


class GroupedResource:
    """One RDS resource whose parameter group bulk mode changes: a DB instance or an Aurora cluster.

    :param client: a boto3 RDS client.
    :param groups: the parameter group calls for the resource's kind of group.
    :param ident: the instance's or cluster's identifier.
    :param reboot_policy: ``never`` or ``allowed`` (checked by the caller).
    """

    #: ``instance`` or ``cluster``: what :meth:`describe` reads
    kind: ClassVar[str]

    def __init__(self, client: Any, groups: GroupApi, ident: str, *, reboot_policy: str) -> None:
        self.client = client
        self.groups = groups
        self.ident = ident
        self.reboot_policy = reboot_policy

    def describe(self) -> dict[str, Any]:
        return describe(self.client, self.kind, self.ident)
