"""The count rules of a withdraw (hooks/chunk_withdraw.py): what the ledger allows it to delete."""

from __future__ import annotations

import pytest

from airflow_bulkload.catalog import LedgerEntry, TableRef
from airflow_bulkload.dialects import Withdrawal
from airflow_bulkload.exceptions import WithdrawMismatchError
from airflow_bulkload.hooks.chunk_withdraw import check_withdrawn, check_withdrawn_together
from airflow_bulkload.staging.manifest import ChunkSpec

TABLE = TableRef(name="t", schema="s")


def entry(rows: int, n: int = 0) -> LedgerEntry:
    return LedgerEntry("s.t", f"k/chunk-{n:05d}.csv.gz", "x", rows, 100, "dag/run")


@pytest.mark.parametrize(
    ("deleted", "exact", "refused"),
    [(10, True, False), (9, True, True), (11, True, True), (9, False, False), (11, False, True)],
)
def test_a_withdraw_must_match_the_ledger(deleted: int, exact: bool, refused: bool) -> None:
    if refused:
        with pytest.raises(WithdrawMismatchError, match=f"delete {deleted} rows.*loaded 10"):
            check_withdrawn(entry(10), "s3://b/k", TABLE, deleted, exact=exact)
    else:
        check_withdrawn(entry(10), "s3://b/k", TABLE, deleted, exact=exact)


def keyless(*rows: int) -> list[Withdrawal]:
    return [
        Withdrawal(TABLE, entry(r, n), ChunkSpec(f"s3://b/k/chunk-{n:05d}.csv.gz", "x", r), [])
        for n, r in enumerate(rows)
    ]


@pytest.mark.parametrize(
    ("deleted", "emptied", "refused"),
    [
        (30, False, False),  # equal rows in two chunks: the first delete takes both copies
        (31, False, True),  # another load's equal row
        (29, False, True),  # a row deleted by hand, the table still holds others
        (29, True, False),  # ... and the table is now empty: every row left was theirs
        (31, True, True),
    ],
)
def test_chunks_matched_on_every_column_must_match_the_ledger_together(
    deleted: int, emptied: bool, refused: bool
) -> None:
    withdrawals = keyless(10, 20)
    if refused:
        with pytest.raises(WithdrawMismatchError, match=f"delete {deleted} rows.*loaded 30"):
            check_withdrawn_together(withdrawals, TABLE, deleted, emptied=emptied)
    else:
        check_withdrawn_together(withdrawals, TABLE, deleted, emptied=emptied)
