"""TableStateHook: prepare a table for a bulk load and put it back afterwards.

The effectful side of :mod:`airflow_bulkload.table_state` (whose pure rules decide what to drop and
what to rebuild). The order of every step is chosen so a worker killed at any point leaves a table
the next prepare, finalize or restore of the same load id completes:

* prepare: claim the table (durable row) -> capture and save the state (only when no unfinished
  state exists for the load id) -> disable autovacuum -> drop, one object at a time;
* finalize/restore: rebuild what the saved state has and the table lacks -> restore reloptions ->
  compare the catalog with the saved state -> (ANALYZE) -> mark done and release the claim in
  one transaction.

The rebuild itself (indexes, constraints, comments, foreign keys) is
:mod:`airflow_bulkload.hooks.table_rebuild`.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import replace
from typing import Any

from airflow_bulkload.advice.plan import INDEX_BUILD_MEMORY
from airflow_bulkload.catalog import TableRef, TableState
from airflow_bulkload.exceptions import (
    DuplicateKeyError,
    ForeignKeyViolationError,
    InsufficientPrivilegeError,
    TableClaimedError,
    TableStateError,
)
from airflow_bulkload.hooks.bulk_load import BulkLoadHook
from airflow_bulkload.hooks.table_rebuild import TableRebuildMixin
from airflow_bulkload.knobs import check_memory_setting
from airflow_bulkload.table_state import (
    STATUS_DONE,
    STATUS_PREPARED,
    STATUS_SAVED,
    DropDecision,
    compare_snapshots,
    decide_drops,
    plan_drops,
    plan_rebuild,
)


class TableStateHook(TableRebuildMixin, BulkLoadHook):
    """Save / strip / rebuild a table's indexes, constraints and reloptions around a bulk load.

    Same connection parameters as :class:`BulkLoadHook`; the saved state and the per-table claim
    live in its state tables (PostgreSQL schema ``bulkload``, MySQL ``bulkload_*`` tables).
    """

    hook_name = "Bulk Load table state"

    @contextmanager
    def _session(self) -> Iterator[Any]:
        """A connection for DDL.

        Autocommit where DDL is transactional (PostgreSQL: each statement commits; state writes use
        explicit transactions); on MySQL DDL commits by itself.
        """
        with closing(self.get_conn()) as conn:
            if self.dialect.traits.transactional_ddl:
                self.dialect.set_autocommit(conn, True)
            yield conn

    def _ref(self, conn: Any, table: str) -> TableRef:
        dialect = self.dialect
        dialect.ensure_state_schema(conn)
        return dialect.qualified_name(conn, dialect.table_ref(table))

    # -- prepare ------------------------------------------------------------------------------------
    def prepare(
        self,
        table: str,
        *,
        load_id: str,
        drop_indexes: bool | None = None,
        drop_primary_key: bool | None = None,
        drop_foreign_keys: bool | None = None,
        drop_unique_indexes: bool | None = None,
        incoming_bytes: int | None = None,
        claim_timeout: float = 0.0,
        claim_poll_interval: float = 5.0,
    ) -> dict[str, Any]:
        """Claim the table, save its state, disable autovacuum and drop what the decision says.

        ``None`` knobs are "auto", see :func:`~airflow_bulkload.table_state.decide_drops`.

        A re-run for the same ``load_id`` whose state is not done continues from the saved state
        and decision; it never captures the (possibly stripped) table again.
        """
        dialect = self.dialect
        with self._session() as conn:
            ref = self._ref(conn, table)
            holder = f"{load_id} (host {socket.gethostname()}, pid {os.getpid()})"
            state = self._claim(conn, ref, load_id, holder, claim_timeout, claim_poll_interval)
            resumed = state is not None and state["status"] != STATUS_DONE
            if state is not None and resumed:
                saved, decision = state["saved"], DropDecision.from_dict(state["decision"])
                self.log.info(
                    "%s: continuing load %s from its saved state (status %s); not capturing the "
                    "table again",
                    ref,
                    load_id,
                    state["status"],
                )
            else:
                info = dialect.describe_table(conn, ref)
                decision = decide_drops(
                    dialect.name,
                    info,
                    incoming_bytes,
                    drop_indexes=drop_indexes,
                    drop_primary_key=drop_primary_key,
                    drop_foreign_keys=drop_foreign_keys,
                    table_empty=dialect.table_is_empty(conn, ref),
                    drop_unique_indexes=drop_unique_indexes,
                )
                decision = replace(decision, ledger_rows_before=dialect.ledger_rows(conn, ref))
                saved = dialect.table_snapshot(conn, ref)
                with dialect.transaction(conn):
                    fresh = TableState(
                        status=STATUS_SAVED, saved=saved, dropped=[], decision=decision.to_dict()
                    )
                    dialect.write_table_state(conn, ref, load_id, fresh)
                self.log.info(
                    "%s: saved %d index(es) %s, %d foreign key(s) %s, reloptions %s (load %s)",
                    ref,
                    len(saved["indexes"]),
                    [ix["name"] for ix in saved["indexes"]],
                    len(saved["foreign_keys"]),
                    [f"{fk['table']}.{fk['name']}" for fk in saved["foreign_keys"]],
                    saved["reloptions"],
                    load_id,
                )
            for knob, why in decision.reasons.items():
                self.log.info("%s: %s: %s", ref, knob, why)

            dialect.disable_autovacuum(conn, ref)
            steps, notes = plan_drops(saved, decision, dialect.table_snapshot(conn, ref))
            for note in notes:
                self.log.info("%s: %s", ref, note)
            for step in steps:
                started = time.monotonic()
                if step.kind == "fk":
                    dialect.drop_foreign_key(conn, step.target)
                else:
                    dialect.drop_index(conn, ref, step.target)
                self.log.info(
                    "%s: dropped %s %s (%.2f s)",
                    ref,
                    "foreign key" if step.kind == "fk" else "index",
                    step.name,
                    time.monotonic() - started,
                )
            dropped = self._dropped_names(saved, dialect.table_snapshot(conn, ref))
            with dialect.transaction(conn):
                dialect.set_table_state_status(conn, ref, load_id, STATUS_PREPARED, dropped)
        return {
            "load_id": load_id,
            "table": str(ref),
            "resumed": resumed,
            "dropped": dropped,
            "kept": notes,
            "decision": decision.to_dict(),
        }

    def claim(
        self, table: str, *, load_id: str, timeout: float = 0.0, poll_interval: float = 5.0
    ) -> dict[str, Any]:
        """Take the table's claim for ``load_id``, without changing the table.

        It waits up to ``timeout`` s while another load holds it. The pipeline claims before it
        enters bulk mode, so a load waiting for the table never holds the server in bulk mode
        meanwhile. Prepare for the same load id then finds the claim its own; finalize or restore
        releases it.
        """
        with self._session() as conn:
            ref = self._ref(conn, table)
            holder = f"{load_id} (host {socket.gethostname()}, pid {os.getpid()})"
            self._claim(conn, ref, load_id, holder, timeout, poll_interval)
        self.log.info("%s: claimed for load %s", ref, load_id)
        return {"load_id": load_id, "table": str(ref), "holder": holder}

    def _claim(
        self,
        conn: Any,
        ref: TableRef,
        load_id: str,
        holder: str,
        timeout: float,
        poll: float,
    ) -> TableState | None:
        """Take the table's durable claim (waiting up to ``timeout`` s) and read the state."""
        dialect = self.dialect
        deadline = time.monotonic() + timeout
        announced = False
        while True:
            with dialect.transaction(conn):
                other = dialect.claim_table(conn, ref, load_id, holder)
                state = None if other else dialect.read_table_state(conn, ref, load_id)
            if other is None:
                return state
            if time.monotonic() >= deadline:
                raise TableClaimedError(
                    f"{ref} is held by {other}: another load claimed it (to prepare it) and has "
                    f"not finalized or restored it yet, so load {load_id} cannot claim it now. "
                    "Wait for that load, run its restore_table, or, if it is gone for good, run "
                    "a RestoreTableOperator with its load_id."
                )
            if not announced:
                self.log.info("%s: held by %s; waiting up to %.0f s", ref, other, timeout)
                announced = True
            time.sleep(min(poll, max(deadline - time.monotonic(), 0.01)))

    @staticmethod
    def _dropped_names(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
        plan = plan_rebuild(saved, current)
        names = [f"index {ix['name']}" for ix in plan.create_indexes]
        names += [f"foreign key {fk['table']}.{fk['name']}" for fk in plan.add_foreign_keys]
        return names

    # -- finalize / restore ---------------------------------------------------------------------------
    def finalize(
        self,
        table: str,
        *,
        load_id: str,
        parallelism: int | str = "auto",
        maintenance_work_mem: str = INDEX_BUILD_MEMORY,
        analyze: bool = True,
        manifest: str | None = None,
    ) -> dict[str, Any]:
        """Rebuild, verify, restore reloptions, ANALYZE, mark done and release the claim.

        With ``manifest`` (the staged input's), a key the loaded rows hold twice is also looked
        up in the input files, and the error names the lines that hold it.
        """
        try:
            return self._put_back(
                table,
                load_id=load_id,
                parallelism=parallelism,
                maintenance_work_mem=maintenance_work_mem,
                analyze=analyze,
                verb="finalize",
            )
        except DuplicateKeyError as exc:
            places = (
                self.input_places_of_key(manifest, duplicate_key(exc.sample)) if manifest else []
            )
            if not places:
                raise
            raise DuplicateKeyError(
                f"{exc} The input holds that key at: {'; '.join(places)}.",
                index=exc.index,
                sample=exc.sample,
            ) from exc

    def restore(
        self,
        table: str,
        *,
        load_id: str,
        parallelism: int | str = "auto",
        maintenance_work_mem: str = INDEX_BUILD_MEMORY,
    ) -> dict[str, Any]:
        """Put the table back as saved when prepare changed it and finalize did not complete.

        Exactly as saved; a no-op otherwise. Idempotent.
        """
        return self._put_back(
            table,
            load_id=load_id,
            parallelism=parallelism,
            maintenance_work_mem=maintenance_work_mem,
            analyze=False,
            verb="restore",
        )

    def _put_back(
        self,
        table: str,
        *,
        load_id: str,
        parallelism: int | str,
        maintenance_work_mem: str,
        analyze: bool,
        verb: str,
    ) -> dict[str, Any]:
        # before anything is read or built: the server would refuse it only at the first build
        check_memory_setting(maintenance_work_mem, "maintenance_work_mem")
        dialect = self.dialect
        with self._session() as conn:
            ref = self._ref(conn, table)
            with dialect.transaction(conn):
                state = dialect.read_table_state(conn, ref, load_id)
            result: dict[str, Any] = {"load_id": load_id, "table": str(ref)}
            if state is None or state["status"] == STATUS_DONE:
                with dialect.transaction(conn):
                    dialect.release_table_claim(conn, ref, load_id)
                status = "nothing saved" if state is None else "already done"
                self.log.info("%s: %s for load %s; nothing to %s", ref, status, load_id, verb)
                return {**result, "status": status, "rebuilt": {}, "seconds": {}}
            saved = state["saved"]
            started = time.monotonic()
            try:
                seconds = self._rebuild(
                    conn, ref, saved, load_id, parallelism, maintenance_work_mem
                )
            except (DuplicateKeyError, ForeignKeyViolationError) as exc:
                if verb != "restore" or not self._take_back_load(conn, ref, state, exc):
                    raise
                seconds = self._rebuild(
                    conn, ref, saved, load_id, parallelism, maintenance_work_mem
                )
            changes = dialect.restore_reloptions(conn, ref, saved)
            if changes:
                self.log.info("%s: reloptions restored: %s", ref, ", ".join(changes))
            problems = compare_snapshots(saved, dialect.table_snapshot(conn, ref))
            if problems:
                raise TableStateError(
                    f"{ref} does not match its saved state after {verb} (load {load_id}); the "
                    "saved state is kept: " + "; ".join(problems)
                )
            self.log.info("%s: every saved index, constraint and reloption verified", ref)
            if analyze:
                analyze_started = time.monotonic()
                dialect.analyze(conn, ref)
                self.log.info("%s: ANALYZE (%.2f s)", ref, time.monotonic() - analyze_started)
            with dialect.transaction(conn):
                dialect.set_table_state_status(conn, ref, load_id, STATUS_DONE, None)
                dialect.release_table_claim(conn, ref, load_id)
        total = time.monotonic() - started
        self.log.info("%s: %s of load %s complete in %.2f s", ref, verb, load_id, total)
        return {
            **result,
            "status": "restored" if verb == "restore" else "finalized",
            "rebuilt": list(seconds),
            "seconds": {name: round(s, 3) for name, s in seconds.items()},
            "reloptions": changes,
            "total_seconds": round(total, 3),
        }

    def _take_back_load(
        self, conn: Any, ref: TableRef, state: TableState, error: TableStateError
    ) -> bool:
        """Restore after the load's own rows broke a unique key or foreign key it had dropped.

        When the table was empty at prepare and holds exactly the rows loaded since (by the ledger),
        empty it again, so the keys rebuild and the table is as it was before the run. Anything else
        (rows from elsewhere) is left for a person: False.
        """
        dialect = self.dialect
        decision = DropDecision.from_dict(state["decision"])
        if not decision.table_empty or decision.ledger_rows_before is None:
            return False
        loaded = dialect.ledger_rows(conn, ref) - decision.ledger_rows_before
        in_table = dialect.count_rows(conn, ref)
        if in_table != loaded:
            self.log.error(
                "%s: %s, and the table holds %d rows where this load committed %d: not emptying "
                "it; remove the duplicates by hand",
                ref,
                error,
                in_table,
                loaded,
            )
            return False
        self.log.error(
            "%s: %s. The table was empty before this load and holds only its %d rows: taking "
            "them back out so the keys rebuild and the table is as before the run; the next run "
            "reloads the input (its ledger entries no longer match the table)",
            ref,
            error,
            in_table,
        )
        dialect.empty_table(conn, ref)
        return True

    # -- checkpoint -----------------------------------------------------------------------------------
    def checkpoint(self, *, skip_without_privilege: bool = True) -> str:
        """PostgreSQL ``CHECKPOINT``; a logged no-op on MySQL.

        A user without the privilege (a least-privilege loader) gets a warning and the load goes
        on: the checkpoint only shortens the recovery after a crash soon after the load, the
        data is committed either way. ``skip_without_privilege=False`` fails instead.
        """
        with self._session() as conn:
            started = time.monotonic()
            try:
                done = self.dialect.checkpoint(conn)
            except InsufficientPrivilegeError as exc:
                if not skip_without_privilege:
                    raise
                self.log.warning("CHECKPOINT skipped: %s", exc)
                return f"skipped: {exc}"
        self.log.info("%s (%.2f s)", done, time.monotonic() - started)
        return done


_SAMPLE_KEY = re.compile(r"^\((?P<columns>[^()]*)\)=\((?P<values>.*)\) x\d+$")


def duplicate_key(sample: list[str]) -> dict[str, str]:
    """The first duplicate key of a :class:`DuplicateKeyError` sample, as column -> value text.

    A sample entry reads ``(a, b)=(1, x) x2``; the result is empty when none can be read
    unambiguously.
    """
    for entry in sample:
        match = _SAMPLE_KEY.match(entry)
        if not match:
            continue
        columns = match["columns"].split(", ")
        values = match["values"].split(", ")
        if len(columns) == len(values):
            return dict(zip(columns, values, strict=True))
    return {}
