"""Read an RDS instance or Aurora cluster into an :class:`InstanceSummary` (read-only AWS calls).

Kept apart from the rules so they stay pure: this module talks to AWS through the amazon
provider's hooks, the rules only see the summary it returns.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow_bulkload.advice.instance_classes import ec2_instance_type, vcpus_for_class
from airflow_bulkload.advice.models import InstanceSummary
from airflow_bulkload.bulk_mode.status import describe, writer_of
from airflow_bulkload.connections import aws_client

log = logging.getLogger(__name__)

#: the cluster parameters that name the role Aurora MySQL's LOAD DATA FROM S3 uses
S3_ROLE_PARAMETERS = ("aurora_load_from_s3_role", "aws_default_s3_role")
S3_IMPORT_FEATURE = "s3Import"


def read_instance(
    *,
    db_instance_identifier: str | None = None,
    db_cluster_identifier: str | None = None,
    aws_conn_id: str | None = "aws_default",
    region_name: str | None = None,
) -> InstanceSummary:
    """Describe the instance, or the writer of the cluster, with what pre-flight needs.

    Given only a cluster, its writer instance gives the class and parameter group; given an
    instance that belongs to a cluster, the cluster is read too (cluster parameter group, roles).
    """
    if not db_instance_identifier and not db_cluster_identifier:
        raise ValueError("give db_instance_identifier or db_cluster_identifier")
    rds: Any = aws_client("rds", aws_conn_id, region_name)
    cluster: dict[str, Any] | None = None
    if db_cluster_identifier:
        cluster = describe(rds, "cluster", db_cluster_identifier)
        if not db_instance_identifier:
            db_instance_identifier = writer_of(cluster)
    instance: dict[str, Any] | None = None
    if db_instance_identifier:
        instance = describe(rds, "instance", db_instance_identifier)
        if cluster is None and instance.get("DBClusterIdentifier"):
            cluster = describe(rds, "cluster", instance["DBClusterIdentifier"])
    return summarize(
        instance,
        cluster,
        cluster_parameters=_cluster_parameters(rds, cluster),
        vcpus=_vcpus(instance, aws_conn_id, region_name),
    )


def summarize(
    instance: dict[str, Any] | None,
    cluster: dict[str, Any] | None,
    *,
    cluster_parameters: dict[str, str] | None = None,
    vcpus: int | None = None,
) -> InstanceSummary:
    """Build the summary from ``describe_db_instances``/``describe_db_clusters`` items."""
    if instance is None and cluster is None:
        raise ValueError("nothing to summarize")
    inst = instance or {}
    clu = cluster or {}
    windows = [
        w
        for w in (inst.get("PreferredMaintenanceWindow"), clu.get("PreferredMaintenanceWindow"))
        if w
    ]
    roles = [
        r["RoleArn"]
        for r in inst.get("AssociatedRoles", []) + clu.get("AssociatedRoles", [])
        if r.get("RoleArn")
        and r.get("Status", "ACTIVE") == "ACTIVE"
        and r.get("FeatureName", S3_IMPORT_FEATURE) in (S3_IMPORT_FEATURE, "")
    ]
    engine = str(inst.get("Engine") or clu.get("Engine") or "")
    instance_class = str(inst.get("DBInstanceClass", ""))
    return InstanceSummary(
        identifier=str(inst.get("DBInstanceIdentifier") or clu.get("DBClusterIdentifier")),
        engine=engine,
        instance_class=instance_class,
        vcpus=vcpus if vcpus is not None else vcpus_for_class(instance_class),
        engine_version=str(inst.get("EngineVersion") or clu.get("EngineVersion") or ""),
        storage_type=str(inst.get("StorageType") or clu.get("StorageType") or ""),
        allocated_gb=int(inst.get("AllocatedStorage") or 0),
        iops=inst.get("Iops"),
        multi_az=bool(inst.get("MultiAZ") or clu.get("MultiAZ")),
        maintenance_windows=tuple(dict.fromkeys(windows)),
        parameter_groups=tuple(
            g["DBParameterGroupName"] for g in inst.get("DBParameterGroups", [])
        ),
        cluster_identifier=clu.get("DBClusterIdentifier"),
        cluster_parameter_group=clu.get("DBClusterParameterGroup"),
        s3_import_roles=tuple(dict.fromkeys(roles)),
        s3_role_parameters={
            k: v for k, v in (cluster_parameters or {}).items() if k in S3_ROLE_PARAMETERS and v
        },
    )


def _cluster_parameters(rds: Any, cluster: dict[str, Any] | None) -> dict[str, str]:
    """The S3 role parameters set in the cluster's parameter group (empty when unreadable)."""
    from botocore.exceptions import BotoCoreError, ClientError  # only a task reading RDS needs it

    if not cluster or not cluster.get("DBClusterParameterGroup"):
        return {}
    values: dict[str, str] = {}
    try:
        paginator = rds.get_paginator("describe_db_cluster_parameters")
        for page in paginator.paginate(
            DBClusterParameterGroupName=cluster["DBClusterParameterGroup"]
        ):
            for parameter in page.get("Parameters", []):
                name = parameter.get("ParameterName")
                if name in S3_ROLE_PARAMETERS and parameter.get("ParameterValue"):
                    values[name] = parameter["ParameterValue"]
    except (ClientError, BotoCoreError) as exc:
        log.warning(
            "could not read cluster parameter group %s: %s",
            cluster["DBClusterParameterGroup"],
            exc,
        )
    return values


def _vcpus(
    instance: dict[str, Any] | None, aws_conn_id: str | None, region_name: str | None
) -> int | None:
    """From the class name when it says; otherwise EC2's instance type description."""
    instance_class = str((instance or {}).get("DBInstanceClass", ""))
    known = vcpus_for_class(instance_class)
    if known is not None or not instance_class:
        return known
    ec2_type = ec2_instance_type(instance_class)
    if ec2_type is None:
        return None
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        ec2: Any = aws_client("ec2", aws_conn_id, region_name)
        types = ec2.describe_instance_types(InstanceTypes=[ec2_type])["InstanceTypes"]
    except (ClientError, BotoCoreError) as exc:
        log.warning("could not look up vCPUs of %s: %s", instance_class, exc)
        return None
    return int(types[0]["VCpuInfo"]["DefaultVCpus"]) if types else None
