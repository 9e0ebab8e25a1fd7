"""Load modes: what a load does to the rows already in the table.

* ``append`` (default): the input's rows are added to the table, chunk by chunk; a failed run
  leaves its committed chunks visible (the ledger makes a re-run finish them exactly once).
* ``replace``: the input becomes the table. Chunks load into a **work table** created from the
  target's definition (its indexes dropped for the load and rebuilt after), which then takes the
  target's place in one atomic swap: readers see the old rows or the new ones, never a
  half-loaded table. A failed run drops the work table and leaves the target as it was.
* ``upsert``: rows whose key is in the table replace those rows, the others are added. Chunks load
  into a work table (UNLOGGED on PostgreSQL) in parallel, then merge into the target by key in
  batches (``INSERT ... ON CONFLICT ... DO UPDATE`` / ``ON DUPLICATE KEY UPDATE``). A merge is
  the same whether it runs once or again, so a retry or a killed worker neither loses nor doubles.

The work table's name is derived from the target's (:func:`work_table`), so every task of the
pipeline finds it without passing it around, and a second load of the same table (which the
table claim keeps out) could never share it unnoticed. Pure functions only: the SQL is the
dialects' (their ``WorkTables`` role).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_bulkload.catalog import TableRef

APPEND = "append"
REPLACE = "replace"
UPSERT = "upsert"
MODES = (APPEND, REPLACE, UPSERT)

#: what a work table's name ends with, per mode; the stale ones a killed run left are found by it
WORK_SUFFIX = {REPLACE: "__bl_new", UPSERT: "__bl_upsert"}
#: the old table's name for the moment of the swap (dropped in the same step)
OLD_SUFFIX = "__bl_old"


def parse_mode(value: Any) -> str:
    """``append``/``replace``/``upsert`` (any case, as a template renders it); else ``ValueError``."""
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {value!r}")
    return str(text)


def parse_upsert_keys(value: Any) -> list[str] | None:
    """``None``/empty -> ``None`` (the primary key); a list of column names, or their text.

    Text (from a template or a UI Param) is split on commas: ``"tenant_id, email"``.
    """
    if value is None:
        return None
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",")]
        if value.strip() in ("", "None", "null"):
            return None
    elif isinstance(value, (list, tuple)):
        parts = [part.strip() if isinstance(part, str) else part for part in value]
    else:
        raise ValueError(f"upsert_keys must be a list of column names, got {value!r}")
    if not parts or any(not isinstance(part, str) or not part for part in parts):
        raise ValueError(f"upsert_keys must be non-empty column names, got {value!r}")
    if len(set(parts)) != len(parts):
        raise ValueError(f"upsert_keys names a column twice: {value!r}")
    return parts


def parse_mode_arguments(mode: Any, upsert_keys: Any) -> tuple[str, list[str] | None]:
    """``mode`` and ``upsert_keys`` as rendered, checked together (``ValueError``).

    ``upsert_keys`` only goes with ``mode="upsert"``.
    """
    parsed, keys = parse_mode(mode), parse_upsert_keys(upsert_keys)
    if keys and parsed != UPSERT:
        raise ValueError(f"upsert_keys is for mode='upsert', not mode={mode!r}")
    return parsed, keys


def _derived(table: TableRef, suffix: str, max_length: int) -> TableRef:
    name = table.name + suffix
    if len(name.encode("utf-8")) > max_length:
        # a long name keeps a readable prefix and a hash of the whole, so two long names that
        # share a prefix still get work tables of their own
        digest = hashlib.sha256(table.name.encode("utf-8")).hexdigest()[:8]
        room = max_length - len(suffix) - len(digest) - 1
        prefix = table.name.encode("utf-8")[:room].decode("utf-8", "ignore")
        name = f"{prefix}_{digest}{suffix}"
    return TableRef(name=name, schema=table.schema)


def work_table(table: TableRef, mode: str, max_length: int) -> TableRef:
    """The work table a ``replace``/``upsert`` load of ``table`` fills (same schema)."""
    return _derived(table, WORK_SUFFIX[mode], max_length)


def old_table(table: TableRef, max_length: int) -> TableRef:
    """The name the old table has for the moment of a ``replace`` swap."""
    return _derived(table, OLD_SUFFIX, max_length)


def input_columns(
    table_columns: Sequence[str], loaded: Sequence[str], *, fold_case: bool
) -> list[str]:
    """The table's columns the input names, in table order.

    A name matches its column exactly, else (``fold_case``: MySQL, whose column names are
    case-insensitive) in any case when only one column has it.
    """
    folded: dict[str, list[str]] = {}
    for column in table_columns:
        folded.setdefault(column.casefold(), []).append(column)
    wanted = set()
    for name in loaded:
        if name in table_columns:
            wanted.add(name)
        elif fold_case and len(folded.get(name.casefold(), [])) == 1:
            wanted.add(folded[name.casefold()][0])
    return [c for c in table_columns if c in wanted]


def merge_columns(
    table_columns: Sequence[str],
    loaded: Sequence[str] | None,
    keys: Sequence[str],
    *,
    fold_case: bool = False,
) -> tuple[list[str], list[str]]:
    """The columns an upsert inserts and those it updates, in table order.

    Only the columns the input holds (``loaded``; all when ``None``): a column the input lacks
    keeps its value on an updated row and gets its default on an inserted one (names match as
    :func:`input_columns` says). The keys are inserted, never updated. A key the input lacks is
    refused.
    """
    present = (
        list(table_columns)
        if loaded is None
        else input_columns(table_columns, loaded, fold_case=fold_case)
    )
    missing = [key for key in keys if key not in present]
    if missing:
        raise ValueError(
            f"the upsert key column(s) {missing} are not in the input's columns {present}: "
            "every row must carry its key"
        )
    return present, [c for c in present if c not in keys]


@dataclass(frozen=True)
class MergeSpec:
    """One upsert's merge: ``work`` into ``table`` by ``keys``.

    It inserts ``columns`` and, for a key already in ``table``, updates ``update``.
    """

    table: TableRef
    work: TableRef
    columns: tuple[str, ...]
    update: tuple[str, ...]
    keys: tuple[str, ...]


def batch_bounds(total_pages: int, pages_per_batch: int) -> list[tuple[int, int]]:
    """Page ranges ``[start, end)`` covering ``total_pages`` (at least one, possibly empty)."""
    if pages_per_batch < 1:
        raise ValueError("pages_per_batch must be at least 1")
    bounds = [
        (start, min(start + pages_per_batch, total_pages))
        for start in range(0, total_pages, pages_per_batch)
    ]
    # one open-ended last range catches rows added past the size read before the merge
    if bounds:
        bounds[-1] = (bounds[-1][0], -1)
    return bounds or [(0, -1)]
