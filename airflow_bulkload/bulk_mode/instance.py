"""Instance-level bulk settings: the DB parameter group of one RDS instance (Aurora: the writer).

Two strategies: ``modify-in-place`` changes the instance's own custom group (originals recorded
in its tags), ``swap`` associates a bulk copy ``bulkload-<instance>`` of the group (needs a reboot
on enter and on exit). See :mod:`~airflow_bulkload.bulk_mode.parameter_groups` for the tags.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from airflow_bulkload.bulk_mode.parameter_groups import (
    MAX_TAGS,
    MODE_TAG,
    ORIGINAL_TAG,
    REBOOT_TAG,
    SWAPPED_FROM_TAG,
    GroupApi,
    GroupedResource,
    ParameterInfo,
    RdsBulkState,
    parse_leases,
)
from airflow_bulkload.bulk_mode.policy import (
    BulkModeOptions,
    LeaseKey,
    encode_tag_value,
    maintenance_window_overlaps,
    refuse_static,
    tag_safe,
)
from airflow_bulkload.bulk_mode.status import WaitSpec
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

log = logging.getLogger(__name__)


def current_group(instance: dict[str, Any]) -> tuple[str, str]:
    """The instance's DB parameter group and its ParameterApplyStatus."""
    groups = instance.get("DBParameterGroups") or []
    if not groups:
        raise BulkModeStateError(
            f"{instance['DBInstanceIdentifier']} reports no DB parameter group"
        )
    return groups[0]["DBParameterGroupName"], groups[0].get("ParameterApplyStatus", "")


def instances_using(client: Any, group: str) -> list[str]:
    """Every instance whose DB parameter group is ``group``."""
    users = []
    for page in client.get_paginator("describe_db_instances").paginate():
        for inst in page.get("DBInstances", []):
            names = [g["DBParameterGroupName"] for g in inst.get("DBParameterGroups") or []]
            if group in names:
                users.append(inst["DBInstanceIdentifier"])
    return users


def delete_group_if_unused(client: Any, groups: GroupApi, group: str) -> bool:
    """Delete the DB parameter group ``group`` unless some instance still uses it."""
    if not groups.exists(group):
        return False
    users = instances_using(client, group)
    if users:
        log.warning("%s is still used by %s; not deleting it", group, ", ".join(users))
        return False
    client.delete_db_parameter_group(DBParameterGroupName=group)
    log.info("deleted bulk parameter group %s", group)
    return True


class InstanceBulkMode(GroupedResource):
    """Enter, renew and exit bulk mode in one instance's DB parameter group.

    :param client: a boto3 RDS client.
    :param groups: the DB parameter group calls (:class:`GroupApi` with ``cluster=False``).
    :param ident: the DB instance identifier.
    :param options: the strategy, the reboot policy (both checked by the caller) and the
        expected load duration, which the maintenance window is checked against.
    """

    kind = "instance"

    def __init__(
        self,
        client: Any,
        groups: GroupApi,
        ident: str,
        options: BulkModeOptions,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(client, groups, ident, reboot_policy=options.reboot_policy)
        self.strategy = options.strategy
        self.expected_load_duration = options.load_duration
        self.clock = clock

    @property
    def bulk_group_name(self) -> str:
        return f"bulkload-{self.ident}"

    def read_state(self, instance: dict[str, Any]) -> RdsBulkState:
        """The state of bulk mode: the swap's bulk copy when it exists, else the own group."""
        bulk = self.bulk_group_name
        if self.groups.exists(bulk):
            tags = self.groups.tags(bulk)
            return RdsBulkState(bulk, tags, "swap", True, parse_leases(tags))
        group, _ = current_group(instance)
        return self.groups.state(group)

    # -- checks -----------------------------------------------------------------------------------
    def _preflight(self, instance: dict[str, Any]) -> None:
        ident = self.ident
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
        _, apply_status = current_group(instance)
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
        refuse_static(static, self.reboot_policy, self.ident)
        return static

    def _choose_strategy(self, group: str) -> str:
        ident = self.ident
        default = group.startswith("default.")
        shared_with = (
            [] if default else [i for i in instances_using(self.client, group) if i != ident]
        )
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
    def enter(
        self, key: LeaseKey, ttl: float, instance: dict[str, Any], settings: dict[str, str]
    ) -> WaitSpec | None:
        """Take ``key``'s lease and set ``settings`` (instance-level) in the instance's group."""
        state = self.read_state(instance)
        group, _ = current_group(instance)
        if state.mode == "swap" and group != self.bulk_group_name:
            # a swap that never got associated (enter died half-way) or a finished exit that did
            # not get to delete its copy: clean it up and start afresh
            self.delete_if_unused(self.bulk_group_name)
            state = self.read_state(instance)
        if state.mode is None:
            return self._enter_fresh(key, ttl, instance, settings)
        return self._join(key, ttl, state, settings)

    def _enter_fresh(
        self, key: LeaseKey, ttl: float, instance: dict[str, Any], settings: dict[str, str]
    ) -> WaitSpec | None:
        ident = self.ident
        self._preflight(instance)
        group, _ = current_group(instance)
        info = self.groups.parameters(group)
        static = self._check_parameters(settings, info, group)
        if not settings:
            log.info(
                "%s: no bulk settings for engine %s; nothing to change", ident, instance["Engine"]
            )
            return None
        strategy = self._choose_strategy(group)
        log.info("%s: entering bulk mode (%s) with %s", ident, strategy, settings)
        base = {
            MODE_TAG: strategy,
            REBOOT_TAG: self.reboot_policy,
            **self.groups.lease_tag(key, ttl),
        }
        if strategy == "modify-in-place":
            originals = {ORIGINAL_TAG + n: encode_tag_value(info[n].value) for n in settings}
            existing = self.groups.tags(group)
            if len(existing) + len(base) + len(originals) > MAX_TAGS:
                raise BulkModeRefusedError(
                    f"parameter group {group} has {len(existing)} tags; recording bulk-mode state "
                    f"needs {len(base) + len(originals)} more (AWS allows {MAX_TAGS})"
                )
            # originals first: if we die after this, exit knows what to put back
            self.groups.add_tags(group, {**originals, **base})
            self.groups.modify(group, settings, info)
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
        self.groups.modify(bulk, settings, info)
        self.client.modify_db_instance(
            DBInstanceIdentifier=ident, DBParameterGroupName=bulk, ApplyImmediately=True
        )
        return WaitSpec(ident, bulk, "enter", reboot_allowed=True)

    def _join(
        self, key: LeaseKey, ttl: float, state: RdsBulkState, settings: dict[str, str]
    ) -> WaitSpec | None:
        """Join bulk mode that is already on (another holder, or our own earlier attempt).

        Adds our lease and sets any of our settings not yet set.
        """
        ident = self.ident
        live = self.groups.drop_expired(state, keep=key.token)
        others = [lease for lease in live if lease.token != key.token]
        log.info(
            "%s: bulk mode already on (%s); %d other holder(s)", ident, state.mode, len(others)
        )
        group = state.holder_group
        info = self.groups.parameters(group)
        if state.mode == "swap":
            missing = {n: v for n, v in settings.items() if n in info and info[n].value != v}
            missing.update({n: v for n, v in settings.items() if n not in info})
        else:
            missing = {n: v for n, v in settings.items() if n not in state.originals}
        self._check_parameters(missing, info, group)
        if len(state.tags) + 1 + len(missing) > MAX_TAGS:
            raise BulkModeRefusedError(f"too many bulk-mode holders on {group} (tag limit)")
        new_tags = self.groups.lease_tag(key, ttl)
        if missing and state.mode != "swap":
            new_tags.update({ORIGINAL_TAG + n: encode_tag_value(info[n].value) for n in missing})
        self.groups.add_tags(group, new_tags)
        if missing:
            log.info("%s: adding bulk settings %s", ident, missing)
            self.groups.modify(group, missing, info)
        reboot_ok = state.tags.get(REBOOT_TAG) == "allowed" or self.reboot_policy == "allowed"
        return WaitSpec(ident, group, "enter", reboot_allowed=reboot_ok)

    # -- renew ------------------------------------------------------------------------------------
    def renew(self, key: LeaseKey, ttl: float) -> bool:
        """Extend ``key``'s lease; ``False`` when it holds none here."""
        state = self.read_state(self.describe())
        if not any(lease.token == key.token for lease in state.leases):
            return False
        self.groups.add_tags(state.holder_group, self.groups.lease_tag(key, ttl))
        return True

    # -- exit -------------------------------------------------------------------------------------
    def exit(self, key: LeaseKey) -> WaitSpec | None:
        """Release ``key``'s lease; restore the originals when no live lease is left."""
        ident = self.ident
        instance = self.describe()
        state = self.read_state(instance)
        if self.groups.release(key, state, ident):
            return None
        if state.mode == "swap":
            return self._exit_swap(instance, state)
        needs_reboot = self.groups.restore_in_place(state, ident)
        if needs_reboot is None:
            return None
        return WaitSpec(ident, state.holder_group, "exit", reboot_allowed=needs_reboot)

    def _exit_swap(self, instance: dict[str, Any], state: RdsBulkState) -> WaitSpec | None:
        ident = self.ident
        bulk = self.bulk_group_name
        original = state.tags.get(SWAPPED_FROM_TAG)
        group, _ = current_group(instance)
        if group != bulk:
            log.info("%s: uses %s, not the bulk copy; removing the unused copy", ident, group)
            self.delete_if_unused(bulk)
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

    def delete_if_unused(self, group: str) -> bool:
        """Delete the DB parameter group ``group`` unless some instance still uses it."""
        return delete_group_if_unused(self.client, self.groups, group)
