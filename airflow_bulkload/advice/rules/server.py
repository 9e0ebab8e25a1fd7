"""Rules on the instance and the server.

The loader's privileges, storage IOPS, the maintenance window, parameter groups, and durability
settings someone already traded away for speed.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import MB, Finding
from airflow_bulkload.advice.rules.context import INFO, WARN, RuleContext
from airflow_bulkload.advice.windows import window_overlap


def checkpoint_privilege(ctx: RuleContext) -> Iterator[Finding]:
    server = ctx.inputs.server
    if not ctx.inputs.traits.has_checkpoint or server is None or server.can_checkpoint is not False:
        return
    yield Finding(
        "checkpoint_privilege",
        WARN,
        "the load's user may not run CHECKPOINT (not a superuser, not in pg_checkpoint or "
        "rds_superuser): the checkpoint after the load will be skipped with a warning.",
        "GRANT pg_checkpoint TO the loader (PostgreSQL 15+) to end the load with a checkpoint; "
        "without it, crash recovery right after the load replays its WAL.",
        (ev.CHECKPOINT_AFTER_LOAD,),
    )


#: a single COPY stream demanded ≈2,750 IOPS in the gp2 measurement
WRITE_IOPS_PER_STREAM = 2750
GP2_MAX_IOPS = 16_000
GP2_BURST_IOPS = 3000
GP2_BURST_CREDITS = 5_400_000


def gp2_baseline_iops(allocated_gb: int) -> int:
    return min(max(100, 3 * allocated_gb), GP2_MAX_IOPS)


def storage_iops(ctx: RuleContext) -> Iterator[Finding]:
    instance = ctx.inputs.instance
    if instance is None or instance.is_aurora:
        return  # Aurora's storage is not provisioned per volume
    streams = ctx.plan.parallelism
    needed = streams * WRITE_IOPS_PER_STREAM
    storage = instance.storage_type.lower()
    big_input = ctx.inputs.input is None or ctx.inputs.input.data_bytes >= 1000 * MB
    if storage == "gp2":
        baseline = gp2_baseline_iops(instance.allocated_gb)
        if baseline >= needed:
            return
        burst = ""
        if instance.allocated_gb < 1000 and baseline < GP2_BURST_IOPS:
            minutes = GP2_BURST_CREDITS / (GP2_BURST_IOPS - baseline) / 60
            burst = f"; it can burst to 3,000 IOPS for about {minutes:.0f} min on full credits"
        grow_to = math.ceil(needed / 3)
        yield Finding(
            "storage_iops",
            WARN if big_input else INFO,
            f"{instance.identifier} has {instance.allocated_gb} GB of gp2: {baseline} baseline "
            f"IOPS{burst}. {streams} parallel load stream(s) may ask for ≈{needed:,} IOPS.",
            f"Move the instance to gp3 (3,000 IOPS baseline at any size, more provisionable) or "
            f"io1/io2 with ≥ {needed:,} provisioned IOPS, or grow the gp2 volume to ≥ {grow_to:,} GB; "
            "storage changes are online but can take hours, so do them ahead of the load.",
            (ev.GP2_IOPS, ev.GP2_BASELINE),
        )
        return
    if storage == "standard":
        yield Finding(
            "storage_iops",
            WARN,
            f"{instance.identifier} uses magnetic (standard) storage, not recommended for databases.",
            f"Move the instance to gp3 or io1/io2 with ≥ {needed:,} IOPS before large loads.",
            (ev.GP2_IOPS,),
        )
        return
    if storage in ("gp3", "io1", "io2") and instance.iops and instance.iops < needed:
        yield Finding(
            "storage_iops",
            INFO,
            f"{instance.identifier} has {instance.iops:,} provisioned IOPS ({storage}); "
            f"{streams} parallel load stream(s) may ask for ≈{needed:,}.",
            f"Raise provisioned IOPS toward {needed:,} for the load window if the disk queue depth "
            "grows (Performance Insights: os.diskIO.avgQueueLen).",
            (ev.GP2_IOPS,),
        )


def maintenance_window(ctx: RuleContext) -> Iterator[Finding]:
    instance = ctx.inputs.instance
    start = ctx.inputs.options.load_start
    if instance is None or start is None:
        return
    duration = ctx.inputs.options.expected_duration
    for window in instance.maintenance_windows:
        try:
            overlap = window_overlap(window, start, duration)
        except ValueError:
            continue
        if overlap is None:
            continue
        yield Finding(
            "maintenance_window",
            WARN,
            f"The load ({start:%a %H:%M} UTC, expected {duration}) overlaps the weekly maintenance "
            f"window {window} (UTC) of {instance.cluster_identifier or instance.identifier} from "
            f"{overlap:%a %H:%M}.",
            "Schedule the load outside the window, or move the window (modify-db-instance "
            "--preferred-maintenance-window).",
            (ev.MAINTENANCE_WINDOW,),
        )
        return


def default_parameter_group(ctx: RuleContext) -> Iterator[Finding]:
    instance = ctx.inputs.instance
    if instance is None:
        return
    groups = [g for g in instance.parameter_groups if g.startswith("default.")]
    if instance.cluster_parameter_group and instance.cluster_parameter_group.startswith("default."):
        groups.append(f"{instance.cluster_parameter_group} (cluster)")
    if not groups:
        return
    yield Finding(
        "default_parameter_group",
        WARN if ctx.inputs.options.bulk_mode else INFO,
        f"{instance.identifier} uses the default parameter group(s) {', '.join(groups)}: AWS does "
        "not allow modifying them, so bulk mode cannot apply its load settings.",
        "Copy the default into a custom group (copy-db-parameter-group"
        + (" / copy-db-cluster-parameter-group" if instance.is_aurora else "")
        + "), associate it with the instance ahead of time and reboot once; bulk mode then changes "
        "dynamic parameters in place, without reboots.",
        (ev.BULK_PARAMETERS,),
    )


def anti_patterns_in_place(ctx: RuleContext) -> Iterator[Finding]:
    """Settings someone already applied for speed that trade away durability."""
    table, server = ctx.inputs.table, ctx.inputs.server
    if table.extra.get("persistence") == "unlogged":
        yield Finding(
            "unlogged_table",
            WARN,
            f"{ctx.table_name} is UNLOGGED: its rows are emptied after a crash or failover and are "
            "not replicated to standbys or read replicas.",
            f"Make it a logged table again before relying on it: ALTER TABLE {ctx.table_name} SET "
            "LOGGED (rewrites the table).",
            (ev.UNLOGGED_TABLES,),
        )
    if server is not None and server.innodb_doublewrite is False:
        yield Finding(
            "doublewrite_off",
            WARN,
            "innodb_doublewrite is OFF on the server: a crash during a write can leave torn pages.",
            "Turn innodb_doublewrite back ON (it needs a restart); the load does not need it off.",
            (ev.DOUBLEWRITE,),
        )
