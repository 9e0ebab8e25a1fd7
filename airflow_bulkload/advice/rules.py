"""The pre-flight rules: pure functions from plain inputs to findings.

Each rule takes the inputs, the plan the load will run with (the author's knobs over the
recommended ones) and the recommended plan, and returns its findings. Every finding cites the
measured effect it rests on (:mod:`airflow_bulkload.advice.evidence`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import (
    MB,
    Finding,
    LoadPlan,
    PreflightInputs,
    Severity,
    format_bytes,
)
from airflow_bulkload.advice.plan import (
    MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
    PARALLELISM_RULE,
    input_in_key_order,
    optimal_parallelism,
)
from airflow_bulkload.advice.windows import window_overlap
from airflow_bulkload.catalog import ColumnInfo, IndexInfo

INFO, WARN, ERROR = Severity.INFO, Severity.WARN, Severity.ERROR


@dataclass(frozen=True)
class RuleContext:
    inputs: PreflightInputs
    plan: LoadPlan  # what the load will run with
    recommended: LoadPlan  # what the advice would choose

    @property
    def table_name(self) -> str:
        return str(self.inputs.table.table)


Rule = Callable[[RuleContext], Iterator[Finding]]

# -- key column types ---------------------------------------------------------------------------
_INTEGER = re.compile(
    r"^(tiny|small|medium|big)?int(eger)?\d?\b|^(small|big)?serial\d?\b|^int[248]\b"
)
_UUID = re.compile(r"^uuid\b|^uniqueidentifier\b")
_STRING = re.compile(
    r"^(character varying|varchar|character|char|nvarchar|nchar|text|tinytext|mediumtext|longtext"
    r"|citext|bytea|binary|varbinary|blob|tinyblob)\b"
)
_HASH_NAME = re.compile(r"(uuid|guid|md5|sha\d*|hash|digest|token)", re.IGNORECASE)
_LENGTH = re.compile(r"\((\d+)\)")


def _column(inputs: PreflightInputs, name: str) -> ColumnInfo | None:
    return next((c for c in inputs.table.columns if c.name == name), None)


def _type(column: ColumnInfo | None) -> str:
    return column.data_type.strip().lower() if column else ""


def _key_width(data_type: str) -> int | None:
    if _INTEGER.match(data_type):
        return 2 if data_type.startswith(("small", "int2", "tiny")) else 8
    if _UUID.match(data_type):
        return 16
    length = _LENGTH.search(data_type)
    if _STRING.match(data_type):
        return int(length.group(1)) if length else None
    return None


def _random_key_reason(column: ColumnInfo | None) -> str | None:
    """Why a key column's values likely arrive in random order, or ``None``."""
    if column is None:
        return None
    data_type = _type(column)
    if _UUID.match(data_type):
        return f"{column.name} is a {data_type}"
    if _STRING.match(data_type):
        hint = " (its name suggests a hash/UUID)" if _HASH_NAME.search(column.name) else ""
        return f"{column.name} is a string key ({data_type}){hint}"
    return None


# -- the rules ----------------------------------------------------------------------------------
def no_primary_key(ctx: RuleContext) -> Iterator[Finding]:
    table = ctx.inputs.table
    if table.primary_key:
        return
    if ctx.inputs.traits.clustered_primary_key:
        clustered = _unique_not_null_index(ctx)
        if clustered is not None:
            yield Finding(
                "no_primary_key",
                INFO,
                f"{ctx.table_name} has no PRIMARY KEY; InnoDB clusters it by the unique NOT NULL "
                f"index {clustered.name} instead.",
                "Declare that index as the PRIMARY KEY to make the choice explicit.",
                (ev.NO_PRIMARY_KEY,),
            )
            return
        yield Finding(
            "no_primary_key",
            WARN,
            f"{ctx.table_name} has no primary key: InnoDB clusters it by a hidden generated row id, "
            f"a contention point for parallel loads (planned parallelism {ctx.plan.parallelism}).",
            "Add a primary key before loading, a surrogate BIGINT AUTO_INCREMENT if there is no "
            "natural one.",
            (ev.NO_PRIMARY_KEY,),
        )
        return
    yield Finding(
        "no_primary_key",
        INFO,
        f"{ctx.table_name} has no primary key. PostgreSQL stores rows in a heap, so the InnoDB "
        "penalty does not apply, but duplicate rows from a re-sent file cannot be detected by key.",
        "Add a primary key (a BIGINT identity if there is no natural one) if rows must be unique.",
        (ev.NO_PRIMARY_KEY,),
    )


def _unique_not_null_index(ctx: RuleContext) -> IndexInfo | None:
    for index in ctx.inputs.table.secondary_indexes:
        columns = [_column(ctx.inputs, name) for name in index.columns]
        if index.is_unique and columns and all(c is not None and not c.nullable for c in columns):
            return index
    return None


def random_primary_key(ctx: RuleContext) -> Iterator[Finding]:
    pk = ctx.inputs.table.primary_key
    if not pk:
        return
    reasons = [r for r in (_random_key_reason(_column(ctx.inputs, c)) for c in pk) if r]
    if not reasons:
        return
    effect = (ev.MD5_PRIMARY_KEY, ev.RANDOM_PRIMARY_KEY_AURORA)
    if ctx.inputs.traits.clustered_primary_key:
        yield Finding(
            "random_primary_key",
            WARN,
            f"The primary key of {ctx.table_name} is likely random or wide: {'; '.join(reasons)}. "
            "InnoDB inserts such keys at random points of the clustered index (page splits, "
            "more I/O as the table outgrows the buffer pool).",
            "Prefer a sequential BIGINT (AUTO_INCREMENT) primary key and keep the natural key as a "
            "UNIQUE index; if the key must stay, sort the input by it (sort=True).",
            effect,
        )
        return
    yield Finding(
        "random_primary_key",
        INFO,
        f"The primary key of {ctx.table_name} is likely random: {'; '.join(reasons)}. PostgreSQL "
        "keeps rows in a heap, but the key's B-tree takes random inserts (the measured penalty "
        "is InnoDB's; on PostgreSQL it applies to the index only).",
        "Prefer a sequential BIGINT identity key with the natural key as a UNIQUE index; for a "
        "large load into a non-empty table, drop and rebuild the indexes (drop_indexes=True).",
        effect,
    )


def wide_primary_key(ctx: RuleContext) -> Iterator[Finding]:
    """Composite keys; a single wide column is a string or UUID, which the random-key rule covers."""
    pk = ctx.inputs.table.primary_key
    if len(pk) < 2:
        return
    widths = [_key_width(_type(_column(ctx.inputs, c))) for c in pk]
    width = f", at least {sum(w for w in widths if w)} bytes" if any(widths) else ""
    yield Finding(
        "wide_primary_key",
        WARN if ctx.inputs.traits.clustered_primary_key else INFO,
        f"The primary key of {ctx.table_name} is a composite key of {len(pk)} columns "
        f"({', '.join(pk)}{width}). "
        + (
            "InnoDB repeats the key in every secondary index entry and fits fewer rows per page."
            if ctx.inputs.traits.clustered_primary_key
            else "Every index entry carries it; on PostgreSQL the heap is unaffected."
        ),
        "Prefer a single sequential BIGINT primary key and enforce the natural key with a UNIQUE "
        "index; otherwise load in key order (sort=True).",
        (ev.WIDE_PRIMARY_KEY, ev.MD5_PRIMARY_KEY),
    )


def input_not_in_key_order(ctx: RuleContext) -> Iterator[Finding]:
    if not ctx.inputs.traits.clustered_primary_key or not ctx.inputs.table.primary_key:
        return
    if ctx.plan.sort or input_in_key_order(ctx.inputs):
        return
    keeps_indexes = not ctx.plan.drop_indexes and ctx.inputs.table.secondary_indexes
    yield Finding(
        "input_not_in_key_order",
        INFO if keeps_indexes else WARN,
        f"Sorting is off and the input is not known to be in primary-key order "
        f"({', '.join(ctx.inputs.table.primary_key)}): InnoDB must insert rows at random points "
        "of the clustered index."
        + (
            " With the secondary indexes kept they dominate, so the gain is smaller."
            if keeps_indexes
            else ""
        ),
        "Leave sort on auto (or sort=True) so staging orders the chunks by the primary key, or stage "
        "input that is already sorted and say so in the manifest's sort_key.",
        (ev.PK_ORDER, ev.PK_ORDER_LARGE) + ((ev.PK_ORDER_MARIADB,) if keeps_indexes else ()),
    )


def secondary_indexes(ctx: RuleContext) -> Iterator[Finding]:
    indexes = ctx.inputs.table.secondary_indexes
    if not indexes:
        return
    names = ", ".join(ix.name for ix in indexes)
    # what dropping measured: one rebuild pass (InnoDB), parallel rebuild sessions (PostgreSQL)
    effect = (ev.SECONDARY_INDEXES,) + (
        (ev.DROP_INDEXES_MYSQL,)
        if not ctx.inputs.traits.parallel_index_builds
        else (ev.DROP_INDEXES_POSTGRES,)
    )
    why = ctx.recommended.rationale.get("drop_indexes", "")
    if ctx.plan.drop_indexes:
        yield Finding(
            "secondary_indexes",
            INFO,
            f"{len(indexes)} secondary index(es) on {ctx.table_name} ({names}) will be dropped "
            f"before the load and rebuilt after it ({why}).",
            "Nothing to do; prune indexes no query uses to make the rebuild shorter.",
            effect,
        )
        return
    forced = ctx.recommended.drop_indexes
    severity = WARN if forced or len(indexes) >= 2 else INFO
    yield Finding(
        "secondary_indexes",
        severity,
        f"{len(indexes)} secondary index(es) on {ctx.table_name} ({names}) are maintained row by "
        "row during the load"
        + (" although the recommended plan drops them." if forced else f" ({why})."),
        (
            "Leave drop_indexes on auto (or True) to drop and rebuild them."
            if forced
            else "Remove indexes no query needs (duplicates, prefixes of other indexes); for a "
            "large load, drop_indexes=True rebuilds them once afterwards."
        ),
        effect,
    )


def redundant_indexes(ctx: RuleContext) -> Iterator[Finding]:
    """An index whose key columns are a leading prefix of another index (or the PK) is maintained
    for nothing during the load."""
    table = ctx.inputs.table
    plain = [ix for ix in table.secondary_indexes if not ix.is_unique and ix.columns]
    for index in plain:
        if getattr(index, "predicate", None):
            continue
        covering = next(
            (
                other
                for other in table.indexes
                if other is not index
                and len(other.columns) >= len(index.columns)
                and other.columns[: len(index.columns)] == index.columns
                and not getattr(other, "predicate", None)
                and (
                    len(other.columns) > len(index.columns)
                    or other.is_unique
                    or other.name < index.name
                )
            ),
            None,
        )
        if covering is None:
            continue
        yield Finding(
            "redundant_index",
            WARN,
            f"Index {index.name} ({', '.join(index.columns)}) on {ctx.table_name} is a prefix of "
            f"{covering.name} ({', '.join(covering.columns)}); every loaded row updates both.",
            f"Drop {index.name} if no query depends on it specifically (verify access methods and "
            "collations first).",
            (ev.SECONDARY_INDEXES,),
        )


def foreign_keys(ctx: RuleContext) -> Iterator[Finding]:
    fks = ctx.inputs.table.foreign_keys
    if not fks:
        return
    names = ", ".join(fk.name for fk in fks)
    if ctx.inputs.traits.foreign_keys_checked_on_load:
        yield Finding(
            "foreign_keys",
            WARN,
            f"{ctx.table_name} has {len(fks)} foreign key(s) ({names}). The load keeps "
            "foreign_key_checks on for this table (with them off an orphan row would commit and "
            "InnoDB never re-checks it), which costs ≈14 % of load time.",
            "Load parents first; an orphan row fails its chunk, naming it. Leaving the checks on "
            "is the price of a table whose foreign keys hold.",
            (ev.INTEGRITY_CHECKS,),
        )
        return
    yield Finding(
        "foreign_keys",
        WARN,
        f"{ctx.table_name} has {len(fks)} foreign key(s) ({names}); PostgreSQL checks each "
        "loaded row against the parent table (a row trigger per foreign key). The load keeps "
        "them while the table holds rows (an orphan fails its chunk) and drops them, to re-add "
        "and VALIDATE at the end, only into an empty table.",
        "For a large load, drop the foreign keys before it and re-add them after as NOT VALID, then "
        "VALIDATE CONSTRAINT (one set-based check that does not block writes).",
        (ev.INTEGRITY_CHECKS,),
    )


def input_columns(ctx: RuleContext) -> Iterator[Finding]:
    """The input's columns (header or ``columns``) against the table's, before anything loads."""
    summary = ctx.inputs.input
    if summary is None or not summary.columns:
        return
    table = ctx.inputs.table
    generated = set(table.extra.get("generated_columns") or ())
    known = {c.name: c for c in table.columns}
    folded = {c.name.lower(): c.name for c in table.columns}
    unknown = [c for c in summary.columns if c not in known]
    if unknown:
        hints = [
            f"{c!r} (the table has {folded[c.lower()]!r}: names are matched exactly)"
            if c.lower() in folded
            else repr(c)
            for c in unknown
        ]
        yield Finding(
            "input_columns",
            ERROR,
            f"the input names column(s) {', '.join(hints)} that {ctx.table_name} does not have "
            f"(its columns: {', '.join(known)}): every chunk would fail.",
            "Fix the header, or give columns=[...] naming the table's columns in file order.",
            (ev.COLUMN_MAPPING,),
        )
    if generated & set(summary.columns):
        yield Finding(
            "input_columns",
            ERROR,
            f"the input names generated column(s) {', '.join(sorted(generated & set(summary.columns)))} "
            f"of {ctx.table_name}: the server computes them and refuses loaded values.",
            "Leave them out of the input (or name them differently in columns=[...]).",
            (ev.COLUMN_MAPPING,),
        )
    present = set(summary.columns)
    missing = [
        c.name
        for c in table.columns
        if c.name not in present
        and not c.nullable
        and c.default is None
        and c.name not in generated
        and not (table.extra.get("identity_columns") and c.name in table.extra["identity_columns"])
    ]
    if missing:
        yield Finding(
            "input_columns",
            ERROR,
            f"{ctx.table_name} requires column(s) {', '.join(missing)} (NOT NULL, no default), "
            "which the input does not have: every row would fail.",
            "Add them to the input, or give the table defaults for them.",
            (ev.COLUMN_MAPPING,),
        )


def partitioned_table(ctx: RuleContext) -> Iterator[Finding]:
    partitions = ctx.inputs.table.extra.get("partitions")
    if ctx.inputs.table.extra.get("relkind") != "p":
        return
    yield Finding(
        "partitioned_table",
        INFO,
        f"{ctx.table_name} is partitioned ({len(partitions or [])} leaf partition(s)): rows are "
        "routed through the parent, autovacuum goes off per partition, and its partitioned "
        "indexes and keys are kept through the load (drop_indexes and friends do not apply).",
        "Nothing to do; a load into one partition only may target that partition directly.",
        (ev.PARTITIONED_STORAGE,),
    )


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


def triggers(ctx: RuleContext) -> Iterator[Finding]:
    table = ctx.inputs.table
    disabled = set(table.extra.get("disabled_triggers") or ())
    active = [t for t in table.triggers if t not in disabled]
    if not active:
        return
    yield Finding(
        "triggers",
        WARN,
        f"{ctx.table_name} has {len(active)} trigger(s) ({', '.join(active)}): a row trigger "
        "runs once per loaded row, inside the load transaction.",
        "If the trigger's work can be done once for the whole load (audit, summaries), do that "
        "set-based afterwards and remove the trigger for the load; otherwise budget for it.",
        (ev.TRIGGERS_PER_ROW,),
    )


def chunk_sizes(ctx: RuleContext) -> Iterator[Finding]:
    summary = ctx.inputs.input
    planned = ctx.inputs.options.chunk_size
    if planned is not None and not (MIN_CHUNK_SIZE <= planned <= MAX_CHUNK_SIZE):
        yield Finding(
            "chunk_size",
            WARN,
            f"chunk_size={format_bytes(planned)} is outside 100 MB - 1 GB.",
            f"Use a chunk size within 100 MB - 1 GB (recommended: "
            f"{format_bytes(ctx.recommended.chunk_size)}).",
            (ev.FILE_SIZE, ev.LARGE_TRANSACTIONS),
        )
    if summary is None or not summary.staged:
        return
    sizes = list(summary.chunk_bytes)
    # the last chunk holds the remainder; small is fine there
    small = [b for b in sizes[:-1] if b < MIN_CHUNK_SIZE]
    large = [b for b in sizes if b > MAX_CHUNK_SIZE]
    if small and summary.total_bytes >= MIN_CHUNK_SIZE * 2:
        average = sum(sizes) / len(sizes)
        yield Finding(
            "chunk_size",
            WARN,
            f"{len(small)} of {len(sizes)} staged chunks are under 100 MB (average "
            f"{format_bytes(average)}): each file adds open/metadata/close overhead and a "
            "transaction.",
            "Re-stage with a larger chunk size (recommended: "
            f"{format_bytes(ctx.recommended.chunk_size)}), or let staging merge small input files.",
            (ev.FILE_SIZE,),
        )
    if large:
        yield Finding(
            "chunk_size",
            WARN,
            f"{len(large)} staged chunk(s) are over 1 GB (largest {format_bytes(max(large))}): one "
            "chunk is one transaction, and a retry redoes all of it.",
            f"Re-stage with chunk_size ≤ 1 GB (recommended: "
            f"{format_bytes(ctx.recommended.chunk_size)}).",
            (ev.FILE_SIZE, ev.LARGE_TRANSACTIONS),
        )


def parallelism(ctx: RuleContext) -> Iterator[Finding]:
    inputs = ctx.inputs
    vcpus = inputs.vcpus
    # the optimum is a measurement of each engine (see optimal_parallelism)
    effect = ({"mysql": ev.PARALLEL_MYSQL, "postgres": ev.PARALLEL_POSTGRES}[inputs.engine],)
    if not vcpus:
        yield Finding(
            "parallelism",
            INFO,
            "The server's vCPU count is unknown (no RDS instance given, no vcpus=), so the planned "
            f"parallelism is {ctx.plan.parallelism}.",
            "Give db_instance_identifier/db_cluster_identifier, or vcpus= for a self-managed server.",
            effect,
        )
        return
    optimum = optimal_parallelism(inputs.engine, vcpus)
    chosen = inputs.options.parallelism
    if chosen is not None and chosen > optimum:
        rule = PARALLELISM_RULE[inputs.engine]
        yield Finding(
            "parallelism",
            WARN,
            f"parallelism={chosen} on {vcpus} vCPUs is above the measured optimum ({optimum}, "
            f"{rule}): more sessions add CPU and lock waits, not speed.",
            f"Leave parallelism on auto or set it to {optimum}.",
            effect,
        )
    chunks = inputs.input.chunk_count if inputs.input and inputs.input.staged else None
    if chosen is not None and chunks is not None and chosen > chunks:
        yield Finding(
            "parallelism",
            INFO,
            f"parallelism={chosen} but only {chunks} chunk(s) are staged: the extra workers idle.",
            "Stage smaller chunks (at least 100 MB) to keep every worker busy, or lower parallelism.",
            (ev.FILE_SIZE, *effect),
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


def local_infile(ctx: RuleContext) -> Iterator[Finding]:
    server = ctx.inputs.server
    if not ctx.inputs.traits.client_load_uses_local_infile or ctx.inputs.options.method != "client":
        return
    if server is None or server.local_infile is not False:
        return
    yield Finding(
        "local_infile",
        ERROR,
        "The server has local_infile = OFF: LOAD DATA LOCAL INFILE (method='client') will be refused.",
        "Set local_infile = 1 in the instance's custom parameter group (a dynamic parameter), or on "
        "Aurora MySQL use method='aurora_s3'.",
        (ev.LOCAL_INFILE,),
    )


def aws_s3_extension(ctx: RuleContext) -> Iterator[Finding]:
    method = ctx.inputs.options.method
    if method != "rds_s3" or method not in ctx.inputs.traits.server_side_methods:
        return
    server, instance = ctx.inputs.server, ctx.inputs.instance
    if server is not None and server.aws_s3_installed is False:
        available = server.aws_s3_available
        yield Finding(
            "aws_s3_extension",
            ERROR,
            "method='rds_s3' needs the aws_s3 extension, which is not installed in this database"
            + ("." if available else " and not available on this server (not RDS/Aurora)."),
            "Run CREATE EXTENSION aws_s3 CASCADE as the database owner."
            if available
            else "Use method='client' on a server without aws_s3.",
            (ev.AWS_S3_EXTENSION,),
        )
    if instance is not None and not instance.s3_import_roles:
        yield Finding(
            "s3_role",
            ERROR,
            f"{instance.cluster_identifier or instance.identifier} has no IAM role associated for "
            "the s3Import feature: aws_s3.table_import_from_s3 cannot read the bucket.",
            "Associate a role allowing s3:GetObject/s3:ListBucket on the bucket: "
            + (
                "add-role-to-db-cluster --feature-name s3Import."
                if instance.is_aurora
                else "add-role-to-db-instance --feature-name s3Import."
            ),
            (ev.AWS_S3_EXTENSION,),
        )


_AURORA_S3_PARAMETERS = ("aurora_load_from_s3_role", "aws_default_s3_role")


def aurora_s3_role(ctx: RuleContext) -> Iterator[Finding]:
    method = ctx.inputs.options.method
    if method != "aurora_s3" or method not in ctx.inputs.traits.server_side_methods:
        return
    server, instance = ctx.inputs.server, ctx.inputs.instance
    if instance is not None and not instance.is_aurora:
        yield Finding(
            "s3_role",
            ERROR,
            f"method='aurora_s3' (LOAD DATA FROM S3) exists only on Aurora MySQL; "
            f"{instance.identifier} runs {instance.engine}.",
            "Use method='client' (LOAD DATA LOCAL INFILE fed by the worker).",
            (ev.AURORA_S3_ROLE,),
        )
        return
    known_from_server = server is not None and server.s3_role is not None
    if known_from_server and server is not None and server.s3_role:
        return
    if instance is not None and any(
        instance.s3_role_parameters.get(p) for p in _AURORA_S3_PARAMETERS
    ):
        return
    if not known_from_server and instance is None:
        return  # nothing to judge by
    yield Finding(
        "s3_role",
        ERROR,
        "method='aurora_s3' needs an IAM role in aurora_load_from_s3_role or aws_default_s3_role; "
        "neither is set"
        + (f" for {instance.cluster_identifier or instance.identifier}." if instance else "."),
        "Associate a role allowing s3:GetObject/s3:ListBucket with the cluster "
        "(add-role-to-db-cluster) and set aws_default_s3_role to its ARN in the DB cluster "
        "parameter group.",
        (ev.AURORA_S3_ROLE,),
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


RULES: tuple[Rule, ...] = (
    no_primary_key,
    random_primary_key,
    wide_primary_key,
    input_not_in_key_order,
    secondary_indexes,
    redundant_indexes,
    foreign_keys,
    input_columns,
    partitioned_table,
    checkpoint_privilege,
    triggers,
    chunk_sizes,
    parallelism,
    storage_iops,
    maintenance_window,
    default_parameter_group,
    local_infile,
    aws_s3_extension,
    aurora_s3_role,
    anti_patterns_in_place,
)
