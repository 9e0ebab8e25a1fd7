"""Rules on the load mode: which of append, replace and upsert fits the input and the table."""

from __future__ import annotations

from collections.abc import Iterator

from airflow_bulkload.advice import evidence as ev
from airflow_bulkload.advice.models import Finding, format_bytes
from airflow_bulkload.advice.rules.context import INFO, WARN, RuleContext

#: an input at least this share of the table's rows (or bytes) looks like a full snapshot
SNAPSHOT_SHARE = 0.9
#: a replace whose input is under this share of the table rewrites a table for an increment
INCREMENT_SHARE = 0.1


def _share(ctx: RuleContext) -> float | None:
    """The input's size as a share of the table's (rows when both are known, else bytes)."""
    summary, table = ctx.inputs.input, ctx.inputs.table
    if summary is None or table.estimated_rows <= 0:
        return None
    if summary.total_rows:
        return summary.total_rows / table.estimated_rows
    if table.size_bytes > 0 and summary.data_bytes:
        return summary.data_bytes / table.size_bytes
    return None


def load_mode(ctx: RuleContext) -> Iterator[Finding]:
    """Advise the mode that fits: a snapshot replaces, an increment appends or upserts."""
    mode = ctx.inputs.options.mode
    share = _share(ctx)
    table = ctx.inputs.table
    if share is None:
        if mode == "upsert" and ctx.inputs.input is not None and table.estimated_rows == 0:
            yield Finding(
                "load_mode",
                INFO,
                f"{ctx.table_name} looks empty: an upsert loads into a work table and merges it, "
                "where an append loads straight into the table.",
                "Use mode='append' for a first load; upsert for the increments after it.",
                (ev.LOAD_MODES,),
            )
        return
    if mode in ("append", "upsert") and share >= SNAPSHOT_SHARE:
        yield Finding(
            "load_mode",
            INFO,
            f"the input holds about {share:.0%} of {ctx.table_name}'s "
            f"~{table.estimated_rows:,} rows ({format_bytes(table.size_bytes)}): if it is a full "
            f"snapshot, mode={mode!r} "
            + (
                "adds it beside the rows already there"
                if mode == "append"
                else "merges every row through the table's indexes"
            )
            + ".",
            "Use mode='replace' for a full snapshot: it loads into a fresh table with its indexes "
            "dropped and swaps it in at once (readers keep the old rows until then).",
            (ev.LOAD_MODES,),
        )
    if mode == "replace" and share < INCREMENT_SHARE:
        yield Finding(
            "load_mode",
            WARN,
            f"mode='replace' rewrites all of {ctx.table_name} (~{table.estimated_rows:,} rows) "
            f"for an input of about {share:.0%} of it, and the table then holds only the input.",
            "If the input is an increment, use mode='append' (new rows) or mode='upsert' (new and "
            "changed rows by key).",
            (ev.LOAD_MODES,),
        )
