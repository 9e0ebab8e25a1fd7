"""Cluster-level bulk settings: the DB cluster parameter group of one Aurora cluster.

Only modify-in-place: the cluster's own custom group (used by no other cluster) gets the bulk
values, and its tags record the originals and the leases, as for an instance's group (see
:mod:`~airflow_bulkload.bulk_mode.parameter_groups`).
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_bulkload.bulk_mode.parameter_groups import (
    MAX_TAGS,
    MODE_TAG,
    ORIGINAL_TAG,
    REBOOT_TAG,
    GroupedResource,
    ParameterInfo,
    RdsBulkState,
)
from airflow_bulkload.bulk_mode.policy import LeaseKey, encode_tag_value, refuse_static
from airflow_bulkload.bulk_mode.status import WaitSpec
from airflow_bulkload.exceptions import BulkModeRefusedError, BulkModeStateError

log = logging.getLogger(__name__)


def clusters_using(client: Any, group: str) -> list[str]:
    """Every cluster whose DB cluster parameter group is ``group``."""
    users = []
    for page in client.get_paginator("describe_db_clusters").paginate():
        for clu in page.get("DBClusters", []):
            if clu.get("DBClusterParameterGroup") == group:
                users.append(clu["DBClusterIdentifier"])
    return users


class ClusterBulkMode(GroupedResource):
    """Enter, renew and exit bulk mode in one Aurora cluster's DB cluster parameter group.

    ``groups``: the DB cluster parameter group calls (:class:`GroupApi` with ``cluster=True``);
    ``ident``: the DB cluster identifier.
    """

    kind = "cluster"

    @property
    def label(self) -> str:
        return f"cluster {self.ident}"

    def holder_group(self) -> str | None:
        """The cluster's custom group (the one that can carry bulk-mode tags), else ``None``."""
        group = str(self.describe()["DBClusterParameterGroup"])
        return None if group.startswith("default.") else group

    # -- enter ------------------------------------------------------------------------------------
    def check(
        self, cluster: dict[str, Any], settings: dict[str, str]
    ) -> tuple[str, dict[str, ParameterInfo]]:
        """Every refusal for the cluster part, before any change.

        Refuses a default or shared cluster group, a cluster not ready, unmodifiable or (without
        a reboot policy) static parameters, no room for the tags. Returns the group and its
        parameters.
        """
        ident = self.ident
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
        shared_with = [c for c in clusters_using(self.client, group) if c != ident]
        if shared_with:
            raise BulkModeRefusedError(
                f"DB cluster parameter group {group} is shared with cluster(s) "
                f"{', '.join(shared_with)}; modifying it in place would put those clusters in bulk "
                f"mode too. Give cluster {ident} its own copy (associate + one reboot of its "
                "instances), or drop the cluster-level settings."
            )
        info = self.groups.parameters(group)
        fixed = sorted(n for n in settings if not info[n].modifiable)
        if fixed:
            raise BulkModeRefusedError(f"{', '.join(fixed)} cannot be modified on RDS")
        refuse_static([n for n in settings if info[n].static], self.reboot_policy, self.label)
        state = self.groups.state(group)
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

    def enter(
        self,
        key: LeaseKey,
        ttl: float,
        settings: dict[str, str],
        group: str,
        info: dict[str, ParameterInfo],
    ) -> WaitSpec:
        """Take ``key``'s lease and set ``settings`` in ``group`` (as :meth:`check` returned)."""
        ident = self.ident
        state = self.groups.state(group)
        new_tags: dict[str, str] = {}
        if state.mode is None:
            log.info("cluster %s: entering bulk mode (modify-in-place) with %s", ident, settings)
            new_tags.update({MODE_TAG: "modify-in-place", REBOOT_TAG: self.reboot_policy})
        else:
            live = self.groups.drop_expired(state, keep=key.token)
            others = [lease for lease in live if lease.token != key.token]
            log.info("cluster %s: bulk mode already on; %d other holder(s)", ident, len(others))
        missing = {n: v for n, v in settings.items() if n not in state.originals}
        new_tags.update({ORIGINAL_TAG + n: encode_tag_value(info[n].value) for n in missing})
        new_tags.update(self.groups.lease_tag(key, ttl))
        # originals (and the lease) first: if we die after this, exit knows what to put back
        self.groups.add_tags(group, new_tags)
        if missing:
            self.groups.modify(group, missing, info)
        reboot_ok = state.tags.get(REBOOT_TAG) == "allowed" or self.reboot_policy == "allowed"
        return WaitSpec(
            None,
            None,
            "enter",
            reboot_allowed=reboot_ok,
            db_cluster_identifier=ident,
            cluster_parameter_group=group,
        )

    # -- renew ------------------------------------------------------------------------------------
    def renew(self, key: LeaseKey, ttl: float) -> bool:
        """Extend ``key``'s lease; ``False`` when it holds none here."""
        group = self.holder_group()
        if not group or not any(
            lease.token == key.token for lease in self.groups.state(group).leases
        ):
            return False
        self.groups.add_tags(group, self.groups.lease_tag(key, ttl))
        return True

    # -- exit -------------------------------------------------------------------------------------
    def exit(self, key: LeaseKey) -> WaitSpec | None:
        """Release ``key``'s lease; restore the originals when no live lease is left."""
        group = self.holder_group()
        if group is None:
            log.info(
                "%s: uses a default DB cluster parameter group; nothing to restore", self.label
            )
            return None
        state: RdsBulkState = self.groups.state(group)
        if self.groups.release(key, state, self.label):
            return None
        needs_reboot = self.groups.restore_in_place(state, self.label)
        if needs_reboot is None:
            return None
        return WaitSpec(
            None,
            None,
            "exit",
            reboot_allowed=needs_reboot,
            db_cluster_identifier=self.ident,
            cluster_parameter_group=group,
        )
