"""What both engines' ledgers and catalogs check and shape alike: changed rows, key lookups.

The SQL differs per engine; these rules do not, so each lives here once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow_bulkload.catalog import LedgerEntry, TableRef
from airflow_bulkload.exceptions import WithdrawChangedRowsError


def key_params(keys: list[list[Any]]) -> list[Any]:
    """The bind parameters of a key lookup: every key's values in turn, as text (NULL kept)."""
    return [None if v is None else str(v) for key in keys for v in key]


def describe_duplicate_keys(columns: list[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """``(a, b)=(1, x) x2`` for each row of key values followed by how often they occur."""
    return [f"({', '.join(columns)})=({', '.join(map(str, r[:-1]))}) x{r[-1]}" for r in rows]


def check_unchanged(
    entry: LedgerEntry, uri: str, table: TableRef, key_columns: list[str], changed: Any
) -> None:
    """Raise when ``changed`` is set, so the withdrawing transaction rolls back.

    ``changed`` is the key of a row of ``table`` that shares the chunk's key but not its other
    values: the row is not the one the chunk inserted, and reloading the chunk would overwrite it.
    """
    if changed is None:
        return
    key = ", ".join(key_columns)
    value = ", ".join("NULL" if v is None else str(v) for v in changed)
    raise WithdrawChangedRowsError(
        f"{uri}: taking this chunk back out of {table} would delete rows that changed since it "
        f"loaded (load {entry.load_id}): e.g. the row with ({key}) = ({value}) holds other "
        "values than the chunk's, so another load re-delivered its key or someone updated it, "
        "and reloading the chunk would overwrite it. Nothing was deleted. To keep the current "
        "rows, leave this date as it is (or load the input without those keys); to put the "
        "chunk's values back, delete the rows with its keys by hand, then run again"
    )
