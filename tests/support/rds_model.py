"""A small model of RDS parameter-group apply semantics, layered onto moto.

moto reports every parameter group ``in-sync``, lets an in-use group be deleted, knows no engine
defaults, and has no ResetDBParameterGroup. Real RDS (as documented):

- associating a *different* group with an instance leaves it ``pending-reboot`` until a reboot,
  even for dynamic parameters;
- a dynamic parameter changed with ApplyMethod ``immediate`` shows ``applying``, then ``in-sync``;
- a static parameter must use ``pending-reboot`` (``immediate`` is refused) and leaves the group
  ``pending-reboot`` on every instance using it until each reboots;
- default groups (``default.*``) cannot be modified or deleted; a group in use cannot be deleted;
- DescribeDBParameters lists every parameter of the family with ApplyType/IsModifiable/Source.

Aurora DB *cluster* parameter groups get the same treatment (moto stores their values but reports
every member ``in-sync``, lists only user-set values, and has no ResetDBClusterParameterGroup):
an immediate dynamic change leaves every member of each cluster using the group ``applying``,
then ``in-sync``; a static change leaves them ``pending-reboot`` until each member reboots;
default cluster groups cannot be modified but can be described. Re-associating a cluster's group
(ModifyDBCluster) is not modelled.

Only moto (AWS) is patched, through pytest's monkeypatch, so everything is undone after the test.
"""

from __future__ import annotations

from typing import Any

import pytest
from moto.core.responses import ActionResult
from moto.rds.exceptions import RDSClientError
from moto.rds.models import DBCluster, DBInstance, RDSBackend
from moto.rds.responses import RDSResponse

# name -> (apply type, data type, modifiable, engine default or None)
_POSTGRES = {
    "maintenance_work_mem": ("dynamic", "integer", True, "65536"),
    "max_wal_size": ("dynamic", "integer", True, "2048"),
    "checkpoint_timeout": ("dynamic", "integer", True, "300"),
    "work_mem": ("dynamic", "integer", True, None),
    "shared_buffers": ("static", "integer", True, "{DBInstanceClassMemory/32768}"),
    "max_connections": ("static", "integer", True, None),
    "rds.extensions": ("static", "list", False, "aws_s3,pg_stat_statements"),
}
_MYSQL = {
    "innodb_io_capacity": ("dynamic", "integer", True, "200"),
    "innodb_io_capacity_max": ("dynamic", "integer", True, "2000"),
    "innodb_flush_log_at_trx_commit": ("dynamic", "string", True, "1"),
    "innodb_log_file_size": ("static", "integer", True, "134217728"),
    "innodb_log_buffer_size": ("static", "integer", True, "16777216"),
    "innodb_doublewrite": ("static", "boolean", True, "1"),
    "max_allowed_packet": ("dynamic", "integer", True, None),
}


# Aurora DB cluster parameter groups: a few cluster-only parameters, and one that Aurora lists in
# both groups (maintenance_work_mem / innodb_io_capacity: instance-level by bulk mode's rule)
_AURORA_POSTGRES_CLUSTER = {
    "autovacuum_naptime": ("dynamic", "integer", True, "5"),
    "autovacuum_vacuum_cost_limit": ("dynamic", "integer", True, None),
    "autovacuum_max_workers": ("static", "integer", True, "3"),
    "rds.logical_replication": ("static", "boolean", True, "0"),
    "rds.superuser_variables": ("static", "list", False, "session_replication_role"),
    "maintenance_work_mem": ("dynamic", "integer", True, None),
}
_AURORA_MYSQL_CLUSTER = {
    "aurora_load_from_s3_role": ("dynamic", "string", True, None),
    "server_audit_logging": ("dynamic", "boolean", True, "0"),
    "binlog_format": ("static", "string", True, "OFF"),
    "innodb_io_capacity": ("dynamic", "integer", True, "200"),
}


def catalog(family: str | None) -> dict[str, tuple[str, str, bool, str | None]]:
    family = (family or "").lower()
    return _POSTGRES if "postgres" in family else _MYSQL


def cluster_catalog(family: str | None) -> dict[str, tuple[str, str, bool, str | None]]:
    family = (family or "").lower()
    return _AURORA_POSTGRES_CLUSTER if "postgres" in family else _AURORA_MYSQL_CLUSTER


def _cluster_group_family(backend: RDSBackend, name: str) -> str | None:
    group = backend.db_cluster_parameter_groups.get(name)
    if group is not None:
        return str(group.db_parameter_group_family)
    return name[len("default.") :] if name.startswith("default.") else None


def _cluster_members(backend: RDSBackend, group: str) -> list[DBInstance]:
    return [
        member
        for cluster in backend.clusters.values()
        if cluster.parameter_group == group
        for member in cluster._members
    ]


def _cluster_group_changed(backend: RDSBackend, group: str, *, needs_reboot: bool) -> None:
    for db in _cluster_members(backend, group):
        if needs_reboot or getattr(db, "_bl_cluster_apply", "in-sync") == "pending-reboot":
            db._bl_cluster_apply = "pending-reboot"
        else:
            db._bl_cluster_apply = "applying"
            db._bl_cluster_settle = 2


def _group_family(backend: RDSBackend, name: str) -> str | None:
    group = backend.db_parameter_groups.get(name)
    return group.family if group else None


def _users(backend: RDSBackend, group: str) -> list[DBInstance]:
    return [
        db
        for db in backend.databases.values()
        if db.db_parameter_group_status_list[0]["DBParameterGroupName"] == group
    ]


def _group_changed(backend: RDSBackend, group: str, *, needs_reboot: bool) -> None:
    for db in _users(backend, group):
        if needs_reboot or getattr(db, "_bl_apply", "in-sync") == "pending-reboot":
            db._bl_apply = "pending-reboot"
        else:
            db._bl_apply = "applying"
            db._bl_apply_settle = 2


def _tick(backend: RDSBackend) -> None:
    """Time passes once per DescribeDBInstances: applying settles, a reboot finishes."""
    for db in backend.databases.values():
        settle = getattr(db, "_bl_apply_settle", 0)
        if settle:
            db._bl_apply_settle = settle - 1
            if settle == 1 and db._bl_apply == "applying":
                db._bl_apply = "in-sync"
        settle = getattr(db, "_bl_cluster_settle", 0)
        if settle:
            db._bl_cluster_settle = settle - 1
            if settle == 1 and db._bl_cluster_apply == "applying":
                db._bl_cluster_apply = "in-sync"
        reboot = getattr(db, "_bl_reboot_settle", 0)
        if reboot:
            db._bl_reboot_settle = reboot - 1
            if reboot == 1:
                db.status = "available"
                db._bl_apply = "in-sync"
                db._bl_cluster_apply = "in-sync"


def _check_modification(
    backend: RDSBackend, name: str, params: list[dict[str, Any]], *, cluster: bool = False
) -> None:
    if name.startswith("default."):
        raise RDSClientError(
            "InvalidParameterValue", f"Default parameter groups cannot be modified: {name}"
        )
    if cluster:
        known = cluster_catalog(_cluster_group_family(backend, name))
    else:
        known = catalog(_group_family(backend, name))
    for p in params:
        pname = p["ParameterName"]
        if pname not in known:
            raise RDSClientError(
                "InvalidParameterValue", f"Could not find parameter with name: {pname}"
            )
        apply_type, _data_type, modifiable, _ = known[pname]
        if not modifiable:
            raise RDSClientError("InvalidParameterValue", f"{pname} is not modifiable")
        if apply_type == "static" and p.get("ApplyMethod") == "immediate":
            raise RDSClientError(
                "InvalidParameterCombination",
                f"cannot use immediate apply method for static parameter {pname}",
            )


def _catalog_entries(
    known: dict[str, tuple[str, str, bool, str | None]],
) -> dict[str, dict[str, Any]]:
    """Every parameter of a family as DescribeDB[Cluster]Parameters lists it, at its default."""
    merged: dict[str, dict[str, Any]] = {}
    for pname, (apply_type, data_type, modifiable, default) in known.items():
        entry: dict[str, Any] = {
            "ParameterName": pname,
            "ApplyType": apply_type,
            "DataType": data_type,
            "IsModifiable": modifiable,
            "Source": "engine-default",
        }
        if default is not None:
            entry["ParameterValue"] = default
        merged[pname] = entry
    return merged


class RdsApplyModel:
    """Install with :meth:`install`; inspect instances with :meth:`apply_status`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.mp = monkeypatch

    def install(self) -> RdsApplyModel:
        mp = self.mp
        orig_describe = RDSBackend.describe_db_instances
        orig_modify_instance = RDSBackend.modify_db_instance
        orig_modify_group = RDSBackend.modify_db_parameter_group
        orig_delete_group = RDSBackend.delete_db_parameter_group

        def status_list(db: DBInstance) -> list[dict[str, str]]:
            group = db.db_parameter_groups()[0]
            return [
                {
                    "DBParameterGroupName": group.name,
                    "ParameterApplyStatus": getattr(db, "_bl_apply", "in-sync"),
                }
            ]

        def describe_db_instances(self: RDSBackend, *args: Any, **kwargs: Any) -> Any:
            _tick(self)
            return orig_describe(self, *args, **kwargs)

        def modify_db_instance(self: RDSBackend, ident: str, db_kwargs: dict[str, Any]) -> Any:
            db = orig_describe(self, ident)[0]
            before = status_list(db)[0]["DBParameterGroupName"]
            result = orig_modify_instance(self, ident, db_kwargs)
            if status_list(db)[0]["DBParameterGroupName"] != before:
                db._bl_apply = "pending-reboot"  # association applies only at the next reboot
            return result

        def reboot_db_instance(self: RDSBackend, ident: str) -> Any:
            db = orig_describe(self, ident)[0]
            if db.status != "available":
                raise RDSClientError(
                    "InvalidDBInstanceState", f"DB instance {ident} is not in available state"
                )
            db.status = "rebooting"
            db._bl_reboot_settle = 2
            return db

        def modify_db_parameter_group(
            self: RDSBackend, db_parameter_group_name: str, db_parameter_group_parameters: Any
        ) -> Any:
            params = [dict(p) for p in db_parameter_group_parameters]
            _check_modification(self, db_parameter_group_name, params)
            known = catalog(_group_family(self, db_parameter_group_name))
            for p in params:
                apply_type, data_type, modifiable, _ = known[p["ParameterName"]]
                p.update(
                    Source="user", ApplyType=apply_type, DataType=data_type, IsModifiable=modifiable
                )
            result = orig_modify_group(self, db_parameter_group_name, params)
            needs_reboot = any(p.get("ApplyMethod") == "pending-reboot" for p in params)
            _group_changed(self, db_parameter_group_name, needs_reboot=needs_reboot)
            return result

        def delete_db_parameter_group(self: RDSBackend, db_parameter_group_name: str) -> Any:
            if db_parameter_group_name.startswith("default."):
                raise RDSClientError(
                    "InvalidDBParameterGroupState", "Default parameter groups cannot be deleted"
                )
            if _users(self, db_parameter_group_name):
                raise RDSClientError(
                    "InvalidDBParameterGroupState",
                    f"One or more database instances are still members of this parameter group "
                    f"{db_parameter_group_name}, so the group cannot be deleted",
                )
            return orig_delete_group(self, db_parameter_group_name)

        def reset_db_parameter_group(response: RDSResponse) -> ActionResult:
            backend = response.backend
            name = response.params.get("DBParameterGroupName")
            params = [p.original_dict() for p in response.params.get("Parameters", [])]
            if name not in backend.db_parameter_groups:
                raise RDSClientError("DBParameterGroupNotFound", f"{name} not found")
            _check_modification(backend, name, params)
            group = backend.db_parameter_groups[name]
            if response.params.get("ResetAllParameters"):
                group.parameters.clear()
            for p in params:
                group.parameters.pop(p["ParameterName"], None)
            needs_reboot = any(p.get("ApplyMethod") == "pending-reboot" for p in params)
            _group_changed(backend, name, needs_reboot=needs_reboot)
            return ActionResult({"DBParameterGroupName": name})

        def describe_db_parameters(response: RDSResponse) -> ActionResult:
            name = response.params.get("DBParameterGroupName")
            groups = response.backend.describe_db_parameter_groups(
                {"db_parameter_group_name": name}
            )
            if not groups:
                raise RDSClientError(
                    "DBParameterGroupNotFound", f"DBParameterGroup not found: {name}"
                )
            group = groups[0]
            merged = _catalog_entries(catalog(group.family))
            for pname, values in group.parameters.items():
                merged.setdefault(pname, {"ParameterName": pname}).update(
                    {k: v for k, v in values.items() if k != "ApplyMethod"}, Source="user"
                )
            return ActionResult({"Parameters": list(merged.values())})

        orig_describe_clusters = RDSBackend.describe_db_clusters
        orig_modify_cluster_group = RDSBackend.modify_db_cluster_parameter_group

        def db_cluster_members(cluster: DBCluster) -> list[dict[str, Any]]:
            return [
                {
                    "DBInstanceIdentifier": member.db_instance_identifier,
                    "IsClusterWriter": member.is_cluster_writer,
                    "DBClusterParameterGroupStatus": getattr(
                        member, "_bl_cluster_apply", "in-sync"
                    ),
                    "PromotionTier": member.promotion_tier,
                }
                for member in cluster.members
            ]

        def describe_db_clusters(self: RDSBackend, *args: Any, **kwargs: Any) -> Any:
            _tick(self)
            return orig_describe_clusters(self, *args, **kwargs)

        def modify_db_cluster_parameter_group(
            self: RDSBackend,
            db_cluster_parameter_group_name: str,
            db_cluster_parameter_group_parameters: Any,
        ) -> Any:
            name = db_cluster_parameter_group_name
            params = [dict(p) for p in db_cluster_parameter_group_parameters]
            _check_modification(self, name, params, cluster=True)
            known = cluster_catalog(_cluster_group_family(self, name))
            for p in params:
                apply_type, data_type, modifiable, _ = known[p["ParameterName"]]
                p.update(
                    Source="user", ApplyType=apply_type, DataType=data_type, IsModifiable=modifiable
                )
            result = orig_modify_cluster_group(self, name, params)
            needs_reboot = any(p.get("ApplyMethod") == "pending-reboot" for p in params)
            _cluster_group_changed(self, name, needs_reboot=needs_reboot)
            return result

        def reset_db_cluster_parameter_group(response: RDSResponse) -> ActionResult:
            backend = response.backend
            name = response.params.get("DBClusterParameterGroupName")
            params = [p.original_dict() for p in response.params.get("Parameters", [])]
            if name not in backend.db_cluster_parameter_groups:
                raise RDSClientError("DBParameterGroupNotFound", f"{name} not found")
            _check_modification(backend, name, params, cluster=True)
            group = backend.db_cluster_parameter_groups[name]
            if response.params.get("ResetAllParameters"):
                group.parameters.clear()
            for p in params:
                group.parameters.pop(p["ParameterName"], None)
            needs_reboot = any(p.get("ApplyMethod") == "pending-reboot" for p in params)
            _cluster_group_changed(backend, name, needs_reboot=needs_reboot)
            return ActionResult({"DBClusterParameterGroupName": name})

        def describe_db_cluster_parameters(response: RDSResponse) -> ActionResult:
            backend = response.backend
            name = response.params.get("DBClusterParameterGroupName")
            group = backend.db_cluster_parameter_groups.get(name)
            if group is None and not name.startswith("default."):
                raise RDSClientError(
                    "DBParameterGroupNotFound", f"DBClusterParameterGroup not found: {name}"
                )
            merged = _catalog_entries(cluster_catalog(_cluster_group_family(backend, name)))
            for pname, values in (group.parameters if group else {}).items():
                merged.setdefault(pname, {"ParameterName": pname}).update(
                    {k: v for k, v in values.items() if k != "ApplyMethod"}, Source="user"
                )
            return ActionResult({"Parameters": list(merged.values())})

        mp.setattr(DBCluster, "db_cluster_members", property(db_cluster_members))
        mp.setattr(RDSBackend, "describe_db_clusters", describe_db_clusters)
        mp.setattr(
            RDSBackend, "modify_db_cluster_parameter_group", modify_db_cluster_parameter_group
        )
        mp.setattr(
            RDSResponse,
            "reset_db_cluster_parameter_group",
            reset_db_cluster_parameter_group,
            raising=False,
        )
        mp.setattr(RDSResponse, "describe_db_cluster_parameters", describe_db_cluster_parameters)
        mp.setattr(DBInstance, "db_parameter_group_status_list", property(status_list))
        mp.setattr(RDSBackend, "describe_db_instances", describe_db_instances)
        mp.setattr(RDSBackend, "modify_db_instance", modify_db_instance)
        mp.setattr(RDSBackend, "reboot_db_instance", reboot_db_instance)
        mp.setattr(RDSBackend, "modify_db_parameter_group", modify_db_parameter_group)
        mp.setattr(RDSBackend, "delete_db_parameter_group", delete_db_parameter_group)
        mp.setattr(RDSResponse, "reset_db_parameter_group", reset_db_parameter_group, raising=False)
        mp.setattr(RDSResponse, "describe_db_parameters", describe_db_parameters)
        return self
