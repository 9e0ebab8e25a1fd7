"""RDS bulk mode against moto plus the apply-semantics model in tests/support/rds_model.py."""

from __future__ import annotations

from typing import Any

import boto3
import pytest

from airflow_bulkload.bulk_mode import BulkModeTarget
from airflow_bulkload.bulk_mode.policy import LeaseKey
from airflow_bulkload.exceptions import BulkModeRefusedError
from airflow_bulkload.hooks.bulk_mode import BulkModeHook

KEY = LeaseKey.of("nightly", "public.events", "2024-01-01")


@pytest.fixture
def rds(aws_in_process: Any, rds_model: Any) -> Any:
    return boto3.client("rds", region_name="us-east-1")


def make_instance(
    rds: Any,
    ident: str = "db1",
    *,
    engine: str = "postgres",
    group: str | None = "custom-pg",
    family: str = "postgres15",
    group_values: dict[str, str] | None = None,
) -> None:
    if group and not group.startswith("default.") and not _group_exists(rds, group):
        rds.create_db_parameter_group(
            DBParameterGroupName=group, DBParameterGroupFamily=family, Description="custom"
        )
        if group_values:
            rds.modify_db_parameter_group(
                DBParameterGroupName=group,
                Parameters=[
                    {"ParameterName": k, "ParameterValue": v, "ApplyMethod": "immediate"}
                    for k, v in group_values.items()
                ],
            )
    kwargs: dict[str, Any] = {"DBParameterGroupName": group} if group else {}
    rds.create_db_instance(
        DBInstanceIdentifier=ident,
        Engine=engine,
        EngineVersion="15.4" if engine == "postgres" else "8.0.35",
        DBInstanceClass="db.m6g.large",
        AllocatedStorage=100,
        MasterUsername="admin",
        MasterUserPassword="password123",
        MultiAZ=True,
        **kwargs,
    )


def _group_exists(rds: Any, name: str) -> bool:
    return bool(rds.describe_db_parameter_groups(DBParameterGroupName=name)["DBParameterGroups"])


def values(rds: Any, group: str) -> dict[str, tuple[str | None, str]]:
    """(value, source) of every parameter in the group."""
    return {
        p["ParameterName"]: (p.get("ParameterValue"), p["Source"])
        for p in rds.describe_db_parameters(DBParameterGroupName=group)["Parameters"]
    }


def instance(rds: Any, ident: str = "db1") -> dict[str, Any]:
    return dict(rds.describe_db_instances(DBInstanceIdentifier=ident)["DBInstances"][0])


def group_status(rds: Any, ident: str = "db1") -> tuple[str, str]:
    g = instance(rds, ident)["DBParameterGroups"][0]
    return g["DBParameterGroupName"], g["ParameterApplyStatus"]


def tags(rds: Any, group: str) -> dict[str, str]:
    arn = rds.describe_db_parameter_groups(DBParameterGroupName=group)["DBParameterGroups"][0][
        "DBParameterGroupArn"
    ]
    return {t["Key"]: t["Value"] for t in rds.list_tags_for_resource(ResourceName=arn)["TagList"]}


def run(hook: BulkModeHook, spec: Any) -> None:
    if spec is not None:
        hook.wait(spec, delay=0, max_attempts=10)


def test_the_model_shows_the_reboot_trap(rds: Any) -> None:
    """Sanity of the harness: association waits for a reboot; immediate dynamic changes apply."""
    make_instance(rds)
    rds.create_db_parameter_group(
        DBParameterGroupName="other", DBParameterGroupFamily="postgres15", Description="x"
    )
    rds.modify_db_instance(DBInstanceIdentifier="db1", DBParameterGroupName="other")
    assert group_status(rds) == ("other", "pending-reboot")
    with pytest.raises(rds.exceptions.ClientError, match="still members"):
        rds.delete_db_parameter_group(DBParameterGroupName="other")
    rds.reboot_db_instance(DBInstanceIdentifier="db1")
    assert instance(rds)["DBInstanceStatus"] == "rebooting"
    assert group_status(rds) == ("other", "in-sync")
    rds.modify_db_parameter_group(
        DBParameterGroupName="other",
        Parameters=[
            {"ParameterName": "work_mem", "ParameterValue": "8192", "ApplyMethod": "immediate"}
        ],
    )
    assert group_status(rds) == ("other", "applying")
    assert group_status(rds) == ("other", "in-sync")
    with pytest.raises(rds.exceptions.ClientError, match="static"):
        rds.modify_db_parameter_group(
            DBParameterGroupName="other",
            Parameters=[
                {
                    "ParameterName": "shared_buffers",
                    "ParameterValue": "1",
                    "ApplyMethod": "immediate",
                }
            ],
        )


def test_modify_in_place_round_trip_restores_every_original(rds: Any) -> None:
    make_instance(rds, group_values={"max_wal_size": "1024", "work_mem": "4096"})
    before = values(rds, "custom-pg")
    hook = BulkModeHook(BulkModeTarget(db_instance_identifier="db1"))
    spec = hook.enter(KEY)
    assert spec is not None and spec.parameter_group == "custom-pg" and not spec.reboot_allowed
    assert group_status(rds)[1] == "applying"
    run(hook, spec)
    assert group_status(rds) == ("custom-pg", "in-sync")
    during = values(rds, "custom-pg")
    assert during["maintenance_work_mem"] == ("1048576", "user")
    assert during["max_wal_size"] == ("4096", "user")
    assert during["checkpoint_timeout"] == ("1800", "user")
    run(hook, hook.exit(KEY))
    assert values(rds, "custom-pg") == before
    assert not [k for k in tags(rds, "custom-pg") if k.startswith("bulkload:")]
    assert group_status(rds) == ("custom-pg", "in-sync")
    assert instance(rds)["MultiAZ"] is True


def test_overlapping_leases_on_rds(rds: Any) -> None:
    make_instance(rds)
    before = values(rds, "custom-pg")
    hook = BulkModeHook(BulkModeTarget(db_instance_identifier="db1"))
    other = LeaseKey.of("backfill", "public.orders", "2023-12-01")
    run(hook, hook.enter(KEY))
    run(hook, hook.enter(other))
    assert hook.exit(KEY) is None
    assert values(rds, "custom-pg")["max_wal_size"] == ("4096", "user")
    run(hook, hook.exit(other))
    assert values(rds, "custom-pg") == before


def test_expired_lease_is_restored_by_the_next_exit(rds: Any) -> None:
    make_instance(rds)
    before = values(rds, "custom-pg")
    clock = [1_000_000.0]
    hook = BulkModeHook(BulkModeTarget(db_instance_identifier="db1"), clock=lambda: clock[0])
    run(hook, hook.enter(LeaseKey.of("crashed", "t", "x"), ttl=60))
    clock[0] += 61
    run(hook, hook.exit(KEY))  # a run that never entered, e.g. a failed enter's teardown
    assert values(rds, "custom-pg") == before


def test_exit_when_enter_never_ran_changes_nothing(rds: Any) -> None:
    make_instance(rds)
    before = values(rds, "custom-pg")
    assert BulkModeHook(BulkModeTarget(db_instance_identifier="db1")).exit(KEY) is None
    assert values(rds, "custom-pg") == before


def test_default_group_is_refused_with_what_to_do(rds: Any) -> None:
    make_instance(rds, group=None)
    name, _ = group_status(rds)
    assert name.startswith("default.")
    with pytest.raises(BulkModeRefusedError, match=r"default parameter group.*copy"):
        BulkModeHook(BulkModeTarget(db_instance_identifier="db1")).enter(KEY)
    assert not [k for k in tags(rds, name) if k.startswith("bulkload:")]


def test_shared_group_is_refused_for_modify_in_place(rds: Any) -> None:
    make_instance(rds, "db1")
    make_instance(rds, "db2")
    with pytest.raises(BulkModeRefusedError, match="shared with db2"):
        BulkModeHook(
            BulkModeTarget(db_instance_identifier="db1"), strategy="modify-in-place"
        ).enter(KEY)


def test_swap_without_reboot_policy_fails_before_changing_anything(rds: Any) -> None:
    make_instance(rds)
    before_values, before_tags = values(rds, "custom-pg"), tags(rds, "custom-pg")
    with pytest.raises(BulkModeRefusedError, match="reboot_policy='allowed'"):
        BulkModeHook(BulkModeTarget(db_instance_identifier="db1"), strategy="swap").enter(KEY)
    assert group_status(rds) == ("custom-pg", "in-sync")
    assert not _group_exists(rds, "bulkload-db1")
    assert (values(rds, "custom-pg"), tags(rds, "custom-pg")) == (before_values, before_tags)


def test_swap_with_reboot_policy_ends_in_sync_and_exit_returns(rds: Any) -> None:
    make_instance(rds, group_values={"work_mem": "4096"})
    hook = BulkModeHook(
        BulkModeTarget(db_instance_identifier="db1"), strategy="swap", reboot_policy="allowed"
    )
    spec = hook.enter(KEY)
    assert spec is not None and spec.parameter_group == "bulkload-db1"
    assert group_status(rds) == ("bulkload-db1", "pending-reboot")  # the trap
    run(hook, spec)
    assert group_status(rds) == ("bulkload-db1", "in-sync")
    bulk = values(rds, "bulkload-db1")
    assert bulk["max_wal_size"] == ("4096", "user")
    assert bulk["work_mem"] == ("4096", "user"), "copy, then override: custom settings survive"
    spec = hook.exit(KEY)
    assert spec is not None and spec.cleanup_group == "bulkload-db1"
    run(hook, spec)
    assert group_status(rds) == ("custom-pg", "in-sync")
    assert not _group_exists(rds, "bulkload-db1")
    assert instance(rds)["MultiAZ"] is True


def test_auto_swaps_a_default_group_when_reboots_are_allowed(rds: Any) -> None:
    make_instance(rds, group=None)
    default_group, _ = group_status(rds)
    hook = BulkModeHook(BulkModeTarget(db_instance_identifier="db1"), reboot_policy="allowed")
    run(hook, hook.enter(KEY))
    assert group_status(rds) == ("bulkload-db1", "in-sync")
    run(hook, hook.exit(KEY))
    assert group_status(rds) == (default_group, "in-sync")
    assert not _group_exists(rds, "bulkload-db1")


def test_static_parameter_without_reboot_policy_is_refused(rds: Any) -> None:
    make_instance(rds, engine="mysql", family="mysql8.0", group="custom-my")
    before = values(rds, "custom-my")
    hook = BulkModeHook(
        BulkModeTarget(db_instance_identifier="db1"),
        settings={"innodb_log_file_size": "1073741824"},
    )
    with pytest.raises(BulkModeRefusedError, match=r"innodb_log_file_size.*reboot"):
        hook.enter(KEY)
    assert values(rds, "custom-my") == before


def test_static_parameter_with_reboot_policy_reboots_and_restores(rds: Any) -> None:
    make_instance(rds, engine="mysql", family="mysql8.0", group="custom-my")
    before = values(rds, "custom-my")
    hook = BulkModeHook(
        BulkModeTarget(db_instance_identifier="db1"),
        settings={"innodb_log_file_size": "1073741824"},
        reboot_policy="allowed",
    )
    spec = hook.enter(KEY)
    assert group_status(rds) == ("custom-my", "pending-reboot")
    run(hook, spec)
    assert group_status(rds) == ("custom-my", "in-sync")
    assert values(rds, "custom-my")["innodb_log_file_size"] == ("1073741824", "user")
    assert values(rds, "custom-my")["innodb_io_capacity"] == ("2000", "user")
    run(hook, hook.exit(KEY))
    assert values(rds, "custom-my") == before
    assert group_status(rds) == ("custom-my", "in-sync")


def test_doublewrite_off_is_refused_even_with_reboots(rds: Any) -> None:
    make_instance(rds, engine="mysql", family="mysql8.0", group="custom-my")
    hook = BulkModeHook(
        BulkModeTarget(db_instance_identifier="db1"),
        settings={"innodb_doublewrite": "0"},
        reboot_policy="allowed",
    )
    with pytest.raises(BulkModeRefusedError, match="doublewrite"):
        hook.enter(KEY)


def test_pending_modifications_are_refused(rds: Any) -> None:
    make_instance(rds)
    rds.create_db_parameter_group(
        DBParameterGroupName="next", DBParameterGroupFamily="postgres15", Description="x"
    )
    rds.modify_db_instance(DBInstanceIdentifier="db1", DBParameterGroupName="next")
    with pytest.raises(Exception, match="pending-reboot"):
        BulkModeHook(BulkModeTarget(db_instance_identifier="db1")).enter(KEY)


# -- Aurora: cluster-level parameters in the DB cluster parameter group -------------------------


def make_cluster(
    rds: Any,
    ident: str = "cl1",
    *,
    group: str | None = "custom-cl",
    members: tuple[str, ...] = ("w1", "r1"),
    group_values: dict[str, str] | None = None,
) -> None:
    """An Aurora PostgreSQL cluster; each member gets its own DB parameter group ``<member>-pg``."""
    family = "aurora-postgresql15"
    if group and not group.startswith("default.") and not _cluster_group_exists(rds, group):
        rds.create_db_cluster_parameter_group(
            DBClusterParameterGroupName=group, DBParameterGroupFamily=family, Description="custom"
        )
        if group_values:
            rds.modify_db_cluster_parameter_group(
                DBClusterParameterGroupName=group,
                Parameters=[
                    {"ParameterName": k, "ParameterValue": v, "ApplyMethod": "immediate"}
                    for k, v in group_values.items()
                ],
            )
    kwargs: dict[str, Any] = {"DBClusterParameterGroupName": group} if group else {}
    rds.create_db_cluster(
        DBClusterIdentifier=ident,
        Engine="aurora-postgresql",
        EngineVersion="15.4",
        MasterUsername="admin",
        MasterUserPassword="password123",
        **kwargs,
    )
    for member in members:
        rds.create_db_parameter_group(
            DBParameterGroupName=f"{member}-pg", DBParameterGroupFamily=family, Description="x"
        )
        rds.create_db_instance(
            DBInstanceIdentifier=member,
            DBClusterIdentifier=ident,
            Engine="aurora-postgresql",
            DBInstanceClass="db.r6g.large",
            DBParameterGroupName=f"{member}-pg",
        )


def _cluster_group_exists(rds: Any, name: str) -> bool:
    try:
        rds.describe_db_cluster_parameter_groups(DBClusterParameterGroupName=name)
    except rds.exceptions.DBParameterGroupNotFoundFault:
        return False
    return True


def cluster_values(rds: Any, group: str) -> dict[str, tuple[str | None, str]]:
    return {
        p["ParameterName"]: (p.get("ParameterValue"), p["Source"])
        for p in rds.describe_db_cluster_parameters(DBClusterParameterGroupName=group)["Parameters"]
    }


def member_status(rds: Any, ident: str = "cl1") -> dict[str, str]:
    cluster = rds.describe_db_clusters(DBClusterIdentifier=ident)["DBClusters"][0]
    return {
        m["DBInstanceIdentifier"]: m["DBClusterParameterGroupStatus"]
        for m in cluster["DBClusterMembers"]
    }


def cluster_tags(rds: Any, group: str) -> dict[str, str]:
    arn = rds.describe_db_cluster_parameter_groups(DBClusterParameterGroupName=group)[
        "DBClusterParameterGroups"
    ][0]["DBClusterParameterGroupArn"]
    return {t["Key"]: t["Value"] for t in rds.list_tags_for_resource(ResourceName=arn)["TagList"]}


def bulk_tags(found: dict[str, str]) -> list[str]:
    return [k for k in found if k.startswith("bulkload:")]


CLUSTER_SETTINGS = {"autovacuum_naptime": "60", "autovacuum_vacuum_cost_limit": "2000"}


def test_the_model_applies_cluster_groups_per_member(rds: Any) -> None:
    make_cluster(rds)
    assert member_status(rds) == {"w1": "in-sync", "r1": "in-sync"}
    rds.modify_db_cluster_parameter_group(
        DBClusterParameterGroupName="custom-cl",
        Parameters=[
            {
                "ParameterName": "autovacuum_naptime",
                "ParameterValue": "9",
                "ApplyMethod": "immediate",
            }
        ],
    )
    assert set(member_status(rds).values()) == {"applying"}
    assert set(member_status(rds).values()) == {"in-sync"}
    assert cluster_values(rds, "custom-cl")["autovacuum_naptime"] == ("9", "user")
    with pytest.raises(rds.exceptions.ClientError, match="static"):
        rds.modify_db_cluster_parameter_group(
            DBClusterParameterGroupName="custom-cl",
            Parameters=[
                {
                    "ParameterName": "autovacuum_max_workers",
                    "ParameterValue": "6",
                    "ApplyMethod": "immediate",
                }
            ],
        )


def test_cluster_round_trip_restores_every_original(rds: Any) -> None:
    """Instance-level (the default maintenance_work_mem, on the writer's group) and cluster-level
    settings in one enter: each goes to its own group, and exit restores both."""
    make_cluster(rds, group_values={"autovacuum_naptime": "10"})
    before_cluster, before_writer = cluster_values(rds, "custom-cl"), values(rds, "w1-pg")
    hook = BulkModeHook(
        BulkModeTarget(db_instance_identifier="w1", db_cluster_identifier="cl1"),
        settings=CLUSTER_SETTINGS,
    )
    spec = hook.enter(KEY)
    assert spec is not None
    assert (spec.parameter_group, spec.cluster_parameter_group) == ("w1-pg", "custom-cl")
    assert not spec.reboot_allowed
    assert set(member_status(rds).values()) == {"applying"}
    run(hook, spec)
    assert member_status(rds) == {"w1": "in-sync", "r1": "in-sync"}
    assert group_status(rds, "w1") == ("w1-pg", "in-sync")
    during = cluster_values(rds, "custom-cl")
    assert during["autovacuum_naptime"] == ("60", "user")
    assert during["autovacuum_vacuum_cost_limit"] == ("2000", "user")
    assert "maintenance_work_mem" not in {k for k, (_, src) in during.items() if src == "user"}
    assert values(rds, "w1-pg")["maintenance_work_mem"] == ("1048576", "user")
    # the readers' DB parameter groups are not touched
    assert values(rds, "r1-pg")["maintenance_work_mem"] == before_writer["maintenance_work_mem"]
    found = cluster_tags(rds, "custom-cl")
    assert found["bulkload:mode"] == "modify-in-place"
    assert {
        "bulkload:orig:autovacuum_naptime",
        "bulkload:orig:autovacuum_vacuum_cost_limit",
    } <= set(found)
    run(hook, hook.exit(KEY))
    assert cluster_values(rds, "custom-cl") == before_cluster
    assert values(rds, "w1-pg") == before_writer
    assert not bulk_tags(cluster_tags(rds, "custom-cl"))
    assert not bulk_tags(tags(rds, "w1-pg"))
    assert member_status(rds) == {"w1": "in-sync", "r1": "in-sync"}


def test_cluster_only_bulk_mode_needs_no_instance(rds: Any) -> None:
    make_cluster(rds)
    before = cluster_values(rds, "custom-cl")
    hook = BulkModeHook(
        BulkModeTarget(db_cluster_identifier="cl1"),
        settings={**CLUSTER_SETTINGS, "maintenance_work_mem": None},
    )
    spec = hook.enter(KEY)
    assert spec is not None and spec.parameter_group is None and spec.db_instance_identifier is None
    run(hook, spec)
    assert cluster_values(rds, "custom-cl")["autovacuum_naptime"] == ("60", "user")
    assert not bulk_tags(tags(rds, "w1-pg"))
    run(hook, hook.exit(KEY))
    assert cluster_values(rds, "custom-cl") == before


def test_default_cluster_group_is_refused_with_what_to_do(rds: Any) -> None:
    # what RDS reports for a cluster created without a group (moto would say default.aurora8.0)
    make_cluster(rds, group="default.aurora-postgresql15")
    before_writer = values(rds, "w1-pg")
    hook = BulkModeHook(
        BulkModeTarget(db_instance_identifier="w1", db_cluster_identifier="cl1"),
        settings=CLUSTER_SETTINGS,
    )
    with pytest.raises(
        BulkModeRefusedError, match=r"default DB cluster parameter group.*copy-db-cluster"
    ):
        hook.enter(KEY)
    # refused before any change: not even the instance-level default went to the writer's group
    assert values(rds, "w1-pg") == before_writer
    assert not bulk_tags(tags(rds, "w1-pg"))


def test_shared_cluster_group_is_refused(rds: Any) -> None:
    make_cluster(rds, "cl1", members=("w1",))
    make_cluster(rds, "cl2", members=("w2",))
    before = cluster_values(rds, "custom-cl")
    hook = BulkModeHook(
        BulkModeTarget(db_cluster_identifier="cl1"),
        settings={**CLUSTER_SETTINGS, "maintenance_work_mem": None},
    )
    with pytest.raises(BulkModeRefusedError, match=r"shared with cluster\(s\) cl2"):
        hook.enter(KEY)
    assert cluster_values(rds, "custom-cl") == before
    assert not bulk_tags(cluster_tags(rds, "custom-cl"))


def test_cluster_level_setting_without_db_cluster_identifier_is_refused(rds: Any) -> None:
    make_cluster(rds)
    before_cluster, before_writer = cluster_values(rds, "custom-cl"), values(rds, "w1-pg")
    hook = BulkModeHook(BulkModeTarget(db_instance_identifier="w1"), settings=CLUSTER_SETTINGS)
    with pytest.raises(
        BulkModeRefusedError,
        match=r"autovacuum_naptime, autovacuum_vacuum_cost_limit: cluster-level.*"
        r"db_cluster_identifier='cl1'",
    ):
        hook.enter(KEY)
    assert cluster_values(rds, "custom-cl") == before_cluster
    assert values(rds, "w1-pg") == before_writer
    assert not bulk_tags(tags(rds, "w1-pg"))


def test_instance_level_setting_without_instance_is_refused(rds: Any) -> None:
    make_cluster(rds)
    before = cluster_values(rds, "custom-cl")
    hook = BulkModeHook(BulkModeTarget(db_cluster_identifier="cl1"), settings=CLUSTER_SETTINGS)
    with pytest.raises(
        BulkModeRefusedError,
        match=r"maintenance_work_mem: instance-level.*db_instance_identifier='w1'",
    ):
        hook.enter(KEY)  # maintenance_work_mem is Aurora PostgreSQL's default, instance-level
    assert cluster_values(rds, "custom-cl") == before
    assert not bulk_tags(cluster_tags(rds, "custom-cl"))


def test_two_leases_on_the_cluster_group_restore_only_at_the_last_exit(rds: Any) -> None:
    make_cluster(rds)
    before = cluster_values(rds, "custom-cl")
    hook = BulkModeHook(
        BulkModeTarget(db_cluster_identifier="cl1"),
        settings={**CLUSTER_SETTINGS, "maintenance_work_mem": None},
    )
    other = LeaseKey.of("backfill", "public.orders", "2023-12-01")
    run(hook, hook.enter(KEY))
    run(hook, hook.enter(other))
    leases = [k for k in cluster_tags(rds, "custom-cl") if k.startswith("bulkload:lease:")]
    assert len(leases) == 2
    assert hook.exit(KEY) is None
    assert cluster_values(rds, "custom-cl")["autovacuum_naptime"] == ("60", "user")
    run(hook, hook.exit(other))
    assert cluster_values(rds, "custom-cl") == before
    assert not bulk_tags(cluster_tags(rds, "custom-cl"))


def test_expired_cluster_lease_is_restored_by_the_next_exit(rds: Any) -> None:
    make_cluster(rds)
    before = cluster_values(rds, "custom-cl")
    clock = [1_000_000.0]
    hook = BulkModeHook(
        BulkModeTarget(db_cluster_identifier="cl1"),
        settings={**CLUSTER_SETTINGS, "maintenance_work_mem": None},
        clock=lambda: clock[0],
    )
    run(hook, hook.enter(LeaseKey.of("crashed", "t", "x"), ttl=60))
    assert hook.renew(LeaseKey.of("crashed", "t", "x"), ttl=60)
    assert not hook.renew(KEY, ttl=60)
    clock[0] += 61
    run(hook, hook.exit(KEY))
    assert cluster_values(rds, "custom-cl") == before


def test_static_cluster_parameter_needs_the_reboot_policy(rds: Any) -> None:
    make_cluster(rds)
    before = cluster_values(rds, "custom-cl")
    settings = {"autovacuum_max_workers": "8", "maintenance_work_mem": None}
    with pytest.raises(
        BulkModeRefusedError, match=r"autovacuum_max_workers on cluster cl1.*reboot"
    ):
        BulkModeHook(BulkModeTarget(db_cluster_identifier="cl1"), settings=settings).enter(KEY)
    assert cluster_values(rds, "custom-cl") == before
    hook = BulkModeHook(
        BulkModeTarget(db_cluster_identifier="cl1"), settings=settings, reboot_policy="allowed"
    )
    spec = hook.enter(KEY)
    assert member_status(rds) == {"w1": "pending-reboot", "r1": "pending-reboot"}
    run(hook, spec)  # reboots every member waiting for the cluster group
    assert member_status(rds) == {"w1": "in-sync", "r1": "in-sync"}
    assert cluster_values(rds, "custom-cl")["autovacuum_max_workers"] == ("8", "user")
    run(hook, hook.exit(KEY))
    assert cluster_values(rds, "custom-cl") == before
    assert member_status(rds) == {"w1": "in-sync", "r1": "in-sync"}
