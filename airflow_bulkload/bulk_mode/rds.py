"""RdsBulkModeBackend: bulk mode on an RDS/Aurora instance and/or Aurora cluster, always undone.

It splits the settings by where each lives (instance or cluster parameter group), refuses before
the first change, and hands each part to :class:`~airflow_bulkload.bulk_mode.instance.
InstanceBulkMode` or :class:`~airflow_bulkload.bulk_mode.cluster.ClusterBulkMode`; then it waits
(:mod:`~airflow_bulkload.bulk_mode.status`) until the change is in effect, rebooting when that is
allowed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from functools import cached_property
from typing import Any

from airflow_bulkload.bulk_mode.cluster import ClusterBulkMode
from airflow_bulkload.bulk_mode.instance import (
    InstanceBulkMode,
    current_group,
    delete_group_if_unused,
)
from airflow_bulkload.bulk_mode.parameter_groups import GroupApi
from airflow_bulkload.bulk_mode.policy import (
    BulkModeOptions,
    LeaseKey,
    resolve_bulk_settings,
)
from airflow_bulkload.bulk_mode.status import (
    Status,
    WaitSpec,
    cluster_members_pending_reboot,
    describe,
    evaluate_instance,
    merge_specs,
    poll,
    writer_of,
)
from airflow_bulkload.bulk_mode.target import BulkModeTarget
from airflow_bulkload.connections import aws_client
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

log = logging.getLogger(__name__)


class RdsBulkModeBackend:
    """Bulk mode for one RDS DB instance and/or one Aurora DB cluster.

    The instance is an RDS PostgreSQL/MySQL instance or an Aurora writer; the cluster takes the
    Aurora cluster-level parameters. Each setting goes where it lives: a parameter the instance's
    DB parameter group has is instance-level; one only the cluster's DB *cluster* parameter group
    has is cluster-level and is changed there, in place only (the cluster group must be custom
    and used by no other cluster). Each changed group carries its own tags: originals and leases.

    :param target: the instance (Aurora: the writer), for instance-level settings, and/or the
        Aurora cluster, for cluster-level settings; the AWS connection and region.
    :param options: the settings, in RDS parameter units (e.g. ``max_wal_size`` in MB), and the
        strategy: ``auto`` (modify-in-place where possible, else swap), ``modify-in-place`` or
        ``swap``; the reboot policy: ``never`` or ``allowed`` (swap and static parameters need
        ``allowed``); the expected load duration, for the maintenance-window warning.
    """

    def __init__(
        self,
        target: BulkModeTarget,
        options: BulkModeOptions,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not target.is_rds:
            raise ValueError(
                "RDS bulk mode needs db_instance_identifier and/or db_cluster_identifier"
            )
        self.target = target
        self.db_instance_identifier = target.db_instance_identifier
        self.db_cluster_identifier = target.db_cluster_identifier
        self.options = options.checked()
        self.clock = clock

    @cached_property
    def client(self) -> Any:
        return aws_client("rds", self.target.aws_conn_id, self.target.region_name)

    @cached_property
    def db_groups(self) -> GroupApi:
        return GroupApi(self.client, cluster=False, clock=self.clock)

    @cached_property
    def cluster_groups(self) -> GroupApi:
        return GroupApi(self.client, cluster=True, clock=self.clock)

    @cached_property
    def instance_mode(self) -> InstanceBulkMode | None:
        """The instance part, when an instance is given."""
        if not self.db_instance_identifier:
            return None
        return InstanceBulkMode(
            self.client, self.db_groups, self.db_instance_identifier, self.options, clock=self.clock
        )

    @cached_property
    def cluster_mode(self) -> ClusterBulkMode | None:
        """The cluster part, when a cluster is given."""
        if not self.db_cluster_identifier:
            return None
        return ClusterBulkMode(
            self.client,
            self.cluster_groups,
            self.db_cluster_identifier,
            reboot_policy=self.options.reboot_policy,
        )

    # -- reads ------------------------------------------------------------------------------------
    def instance(self, ident: str | None = None) -> dict[str, Any]:
        return self.describe("instance", str(ident or self.db_instance_identifier))

    def cluster(self, ident: str | None = None) -> dict[str, Any]:
        return self.describe("cluster", str(ident or self.db_cluster_identifier))

    def describe(self, kind: str, ident: str) -> dict[str, Any]:
        """``describe("instance" | "cluster", identifier)``: what a poll asks for."""
        return describe(self.client, kind, ident)

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
            writer = writer_of(cluster_seen)
            instance_seen = self.instance(writer) if writer else None
        instance_names: set[str] = set()
        instance_group = None
        if instance_seen is not None:
            instance_group, _ = current_group(instance_seen)
            instance_names = set(self.db_groups.parameters(instance_group))
        cluster_names: set[str] = set()
        cluster_group = None
        if cluster_seen is not None:
            cluster_group = str(cluster_seen["DBClusterParameterGroup"])
            cluster_names = set(self.cluster_groups.parameters(cluster_group))
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

    # -- enter, renew, exit -----------------------------------------------------------------------
    def enter(self, key: LeaseKey, ttl: float) -> WaitSpec | None:
        """Take ``key``'s lease and make sure the bulk values are set; returns what to wait for.

        Every refusal (instance and cluster) comes before the first change.
        """
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
        settings = resolve_bulk_settings(engine, self.options.settings, rds=True)
        on_instance, on_cluster = self._split_settings(settings, instance, cluster)
        cluster_plan = None
        if on_cluster:
            # _split_settings refused cluster-level settings without a cluster
            assert cluster is not None and self.cluster_mode is not None
            cluster_plan = self.cluster_mode.check(cluster, on_cluster)
        instance_spec = None
        if instance is not None and (on_instance or not on_cluster):
            assert self.instance_mode is not None
            instance_spec = self.instance_mode.enter(key, ttl, instance, on_instance)
        cluster_spec = None
        if cluster_plan is not None:
            assert self.cluster_mode is not None
            cluster_spec = self.cluster_mode.enter(key, ttl, on_cluster, *cluster_plan)
        elif instance is None:
            log.info(
                "cluster %s: no bulk settings for engine %s; nothing to change",
                self.db_cluster_identifier,
                engine,
            )
        return merge_specs(instance_spec, cluster_spec)

    def renew(self, key: LeaseKey, ttl: float) -> bool:
        """Extend ``key``'s lease on every group (instance, cluster) where it holds one.

        ``False`` when it holds none (expired and dropped, or never).
        """
        held = False
        for part in (self.instance_mode, self.cluster_mode):
            if part is not None and part.renew(key, ttl):
                held = True
        return held

    def exit(self, key: LeaseKey) -> WaitSpec | None:
        """Release ``key``'s lease on the instance's and/or the cluster's group.

        Where no live lease is left, restore. Safe when enter never ran or failed half-way:
        restores what was changed, does nothing when nothing was. A failure on one part does not
        skip the other.
        """
        parts: list[tuple[str, Callable[[LeaseKey], WaitSpec | None]]] = []
        if self.instance_mode is not None:
            parts.append(("instance", self.instance_mode.exit))
        if self.cluster_mode is not None:
            parts.append(("cluster", self.cluster_mode.exit))
        specs: dict[str, WaitSpec | None] = {}
        errors: list[Exception] = []
        for name, part in parts:
            try:
                specs[name] = part(key)
            except Exception as exc:  # restore the other part too, then report the first failure
                log.error("bulk mode exit (%s) failed: %r", name, exc)
                errors.append(exc)
        if errors:
            raise errors[0]
        return merge_specs(specs.get("instance"), specs.get("cluster"))

    # -- waiting ----------------------------------------------------------------------------------
    def check(self, spec: WaitSpec) -> Status:
        """One poll: ``ready``, ``pending-reboot`` or ``wait`` (both parts of the spec)."""
        return poll(spec, self.describe)

    def reboot(self, spec: WaitSpec) -> WaitSpec:
        """Reboot what reports ``pending-reboot``.

        The instance, and every cluster member still waiting for the cluster group (Aurora
        applies static cluster parameters per instance).
        """
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
            delete_group_if_unused(self.client, self.db_groups, spec.cleanup_group)

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
