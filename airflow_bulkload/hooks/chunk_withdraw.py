"""Taking committed chunks back out of a table: every one of them, or none.

A reload, the re-run of a load whose input was corrected, and a stale ledger entry take the rows
that earlier chunks loaded back out (by key, read again from the chunks as they loaded) before
the input loads. Many chunks go out in **one transaction**: a chunk that cannot go (a row edited
since it loaded, a count that does not match the ledger, an object overwritten mid-way) rolls
back the ones before it, so a date is never left half withdrawn. Before that transaction, every
chunk's object is checked readable (:func:`withdrawable_specs`), so the common refusal costs no
database work.

What the one transaction holds until it commits: a claim (lock) per chunk, the deleted rows and,
on PostgreSQL, the scratch copies of the chunks read so far (a truncated temporary table keeps
its old files until commit): server disk in proportion to what is withdrawn, not worker disk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from contextlib import ExitStack
from typing import TYPE_CHECKING, Any

from airflow_bulkload.catalog import ChunkResult, LedgerEntry, TableRef
from airflow_bulkload.dialects import LoadInto, Withdrawal, WithdrawScratch
from airflow_bulkload.exceptions import BulkLoadError, ChunkLoadError, WithdrawMismatchError
from airflow_bulkload.staging.direct import (
    check_withdrawable,
    open_chunk_stream,
    staged_chunk_replaced,
)
from airflow_bulkload.staging.manifest import ChunkSpec, read_manifest
from airflow_bulkload.staging.planning import MANIFEST_NAME

if TYPE_CHECKING:
    from airflow_bulkload.dialects import Dialect

log = logging.getLogger(__name__)


def withdrawable_specs(chunk_keys: Sequence[str], bucket: str, s3: Any) -> dict[str, ChunkSpec]:
    """Each ledger chunk key's spec, from its staging's manifest, once all are found readable.

    Each chunk is checked as its load read it (:func:`check_withdrawable`); the first that is
    not raises before any database work. Each manifest is read once.
    """
    manifests: dict[str, dict[str, ChunkSpec]] = {}
    specs: dict[str, ChunkSpec] = {}
    for key in chunk_keys:
        uri = f"s3://{bucket}/{key}"
        manifest_uri = uri.rsplit("/", 1)[0] + "/" + MANIFEST_NAME
        if manifest_uri not in manifests:
            manifest = read_manifest(s3, manifest_uri)
            manifests[manifest_uri] = {c.key: c for c in manifest.chunks} if manifest else {}
        spec = manifests[manifest_uri].get(key)
        if spec is None:
            raise BulkLoadError(
                f"{uri} was loaded by an earlier load of this date, but its manifest is gone "
                f"({manifest_uri} is missing or no longer lists it: an S3 lifecycle rule, a "
                "person): its rows cannot be identified to take them back. Nothing was taken out"
            )
        try:
            check_withdrawable(spec, s3)
        except ChunkLoadError as exc:
            raise exc.__class__(
                exc.source,
                f"{exc.reason}. All {len(chunk_keys)} chunk(s) to take out are checked before "
                "any is",
                expected=exc.expected,
                outcome="nothing was taken out of the table",
            ) from exc
        specs[key] = spec
    return specs


def withdraw_chunks(
    dialect: Dialect,
    conn: Any,
    table: TableRef,
    withdrawals: Sequence[Withdrawal],
    *,
    s3: Any,
    load_prefixes: Sequence[str] = (),
    skip_changed: bool = False,
) -> list[ChunkResult]:
    """Take every withdrawal's chunk back out of ``table`` in one transaction; what each took.

    The chunks' claims are taken first, in key order (two withdraws never wait on each other in
    a circle), and each ledger entry must still be the one the withdraw was planned on, else it
    refuses (``skip_changed``: that chunk is left to the task that changed it). A chunk
    with key columns is then read into a scratch table and its rows deleted, one chunk at a
    time, each count checked against its ledger entry (:func:`check_withdrawn`). Chunks whose
    rows match on every column (no key) are all read first and deleted at once, their count
    checked together (:func:`check_withdrawn_together`): two of them may hold equal rows, and
    the table is scanned once. ``load_prefixes``: the load records of these stagings are deleted
    in the same transaction. Any failure rolls every chunk back, and says so.
    """
    ordered = sorted(withdrawals, key=lambda w: w.entry.chunk_key)
    if not ordered:
        return []
    log.info("taking %d chunk(s) back out of %s, in one transaction", len(ordered), table)
    taken: list[ChunkResult] = []
    finished = False
    with ExitStack() as stack:
        scratches: dict[_Shape, WithdrawScratch] = {}
        for withdrawal in ordered:
            shape = _shape(withdrawal)
            if shape not in scratches:
                scratches[shape] = stack.enter_context(
                    dialect.withdraw_scratch(
                        conn,
                        table,
                        list(shape[0]) or None,
                        keyless=shape[1],
                        tag=withdrawal.entry.chunk_key,
                    )
                )
        keyless = [w for w in ordered if not w.key_columns]
        # read before the transaction: a MySQL ledger read ends the session's snapshot
        others_loaded = bool(keyless) and dialect.ledger_rows(conn, table) > sum(
            w.entry.rows for w in ordered
        )
        try:
            with dialect.transaction(conn):
                ordered = _claim(dialect, conn, table, ordered, skip_changed=skip_changed)
                keyless = [w for w in ordered if not w.key_columns]
                for withdrawal in (w for w in ordered if w.key_columns):
                    taken.append(_withdraw_keyed(dialect, conn, withdrawal, scratches, s3))
                if keyless:
                    taken += _withdraw_keyless(
                        dialect, conn, table, keyless, scratches, s3, others_loaded=others_loaded
                    )
                for prefix in load_prefixes:
                    dialect.delete_load_records(conn, table, prefix)
                finished = True
        except Exception as exc:
            if not finished:  # a failed commit leaves the outcome to the server
                exc.add_note(
                    f"The withdraw of {len(ordered)} chunk(s) from {table} rolled back as one: "
                    "nothing was taken out, and the table and its chunk ledger are as they were"
                )
            raise
    for result in taken:
        log.info("%s: took its %d rows back out of %s", result.uri, result.rows, table)
    return taken


#: what a scratch table is made for: the chunks' columns (empty: the table's), and keyless
_Shape = tuple[tuple[str, ...], bool]


def _shape(withdrawal: Withdrawal) -> _Shape:
    return (tuple(withdrawal.chunk.columns or ()), not withdrawal.key_columns)


def _claim(
    dialect: Dialect,
    conn: Any,
    table: TableRef,
    withdrawals: list[Withdrawal],
    *,
    skip_changed: bool,
) -> list[Withdrawal]:
    """Claim every chunk; the withdrawals whose ledger entry is still the one planned on.

    An entry that changed while the claim waited (another task took the chunk out, or loaded it
    again) raises, or with ``skip_changed`` leaves that chunk to the other task.
    """
    unchanged = []
    for withdrawal in withdrawals:
        now = dialect.claim_chunk(conn, table, withdrawal.chunk)
        planned = withdrawal.entry
        # the time it was written tells a chunk reloaded by the same load (a zombie task and
        # its retry) from the entry planned on
        if now is not None and (now.checksum, now.rows, now.load_id, now.loaded_at) == (
            planned.checksum,
            planned.rows,
            planned.load_id,
            planned.loaded_at,
        ):
            unchanged.append(withdrawal)
        elif skip_changed:
            log.info(
                "%s: another task changed its ledger entry while this one waited; leaving it",
                withdrawal.chunk.uri,
            )
        else:
            said = "no entry" if now is None else f"load {now.load_id}, {now.rows} rows"
            raise BulkLoadError(
                f"{withdrawal.chunk.uri}: another task took this chunk out of {table}, or loaded "
                f"it again, while this withdraw waited for its claim (the chunk ledger said load "
                f"{planned.load_id}, {planned.rows} rows; it now says {said}). Nothing was taken "
                "out; run again, and it starts from the ledger as it is then"
            )
    return unchanged


def forget_chunks(
    dialect: Dialect, conn: Any, table: TableRef, chunks: Sequence[tuple[LedgerEntry, ChunkSpec]]
) -> None:
    """Drop ledger entries whose rows are gone, in one transaction, under the chunks' claims.

    An entry that changed while its claim waited (another task loaded the chunk again) stays.
    """
    withdrawals = [Withdrawal(table, entry, spec, []) for entry, spec in chunks]
    with dialect.transaction(conn):
        for withdrawal in _claim(dialect, conn, table, withdrawals, skip_changed=True):
            dialect.forget_chunk(conn, withdrawal.entry)


def _read_into(
    dialect: Dialect, conn: Any, withdrawal: Withdrawal, scratch: WithdrawScratch, s3: Any
) -> None:
    """Read a chunk, as it loaded, into ``scratch``; a replaced staged chunk raises."""
    spec = withdrawal.chunk
    with open_chunk_stream(spec, aws_conn_id=None, client=s3, to_withdraw=True) as stream:
        into = LoadInto(scratch.table, scratch.columns, spec.format)
        dialect.load_stream(conn, into, stream, spec.uri)
        try:  # one replaced by other bytes of the same size passes the HEAD check
            stream.verify(spec.checksum)
        except ChunkLoadError as exc:
            raise staged_chunk_replaced(spec, "its sha256 is not the manifest's") from exc


def _withdraw_keyed(
    dialect: Dialect,
    conn: Any,
    withdrawal: Withdrawal,
    scratches: dict[_Shape, WithdrawScratch],
    s3: Any,
) -> ChunkResult:
    """One chunk with key columns, in the withdraw's transaction."""
    started, spec, entry = time.monotonic(), withdrawal.chunk, withdrawal.entry
    deleted = 0
    if not dialect.table_is_empty(conn, withdrawal.table):  # else its rows are gone already
        scratch = scratches[_shape(withdrawal)]
        _read_into(dialect, conn, withdrawal, scratch, s3)
        deleted = dialect.withdraw_rows(conn, [withdrawal], scratch)
        check_withdrawn(entry, spec.uri, withdrawal.table, deleted, exact=withdrawal.exact)
        if deleted < entry.rows:  # accepted as rows deleted by hand, unless its keys are there
            _check_probe_keys_gone(dialect, conn, withdrawal)
    dialect.forget_chunk(conn, entry)
    seconds = time.monotonic() - started
    return ChunkResult(spec.uri, deleted, entry.bytes, seconds, False, "withdraw")


def _check_probe_keys_gone(dialect: Dialect, conn: Any, withdrawal: Withdrawal) -> None:
    """Raise when a chunk that took fewer rows than it loaded left its first or last key.

    Those keys (as the table stored them) name rows the chunk inserted: still there after its
    delete, the chunk as read now does not hold the keys it loaded (a session time zone that
    changed since, for a timestamp key), its rows were not taken, and reloading would add them
    a second time. Only where the rows match on the probe's key. The error rolls the
    withdrawing transaction back.
    """
    probe = withdrawal.entry.probe
    if probe is None or list(probe.columns) != withdrawal.key_columns:
        return
    keys = [probe.first, probe.last]
    still = dialect.keys_present(conn, withdrawal.table, list(probe.columns), keys)
    left = [key for key, there in zip(keys, still, strict=True) if there]
    if left:
        raise WithdrawMismatchError(
            f"{withdrawal.chunk.uri}: taking this chunk back out of {withdrawal.table} left its "
            f"key ({', '.join(probe.columns)}) = ({', '.join(map(str, left[0]))}) in the table: "
            "the chunk, read now, does not hold the keys it loaded (a session time zone that "
            "changed since, for a timestamp key?), so its rows were not taken, and reloading "
            "would add them a second time. Nothing was deleted; load with the session settings "
            "of the first load, or delete the date's rows by hand"
        )


def _withdraw_keyless(
    dialect: Dialect,
    conn: Any,
    table: TableRef,
    withdrawals: list[Withdrawal],
    scratches: dict[_Shape, WithdrawScratch],
    s3: Any,
    *,
    others_loaded: bool,
) -> list[ChunkResult]:
    """The chunks whose rows match on every column, at once, in the withdraw's transaction.

    ``others_loaded``: the ledger says loads other than this withdraw's chunks put rows in the
    table.

    Each chunk's result counts its share of the rows deleted, in chunk order, and of the time.
    """
    started = time.monotonic()
    groups: dict[_Shape, list[Withdrawal]] = {}
    for withdrawal in withdrawals:
        _read_into(dialect, conn, withdrawal, scratches[_shape(withdrawal)], s3)
        groups.setdefault(_shape(withdrawal), []).append(withdrawal)
    deleted = sum(
        dialect.withdraw_rows(conn, group, scratches[shape]) for shape, group in groups.items()
    )
    # none is left, and by the ledger no other load had rows in it: every row left was theirs
    only_theirs_left = not others_loaded and dialect.table_is_empty(conn, table)
    check_withdrawn_together(withdrawals, table, deleted, emptied=only_theirs_left)
    seconds = (time.monotonic() - started) / len(withdrawals)
    results, left = [], deleted
    for withdrawal in withdrawals:
        dialect.forget_chunk(conn, withdrawal.entry)
        share, left = min(withdrawal.entry.rows, left), left - min(withdrawal.entry.rows, left)
        results.append(
            ChunkResult(
                withdrawal.chunk.uri, share, withdrawal.entry.bytes, seconds, False, "withdraw"
            )
        )
    return results


def check_withdrawn(
    entry: LedgerEntry, uri: str, table: TableRef, deleted: int, *, exact: bool
) -> None:
    """Raise when a chunk's withdraw deleted rows it cannot have inserted.

    That is more than the ledger says it loaded, or, with ``exact``, another count. The error rolls
    the withdrawing transaction back.
    """
    if deleted > entry.rows or (exact and deleted != entry.rows):
        raise WithdrawMismatchError(
            f"{uri}: taking this chunk back out of {table} would delete {deleted} rows, but the "
            f"chunk ledger says it loaded {entry.rows} (load {entry.load_id}): rows of another "
            "load share its keys, or rows changed since. Nothing was deleted; check the table by "
            "hand before loading this input again"
        )


def check_withdrawn_together(
    withdrawals: Sequence[Withdrawal], table: TableRef, deleted: int, *, emptied: bool
) -> None:
    """Raise unless chunks matched on every column deleted exactly the rows they loaded.

    Fewer is accepted when ``emptied``: the table is now empty and, by the ledger, no other load
    had rows in it, so every row left was one of theirs (the others were deleted before). The
    error rolls the withdrawing transaction back.
    """
    expected = sum(w.entry.rows for w in withdrawals)
    if deleted == expected or (deleted < expected and emptied):
        return
    why = (
        "another load holds rows equal to theirs, column for column"
        if deleted > expected
        else "some of their rows were deleted or changed since"
    )
    uris = ", ".join(w.chunk.uri for w in withdrawals[:3]) + (
        f" and {len(withdrawals) - 3} more" if len(withdrawals) > 3 else ""
    )
    raise WithdrawMismatchError(
        f"taking {len(withdrawals)} chunk(s) back out of {table} ({uris}), their rows matched on "
        f"every column (the table has no key the input carries), would delete {deleted} rows, "
        f"but the chunk ledger says they loaded {expected}: {why}. Nothing was deleted; check "
        "the table by hand before loading this input again"
    )
