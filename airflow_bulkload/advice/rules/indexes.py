"""Rules on what the load maintains row by row: indexes, foreign keys, triggers, partitions."""

from __future__ import annotations

from collections.abc import Iterator

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding
from airflow_bulkload.advice.rules.context import INFO, WARN, RuleContext


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
    """Indexes that lead another index (or the primary key) with the same columns.

    An index whose key columns are a leading prefix of another index is maintained for nothing
    during the load.
    """
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
