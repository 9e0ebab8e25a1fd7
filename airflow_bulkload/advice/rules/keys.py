"""Rules on the table's primary key: missing, random, wide, and input out of key order."""

from __future__ import annotations

import re
from collections.abc import Iterator

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding, PreflightInputs
from airflow_bulkload.advice.plan import input_in_key_order
from airflow_bulkload.advice.rules.context import INFO, WARN, RuleContext
from airflow_bulkload.catalog import ColumnInfo, IndexInfo

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
