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

from airflow_bulkload.catalog import ChunkResult, TableRef
from airflow_bulkload.dialects import Withdrawal, WithdrawScratch
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
    from airflow_bulkload.s3io import ChunkStream

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
) -> list[ChunkResult]:
    """Take every withdrawal's chunk back out of ``table`` in one transaction; what each took.

    The chunks' claims are taken first, in key order (two withdraws never wait on each other in
    a circle); each chunk is then read into a scratch table and its rows deleted (see
    :meth:`~airflow_bulkload.dialects.roles.Ledger.withdraw_rows`). A chunk whose rows are all
    gone already (the table is empty) has only its ledger entry dropped. ``load_prefixes``: the
    load records of these stagings are deleted in the same transaction. Any failure rolls every
    chunk back, and says so.
    """
    ordered = sorted(withdrawals, key=lambda w: w.entry.chunk_key)
    if not ordered:
        return []
    log.info("taking %d chunk(s) back out of %s, in one transaction", len(ordered), table)
    taken: list[ChunkResult] = []
    finished = False
    with ExitStack() as stack:
        scratches: dict[tuple[tuple[str, ...], bool], WithdrawScratch] = {}
        for withdrawal in ordered:
            shape = (tuple(withdrawal.chunk.columns or ()), not withdrawal.key_columns)
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
        try:
            with dialect.transaction(conn):
                for withdrawal in ordered:
                    dialect.claim_chunk(conn, table, withdrawal.chunk)
                for withdrawal in ordered:
                    taken.append(_withdraw_one(dialect, conn, withdrawal, scratches, s3))
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


def _withdraw_one(
    dialect: Dialect,
    conn: Any,
    withdrawal: Withdrawal,
    scratches: dict[tuple[tuple[str, ...], bool], WithdrawScratch],
    s3: Any,
) -> ChunkResult:
    """One chunk's part of :func:`withdraw_chunks`, in its transaction."""
    started, spec, entry = time.monotonic(), withdrawal.chunk, withdrawal.entry
    if dialect.table_is_empty(conn, withdrawal.table):
        dialect.forget_chunk(conn, entry)
        deleted = 0
    else:
        scratch = scratches[(tuple(spec.columns or ()), not withdrawal.key_columns)]
        with open_chunk_stream(spec, aws_conn_id=None, client=s3, to_withdraw=True) as stream:
            try:
                deleted = dialect.withdraw_rows(conn, withdrawal, scratch, stream)
            except WithdrawMismatchError:  # a replaced chunk explains the refusal better
                _check_staged(stream, spec)
                raise
            _check_staged(stream, spec)
    seconds = time.monotonic() - started
    return ChunkResult(spec.uri, deleted, entry.bytes, seconds, False, "withdraw")


def _check_staged(stream: ChunkStream, spec: ChunkSpec) -> None:
    """Raise when a staged chunk's bytes are not its manifest's (sha256).

    One replaced by other bytes of the same size passes the HEAD check. A direct chunk's reads
    are pinned to its ETag or version instead.
    """
    try:
        stream.verify(spec.checksum)
    except ChunkLoadError as exc:
        raise staged_chunk_replaced(spec, "its sha256 is not the manifest's") from exc
