"""Rules on the input: its columns against the table's, chunk sizes and parallelism."""

from __future__ import annotations

from collections.abc import Iterator

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding, format_bytes
from airflow_bulkload.advice.plan import (
    MAX_CHUNK_SIZE,
    MIN_CHUNK_SIZE,
    PARALLELISM_RULE,
    loads_take_turns,
    optimal_parallelism,
)
from airflow_bulkload.advice.rules.context import ERROR, INFO, WARN, RuleContext


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
    chosen = inputs.options.parallelism
    if autoinc := loads_take_turns(inputs):
        more = chosen is not None and chosen > 1
        yield Finding(
            "parallelism",
            WARN,
            f"{ctx.table_name} has an AUTO_INCREMENT column ({', '.join(autoinc)}) and the server "
            "runs innodb_autoinc_lock_mode < 2: each LOAD DATA holds the table's AUTO-INC lock "
            "until it ends, even when the file gives the ids, so loads into it run one at a time"
            + (
                f"; with parallelism={chosen} a waiting load fails after innodb_lock_wait_timeout."
                if more
                else " (the plan loads one chunk at a time)."
            ),
            "Set innodb_autoinc_lock_mode = 2 (MySQL 8.0's default; a static parameter: change it "
            "in the DB parameter group and reboot) to load in parallel"
            + (", or set parallelism=1." if more else "."),
            (ev.AUTOINC_TABLE_LOCK,),
        )
    # the optimum is a measurement of each engine (see optimal_parallelism)
    effect = (
        {"mysql": ev.PARALLEL_MYSQL, "postgres": ev.PARALLEL_POSTGRES}[inputs.engine],
        ev.PARALLEL_TWO_VCPUS,
    )
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
