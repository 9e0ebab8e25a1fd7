"""The ``replace`` and ``upsert`` load modes around the usual prepare / load / finalize.

A mode other than ``append`` loads into a work table (:func:`airflow_bulkload.modes.work_table`)
that prepare creates from the target's definition and then strips as usual; the load tasks fill
it under the chunk ledger; finalize checks it holds every chunk of the input, rebuilds its indexes
and publishes it: ``replace`` swaps it in and hands its ledger entries to the target, ``upsert``
merges it into the target by key in one transaction, checks every row arrived, and drops it. The
teardown (restore) drops this load's unpublished work table, so a failed run leaves the target as
it was.

Every step can run again: a work table is marked with its load and input, so a re-run finds its
own (and resumes) or a stale one (and starts afresh); a work table that is gone counts as
published only when this run recorded the publication (prepare takes an earlier record away).
"""

from __future__ import annotations

import hashlib
import json
import time
from contextlib import closing
from dataclasses import replace
from typing import Any

from airflow_bulkload.advice.plan import INDEX_BUILD_MEMORY
from airflow_bulkload.catalog import LoadRecord, TableRef
from airflow_bulkload.exceptions import LoadModeError, LoadVerificationError
from airflow_bulkload.hooks.table_state import TableStateHook
from airflow_bulkload.modes import (
    APPEND,
    REPLACE,
    UPSERT,
    MergeSpec,
    input_columns,
    merge_columns,
    old_table,
    work_table,
)
from airflow_bulkload.staging.manifest import Manifest, read_manifest, staging_key_of
from airflow_bulkload.table_state import STATUS_DONE

#: rows per merge statement of an upsert (the statements share one transaction)
MERGE_BATCH_ROWS = 200_000
#: how every work table's marker (its comment) begins: a table without it is not ours to drop
MARKER_PREFIX = "airflow_bulkload "


def _load_tag(load_id: str) -> str:
    return hashlib.sha256(load_id.encode()).hexdigest()[:16]


def work_marker(mode: str, table: TableRef, load_id: str, input_digest: str) -> str:
    """What a work table's comment says: whose it is (the load) and what it holds (the input)."""
    return (
        f"{MARKER_PREFIX}{mode} work table of {table.name}, load {_load_tag(load_id)}, "
        f"input {input_digest}"
    )


def input_tag(manifest: Manifest) -> str:
    """What identifies the staged input: its chunks' keys and checksums."""
    chunks = sorted((c.key, c.checksum) for c in manifest.chunks)
    return hashlib.sha256(json.dumps(chunks).encode()).hexdigest()[:16]


class LoadModesHook(TableStateHook):
    """:class:`~airflow_bulkload.hooks.table_state.TableStateHook` with the work-table steps."""

    hook_name = "Bulk Load modes"

    def load_table(self, table: str, mode: str) -> str:
        """The table the chunks of a ``mode`` load go into: the target, or its work table."""
        if mode == APPEND:
            return table
        with closing(self.get_conn()) as conn:
            dialect = self.dialect
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
        return work_table(ref, mode, dialect.max_identifier_length).quoted()

    def check_mode(self, table: str, mode: str, keys: list[str] | None) -> None:
        """Refuse a mode the table cannot take as promised (:class:`LoadModeError`)."""
        if mode == APPEND:
            return
        with self._session() as conn:
            self._refuse_blockers(conn, self._ref(conn, table), mode, keys)

    def _refuse_blockers(self, conn: Any, ref: TableRef, mode: str, keys: list[str] | None) -> None:
        blockers = self.dialect.mode_blockers(conn, ref, mode, keys)
        if blockers:
            raise LoadModeError(
                f"{ref} cannot be loaded with mode={mode!r}: it has "
                + "; ".join(blockers)
                + (
                    ". A swap would lose them; load with mode='append' (and reload=True to "
                    "replace a date's rows)"
                    if mode == REPLACE
                    else ""
                )
            )

    def _target_and_work(self, conn: Any, table: str, mode: str) -> tuple[TableRef, TableRef]:
        """The target, qualified, and its work table for ``mode``."""
        ref = self._ref(conn, table)
        return ref, work_table(ref, mode, self.dialect.max_identifier_length)

    # -- prepare -----------------------------------------------------------------------------------
    def prepare_work_table(
        self,
        table: str,
        *,
        mode: str,
        load_id: str,
        manifest: str,
        upsert_keys: list[str] | None = None,
        claim_timeout: float = 0.0,
    ) -> dict[str, Any]:
        """Create (or find again) the work table of a ``replace``/``upsert`` load and prepare it.

        The target is not changed. A work table another load or another input left behind is
        dropped with its ledger entries; this load's own is kept, with the chunks committed so far.
        """
        staged = read_manifest(self.s3, manifest, required=True)
        dialect = self.dialect
        prefix = staging_key_of(manifest)
        with self._session() as conn:
            ref, work = self._target_and_work(conn, table, mode)
            self._refuse_blockers(conn, ref, mode, upsert_keys)
            if mode == UPSERT and staged.chunks and staged.chunks[0].columns:
                self._check_required_columns(conn, ref, staged.chunks[0].columns)
            # the record of this input's publication is this run's to write: an earlier run's
            # must not make a vanished work table look published
            with dialect.transaction(conn):
                dialect.delete_load_records(conn, ref, prefix)
            marker = work_marker(mode, ref, load_id, input_tag(staged))
            found = dialect.work_table_marker(conn, work)
            if found is not None and not found.startswith(MARKER_PREFIX):
                raise LoadModeError(
                    f"{work} exists and is not a work table of airflow_bulkload (its comment is "
                    f"{found!r}): mode={mode!r} needs that name for its work table; rename the table"
                )
            if found == marker:
                self.log.info("%s: continuing with work table %s (this load's)", ref, work)
            else:
                if found is not None:
                    self.log.warning(
                        "%s: dropping work table %s left by another load or input (%r)",
                        ref,
                        work,
                        found,
                    )
                    self._discard(conn, work, load_id)
                dialect.create_work_table(conn, ref, work, mode)
                dialect.mark_work_table(conn, work, marker)
                self.log.info("%s: created work table %s for mode %s", ref, work, mode)
        # the work table is empty: prepare's "auto" drops every index it may (the floor's path)
        result = self.prepare(work.quoted(), load_id=load_id, claim_timeout=claim_timeout)
        return {**result, "mode": mode, "target": str(ref), "work_table": str(work)}

    def _check_required_columns(self, conn: Any, ref: TableRef, loaded: list[str]) -> None:
        """Refuse an upsert input without a column every row needs (NOT NULL, no default)."""
        dialect = self.dialect
        info = dialect.describe_table(conn, ref)
        generated = set(info.extra.get("generated_columns", []))
        identity = set(info.extra.get("identity_columns") or [])
        present = input_columns(
            [c.name for c in info.columns],
            loaded,
            fold_case=dialect.traits.case_insensitive_columns,
        )
        missing = [
            c.name
            for c in info.columns
            if not c.nullable
            and c.default is None
            and c.name not in generated | identity
            and c.name not in present
        ]
        if missing:
            raise LoadModeError(
                f"the input lacks column(s) {missing} of {ref}, NOT NULL without a default: an "
                "upsert writes every row through a work table of the same columns, so each row "
                "must carry them (an update of some columns only needs them nullable or "
                "defaulted); nothing was changed"
            )

    def _discard(self, conn: Any, work: TableRef, load_id: str) -> None:
        """Drop a work table, its ledger entries, and close its saved state and claim."""
        dialect = self.dialect
        # the entries go first: entries without their work table mean a swap renamed it
        with dialect.transaction(conn):
            for entry in dialect.ledger_entries(conn, work, ""):
                dialect.forget_chunk(conn, entry)
            dialect.delete_load_records(conn, work, "")
            state = dialect.read_table_state(conn, work, load_id)
            if state is not None and state["status"] != STATUS_DONE:
                dialect.set_table_state_status(conn, work, load_id, STATUS_DONE, None)
            dialect.release_table_claim(conn, work, load_id)
        dialect.drop_table_if_exists(conn, work)

    def _move_ledger(self, conn: Any, source: TableRef, target: TableRef) -> int:
        """Hand ``source``'s ledger entries to ``target``, whose own entries go (its rows did)."""
        dialect = self.dialect
        moved = dialect.ledger_entries(conn, source, "")
        if not moved:
            return 0
        for entry in dialect.ledger_entries(conn, target, ""):
            dialect.forget_chunk(conn, entry)
        dialect.delete_load_records(conn, target, "")
        for entry in moved:
            dialect.forget_chunk(conn, entry)
            dialect.record_chunk(conn, replace(entry, table=str(target)))
        return len(moved)

    # -- finalize ----------------------------------------------------------------------------------
    def finalize_work_table(
        self,
        table: str,
        *,
        mode: str,
        load_id: str,
        manifest: str,
        upsert_keys: list[str] | None = None,
        parallelism: int | str = "auto",
        maintenance_work_mem: str = INDEX_BUILD_MEMORY,
        analyze: bool = True,
    ) -> dict[str, Any]:
        """Check the work table holds the whole input, rebuild its indexes, then publish it.

        A work table missing a chunk (a load task marked success, a work table the teardown
        dropped and prepare made afresh) is never published.
        """
        dialect = self.dialect
        staged = read_manifest(self.s3, manifest, required=True)
        prefix = staging_key_of(manifest)
        with self._session() as conn:
            ref, work = self._target_and_work(conn, table, mode)
            exists = dialect.table_exists(conn, work)
            if mode == REPLACE and not staged.chunks:
                raise _empty_replace(ref)
            held = self._check_complete(conn, ref, work, staged, prefix) if exists else None
            # an input of header-only objects has chunks: only the rows loaded tell it is empty
            if mode == REPLACE and held == 0:
                raise _empty_replace(ref)
        result: dict[str, Any] = {"mode": mode, "target": str(ref), "work_table": str(work)}
        if exists:
            result.update(
                self.finalize(
                    work.quoted(),
                    load_id=load_id,
                    parallelism=parallelism,
                    maintenance_work_mem=maintenance_work_mem,
                    # the work table becomes the target on replace: its statistics are the target's
                    analyze=analyze and mode == REPLACE,
                    manifest=manifest,
                )
            )
        started = time.monotonic()
        with self._session() as conn:
            if mode == REPLACE:
                result["published"] = self._swap(conn, ref, work, load_id, staged, prefix, exists)
            else:
                result["published"] = self._merge(
                    conn, ref, work, load_id, staged, prefix, upsert_keys, exists
                )
                if analyze and exists:
                    dialect.analyze(conn, ref)
            with dialect.transaction(conn):
                dialect.release_table_claim(conn, ref, load_id)
        result["publish_seconds"] = round(time.monotonic() - started, 3)
        return result

    def _check_complete(
        self, conn: Any, ref: TableRef, work: TableRef, staged: Manifest, prefix: str
    ) -> int:
        """Refuse a work table that does not hold every chunk of the input, exactly once.

        Returns the rows it holds.
        """
        dialect = self.dialect
        entries = {e.chunk_key: e for e in dialect.ledger_entries(conn, work, prefix)}
        missing = [
            c.label
            for c in staged.chunks
            if c.key not in entries or entries[c.key].checksum != c.checksum
        ]
        unchanged = f"nothing was published and {ref} is unchanged"
        if missing:
            raise LoadModeError(
                f"the work table {work} lacks {len(missing)} of the input's {len(staged.chunks)} "
                f"chunk(s) ({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}): "
                f"{unchanged}. Clear the failed load tasks, or the whole run, to load them"
            )
        expected = sum(entries[c.key].rows for c in staged.chunks)
        found = dialect.count_rows(conn, work)
        if found != expected:
            raise LoadModeError(
                f"the work table {work} holds {found} rows where the input's chunks loaded "
                f"{expected}: {unchanged}. Clear the whole run to load it again"
            )
        return found

    def _gone(self, ref: TableRef, work: TableRef) -> LoadModeError:
        return LoadModeError(
            f"the work table {work} is gone and {ref} does not hold this load's input: nothing "
            "was published (the teardown drops the work table after a failure). Clear the whole "
            "run, staging and load tasks included"
        )

    def _finish_swap(self, conn: Any, ref: TableRef, work: TableRef) -> int:
        """Complete a swap cut short after its rename (MySQL): drop the old table, move the ledger.

        Only when the rename is proven: the work table's ledger entries are still there and were
        written into the very table that is now the target (its InnoDB table id). A swap in one
        transaction (PostgreSQL) is never cut short; entries whose work table was dropped some
        other way prove nothing.
        """
        dialect = self.dialect
        if dialect.traits.transactional_ddl:
            return 0
        entries = dialect.ledger_entries(conn, work, "")
        generation = dialect.table_generation(conn, ref)
        if not entries or generation is None or any(e.generation != generation for e in entries):
            return 0
        dialect.drop_table_if_exists(conn, old_table(ref, dialect.max_identifier_length))
        with dialect.transaction(conn):
            return self._move_ledger(conn, work, ref)

    def _swap(
        self,
        conn: Any,
        ref: TableRef,
        work: TableRef,
        load_id: str,
        staged: Manifest,
        prefix: str,
        exists: bool,
    ) -> str:
        dialect = self.dialect
        record = LoadRecord(str(ref), prefix, load_id, empty_before=True)
        if not exists:
            if self._finish_swap(conn, ref, work):
                with dialect.transaction(conn):
                    dialect.write_load_record(conn, record)
            # published by this run: the swap wrote the record prepare took away, and the
            # target's ledger holds every chunk of the input
            held = {e.chunk_key for e in dialect.ledger_entries(conn, ref, prefix)}
            published = dialect.read_load_record(conn, ref, prefix) is not None
            if not published or not all(c.key in held for c in staged.chunks):
                raise self._gone(ref, work)
            self.log.info("%s: the work table %s was already swapped in", ref, work)
            return "already swapped in"
        with dialect.transaction(conn):
            notes = dialect.swap_in(conn, ref, work, old_table(ref, dialect.max_identifier_length))
            moved = self._move_ledger(conn, work, ref)
            dialect.write_load_record(conn, record)
        self.log.info(
            "%s: swapped in %s, old table dropped; %d chunk(s) in the ledger; %s",
            ref,
            work,
            moved,
            "; ".join(notes),
        )
        return "swapped in"

    def _merge(
        self,
        conn: Any,
        ref: TableRef,
        work: TableRef,
        load_id: str,
        staged: Manifest,
        prefix: str,
        upsert_keys: list[str] | None,
        exists: bool,
    ) -> str:
        dialect = self.dialect
        if not exists:
            record = dialect.read_load_record(conn, ref, prefix)
            if record is None or not record.verified:
                raise self._gone(ref, work)
            self.log.info("%s: the work table %s was already merged", ref, work)
            return "already merged"
        info = dialect.describe_table(conn, ref)
        keys = upsert_keys or list(info.primary_key)
        loaded = staged.chunks[0].columns if staged.chunks else None
        generated = set(info.extra.get("generated_columns", []))
        columns, update = merge_columns(
            [c.name for c in info.columns if c.name not in generated],
            loaded,
            keys,
            fold_case=dialect.traits.case_insensitive_columns,
        )
        doubles = dialect.duplicate_keys(conn, work, keys)
        if doubles:
            raise LoadModeError(
                f"the input holds a key more than once ({'; '.join(doubles)}): an upsert needs "
                f"one row per key of {ref}; nothing was merged"
            )
        started, total, batches = time.monotonic(), 0, 0
        merge = MergeSpec(ref, work, tuple(columns), tuple(update), tuple(keys))
        # one transaction: a failure or a kill anywhere in the merge leaves the target as it was,
        # and the check and the record of the merge commit with it
        with dialect.transaction(conn):
            for rows in dialect.merge_batches(conn, merge, MERGE_BATCH_ROWS):
                total, batches = total + rows, batches + 1
                elapsed = time.monotonic() - started
                self.log.info(
                    "%s: merge batch %d: %d rows written (%d so far, %.0f rows/s)",
                    ref,
                    batches,
                    rows,
                    total,
                    total / elapsed if elapsed else 0.0,
                )
            # keys compare as the engine compares them (a case-insensitive key matches its
            # other case)
            differences = dialect.merge_differences(conn, merge)
            if differences:
                raise LoadVerificationError(
                    f"{ref}: after the merge, {differences} input row(s) would be missing from "
                    "the table or hold other values: the merge is rolled back and the table is "
                    "as it was"
                )
            dialect.write_load_record(
                conn,
                LoadRecord(str(ref), prefix, load_id, empty_before=False, verified=True),
            )
        self._discard(conn, work, load_id)
        self.log.info(
            "%s: merged %s in %d batch(es) (%d rows inserted or changed), every input row "
            "checked in the table; work table dropped",
            ref,
            work,
            batches,
            total,
        )
        return "merged"

    # -- restore -----------------------------------------------------------------------------------
    def restore_work_table(self, table: str, *, mode: str, load_id: str) -> dict[str, Any]:
        """The teardown: drop an unpublished work table (the target stays as it was)."""
        dialect = self.dialect
        with self._session() as conn:
            ref, work = self._target_and_work(conn, table, mode)
            found = dialect.work_table_marker(conn, work)
            if found is not None and f", load {_load_tag(load_id)}," in found:
                self._discard(conn, work, load_id)
                status = "work table dropped; the target is as it was"
            elif found is not None:
                # another load's (one the table claim kept this run out of), or not ours at all
                status = f"{work} is not this load's work table: left alone"
            elif mode == REPLACE:
                moved = self._finish_swap(conn, ref, work)  # a swap cut short after its rename
                status = "already published" + (f" ({moved} ledger entries moved)" if moved else "")
            else:
                status = "no work table (published, or never made)"
            with dialect.transaction(conn):
                dialect.release_table_claim(conn, ref, load_id)
        self.log.info("%s: %s (mode %s, load %s)", ref, status, mode, load_id)
        return {"load_id": load_id, "table": str(ref), "mode": mode, "status": status}


def _empty_replace(ref: TableRef) -> LoadModeError:
    return LoadModeError(
        f"the input is empty: a replace would leave {ref} empty, so nothing was changed (to empty "
        "the table on purpose, TRUNCATE it)"
    )
