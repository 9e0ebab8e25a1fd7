"""The table is the truth.

The ledger's entries are checked against the table before a skip, superseded inputs are taken back
out, and the report's claims are verified in the table.

:class:`TableTruthMixin` is the part of :class:`~airflow_bulkload.hooks.bulk_load.BulkLoadHook`
that reconciles the chunk ledger with the table; the hook's loading path calls it before it
skips a chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import closing
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_bulkload.catalog import ChunkResult, LedgerEntry, LoadRecord, Reconciliation, TableRef
from airflow_bulkload.dialects import Withdrawal
from airflow_bulkload.exceptions import BulkLoadError, InputAlreadyLoadedError
from airflow_bulkload.hooks.chunk_withdraw import (
    forget_chunks,
    withdraw_chunks,
    withdrawable_specs,
)
from airflow_bulkload.s3io import parse_s3_uri, s3_client
from airflow_bulkload.staging.manifest import ChunkSpec, read_manifest

if TYPE_CHECKING:
    from airflow.sdk.types import Logger

    from airflow_bulkload.dialects import Dialect


class TableTruthMixin:
    """Reconcile the chunk ledger with the table (see the module docstring)."""

    if TYPE_CHECKING:
        aws_conn_id: str | None

        @property
        def log(self) -> Logger: ...

        @property
        def dialect(self) -> Dialect: ...

        def get_conn(self) -> Any: ...

        def _primary_key(self, conn: Any, ref: TableRef) -> list[str]: ...

    @cached_property
    def s3(self) -> Any:
        """This hook's S3 client, made once (each costs tenths of a second).

        A load task reads every chunk of its batch through its one hook.
        """
        return s3_client(self.aws_conn_id)

    def _stale_reason(self, conn: Any, ref: TableRef, entry: LedgerEntry) -> str | None:
        """Why the entry's rows are not (all) in the table any more, or ``None`` when they are.

        With a key: its first and last key are looked up. Without: the table's generation
        tells a TRUNCATE or re-create (then the table is empty) from inserts and deletes.
        """
        dialect = self.dialect
        if entry.probe is not None:
            probe = entry.probe
            present = dialect.keys_present(conn, ref, probe.columns, [probe.first, probe.last])
            if all(present):
                return None
            missing = [
                k for k, ok in zip((probe.first, probe.last), present, strict=True) if not ok
            ]
            return f"{', '.join(probe.columns)} {' and '.join(map(str, missing))} not in the table"
        generation = dialect.table_generation(conn, ref)
        if entry.generation is None or generation is None or generation == entry.generation:
            return None
        if dialect.table_is_empty(conn, ref):
            return "the table was emptied or re-created since (it is empty)"
        raise BulkLoadError(
            f"{ref} has no primary or unique key and was truncated, re-created or rebuilt since "
            f"s3://…/{entry.chunk_key} loaded (generation {entry.generation} -> {generation}), "
            "and it is not empty: whether that chunk's rows are still there cannot be told. "
            "Clear the pipeline's claim_table task, whose withdraw compares row counts (or run "
            "WithdrawSupersededChunksOperator), or delete the rows and the chunk's ledger entry "
            "by hand"
        )

    def _withdraw_stale(
        self, conn: Any, ref: TableRef, stale: Sequence[tuple[LedgerEntry, ChunkSpec, str | None]]
    ) -> None:
        """Drop stale ledger entries, first taking out what is left of their rows (by key).

        So each chunk's reload leaves each of its rows in the table once. Entries with a key go
        out in one transaction, all or none; keyless ones (nothing left to take by key) are
        dropped in another. An entry another task changed meanwhile (it reloaded the chunk) is
        left to it.
        """
        dialect = self.dialect
        for entry, spec, reason in stale:
            self.log.warning(
                "%s: the chunk ledger says load %s put %d rows into %s, but %s: the entry is "
                "stale; loading the chunk again",
                spec.uri,
                entry.load_id,
                entry.rows,
                ref,
                reason,
            )
        withdrawals = [
            Withdrawal(ref, entry, spec, entry.probe.columns, exact=False)
            for entry, spec, _ in stale
            if entry.probe is not None
        ]
        taken = withdraw_chunks(dialect, conn, ref, withdrawals, s3=self.s3, skip_changed=True)
        for result in taken:
            if result.rows:
                self.log.warning(
                    "%s: took out the %d of its rows still in %s before loading it again",
                    result.uri,
                    result.rows,
                    ref,
                )
        keyless = [(entry, spec) for entry, spec, _ in stale if entry.probe is None]
        if keyless:
            forget_chunks(dialect, conn, ref, keyless)

    def withdraw_superseded_chunks(self, table: str, manifest_uri: str) -> list[ChunkResult]:
        """:meth:`reconcile` without a reload; the chunks taken back out."""
        return self.reconcile(table, manifest_uri).withdrawn

    def reconcile(
        self, table: str, manifest_uri: str, *, reload: bool = False, load_id: str = ""
    ) -> Reconciliation:
        """Make the chunk ledger agree with the table before the input at ``manifest_uri`` loads.

        Staging puts every input of one load (DAG, table, data interval) under
        ``<load prefix>/<fingerprint>/``. Here, in order:

        1. *Superseded stagings*: ledger chunks under the load prefix but outside the current
           fingerprint come from another input for the same date. When that input's load never
           completed (a run failed and its input was corrected), its committed chunks are taken
           back out, by key, so no row loads twice. When it completed (its report verified it),
           the run is refused with :class:`InputAlreadyLoadedError` unless ``reload``: a second
           input for a loaded date never silently replaces it.
        2. ``reload``: the current input's chunks are taken back out too, so they load again.
        3. *Stale entries*: each remaining entry of the current input counts only while its
           rows are in the table (key probes; for a keyless table, its generation and row
           count). A stale entry is dropped (what is left of its rows taken out) so the chunk
           loads again.

        A withdraw deletes exactly the rows the ledger says the chunk loaded (with ``reload``: at
        most that many), or nothing (:class:`~airflow_bulkload.exceptions.WithdrawMismatchError`):
        rows of another load that share the chunk's keys are never taken. The chunks of steps 1
        and 2 go out in one transaction, all of them or none
        (:func:`~airflow_bulkload.hooks.chunk_withdraw.withdraw_chunks`).
        """
        current = manifest_uri.rsplit("/", 1)[0] + "/"
        bucket, current_key = parse_s3_uri(current)
        load_key = current_key.rstrip("/").rsplit("/", 1)[0] + "/"
        dialect = self.dialect
        withdrawn: list[ChunkResult] = []
        stale: list[str] = []
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            entries = dialect.ledger_entries(conn, ref, load_key)
            superseded = [e for e in entries if not e.chunk_key.startswith(current_key)]
            mine = [e for e in entries if e.chunk_key.startswith(current_key)]
            if reload:
                superseded += self._same_input_under_other_dates(conn, ref, current_key, load_key)
            prefixes = sorted({e.chunk_key.rsplit("/", 1)[0] + "/" for e in superseded})
            if superseded and not reload:
                self._refuse_loaded_input(conn, ref, bucket, prefixes, current_key)
            reloaded, mine = (mine, []) if reload else ([], mine)
            if superseded or reloaded:
                withdrawn = self._withdraw_all(
                    conn, ref, bucket, superseded, reloaded, prefixes, reload=reload
                )
            if mine:
                manifest = read_manifest(self.s3, manifest_uri)
                specs = {c.key: c for c in manifest.chunks} if manifest else {}
                # an entry not in this manifest cannot happen: it would have nothing to reload
                found = [
                    (entry, specs[entry.chunk_key], reason)
                    for entry, reason in self._stale_entries(conn, ref, mine)
                    if entry.chunk_key in specs
                ]
                self._withdraw_stale(conn, ref, found)
                stale += [spec.uri for _, spec, _ in found]
            record = dialect.read_load_record(conn, ref, current_key)
            if reload:
                record = None
            only_this_input = self._holds_only_this_input(conn, ref, current_key, record)
            if record is None or record.empty_before != only_this_input:
                record = LoadRecord(
                    str(ref),
                    current_key,
                    load_id or (record.load_id if record else ""),
                    empty_before=only_this_input,
                    verified=bool(record and record.verified),
                )
                with dialect.transaction(conn):
                    dialect.write_load_record(conn, record)
            warnings = self._same_input_elsewhere(conn, ref, current_key, load_key)
        return Reconciliation(withdrawn, stale, record.empty_before, warnings)

    def _withdraw_all(
        self,
        conn: Any,
        ref: TableRef,
        bucket: str,
        superseded: list[LedgerEntry],
        reloaded: list[LedgerEntry],
        prefixes: list[str],
        *,
        reload: bool,
    ) -> list[ChunkResult]:
        """Take the chunks of earlier inputs and, on a reload, this input's out, all or none.

        Earlier inputs' chunks must each delete exactly the rows they loaded, unless the author
        asked for a reload; a reload's own chunks at most that many (what is left of them), or
        exactly when rows match on every column (no key), since identical rows of another load
        could stand in for missing ones. The load records under ``prefixes`` go with them.
        """
        dialect = self.dialect
        if dialect.table_is_empty(conn, ref):
            self._forget_gone(conn, ref, superseded + reloaded, "the table is empty", prefixes)
            return []
        # the objects first: a refusal for one of them costs no database work
        specs = withdrawable_specs([e.chunk_key for e in superseded + reloaded], bucket, self.s3)
        withdrawals = []
        for entries, exact in ((superseded, not reload), (reloaded, False)):
            if entries:
                key_columns = self._withdraw_key(conn, ref, entries, specs)
                withdrawals += [
                    Withdrawal(ref, e, specs[e.chunk_key], key_columns, exact=exact)
                    for e in entries
                ]
        return withdraw_chunks(dialect, conn, ref, withdrawals, s3=self.s3, load_prefixes=prefixes)

    def _forget_gone(
        self,
        conn: Any,
        ref: TableRef,
        entries: list[LedgerEntry],
        reason: str,
        prefixes: list[str],
    ) -> None:
        """Drop ledger entries whose rows are all gone from the table: nothing to take back.

        The load records under ``prefixes`` go with them.
        """
        dialect = self.dialect
        self.log.warning(
            "%s: %s, so the %d ledger entr(ies) of an earlier input hold no rows there any more "
            "(a restore or a person emptied it): dropping them, nothing to take back",
            ref,
            reason,
            len(entries),
        )
        with dialect.transaction(conn):
            for entry in entries:
                dialect.forget_chunk(conn, entry)
            for prefix in prefixes:
                dialect.delete_load_records(conn, ref, prefix)

    def _same_input_under_other_dates(
        self, conn: Any, ref: TableRef, current_key: str, load_key: str
    ) -> list[LedgerEntry]:
        """Chunks of this input (same fingerprint) loaded by this DAG under another interval.

        A reload from the UI with a time of day reads the same files, and replaces their rows too
        rather than loading them a second time.
        """
        table_key = load_key.rstrip("/").rsplit("/", 1)[0] + "/"
        return self._same_input_outside(conn, ref, current_key, load_key, table_key)

    def _same_input_outside(
        self, conn: Any, ref: TableRef, current_key: str, load_key: str, under: str
    ) -> list[LedgerEntry]:
        """Ledger entries under ``under`` of the input staged at ``current_key``, elsewhere.

        The input is told by its fingerprint (the staging prefix's last part); entries under this
        load's own prefix ``load_key`` are left out.
        """
        fingerprint = current_key.rstrip("/").rsplit("/", 1)[-1]
        return [
            e
            for e in self.dialect.ledger_entries(conn, ref, under)
            if not e.chunk_key.startswith(load_key)
            and e.chunk_key.rsplit("/", 2)[-2] == fingerprint
        ]

    def _holds_only_this_input(
        self, conn: Any, ref: TableRef, current_key: str, record: LoadRecord | None
    ) -> bool:
        """Whether the table held nothing but this input's rows when its load began.

        Only then may the report check the table's row count against the input's. The answer
        is taken anew at every run of the date, under the table claim: a table that was empty
        when a date first loaded holds other dates' rows once they load after it (their ledger
        entries say so), and then the date's rows are checked by key probes alone.
        """
        dialect = self.dialect
        mine = dialect.ledger_entries(conn, ref, current_key)
        if not mine:
            return dialect.table_is_empty(conn, ref)
        if record is None or not record.empty_before:
            return False
        return dialect.ledger_rows(conn, ref) == sum(e.rows for e in mine)

    def _refuse_loaded_input(
        self, conn: Any, ref: TableRef, bucket: str, prefixes: list[str], current_key: str
    ) -> None:
        """Refuse to take back a staged input that loaded completely, or that cannot be told.

        An input whose load was verified, or whose ledger entries carry no load record (a
        ledger of an earlier release), is replaced only when the author asks (``reload``); an
        unverified input is a failed attempt whose input was corrected, and is taken back.
        """
        for prefix in prefixes:
            record = self.dialect.read_load_record(conn, ref, prefix)
            if record is None:
                raise InputAlreadyLoadedError(
                    f"this date has rows in {ref} from another input (staged at "
                    f"s3://{bucket}/{prefix}) with no record of whether that load completed, "
                    f"and this run's input differs (staged at s3://{bucket}/{current_key}). "
                    "Nothing was changed. To replace the date's rows with this input, run "
                    "again with reload=True (the example DAGs' 'reload' Param)"
                )
            if record.verified:
                raise InputAlreadyLoadedError(
                    f"this date was already loaded into {ref} from another input (staged at "
                    f"s3://{bucket}/{prefix}, load {record.load_id}, verified), and this run's "
                    f"input differs (staged at s3://{bucket}/{current_key}). Nothing was changed. "
                    "To replace the date's rows with this input, run again with reload=True "
                    "(the example DAGs' 'reload' Param); to add the input, load it under its "
                    "own run or DAG"
                )

    def _withdraw_key(
        self, conn: Any, ref: TableRef, entries: list[LedgerEntry], specs: dict[str, ChunkSpec]
    ) -> list[str]:
        """The columns a withdraw of ``entries`` matches rows by.

        Their probe key when its columns are NOT NULL, else the table's primary key or a unique
        key over NOT NULL columns, when the chunks carry all its columns. ``[]`` when there is
        none (a surrogate key the input lacks, or no key): then every column the chunks carry,
        and the delete must match the ledger's count exactly.
        """
        info = self.dialect.describe_table(conn, ref)
        not_null = {c.name for c in info.columns if not c.nullable}
        probes = {tuple(e.probe.columns) for e in entries if e.probe is not None}
        # a NULL in a key matches nothing with "=": a row holding one would stay, and load twice
        if len(probes) == 1 and set(next(iter(probes))) <= not_null:
            return list(next(iter(probes)))
        generated = set(info.extra.get("generated_columns", []))
        carried = {c.name for c in info.columns if c.name not in generated}
        for entry in entries:  # the specs withdrawable_specs read from their manifests
            columns = specs[entry.chunk_key].columns
            if columns:
                carried &= set(columns)
        unique = [
            list(index.columns)
            for index in info.indexes
            if index.is_unique
            and index.is_valid
            and not index.predicate
            and index.columns
            and set(index.columns) <= not_null
        ]
        return next(
            (key for key in [self._primary_key(conn, ref), *unique] if key and set(key) <= carried),
            [],
        )

    def _stale_entries(
        self, conn: Any, ref: TableRef, entries: list[LedgerEntry]
    ) -> list[tuple[LedgerEntry, str]]:
        """The entries whose rows are not all in the table, with why.

        Entries with a key are probed one by one. Keyless entries are judged as a whole: an
        empty table holds none of their rows, whatever emptied it (TRUNCATE, re-create, DELETE).
        A keyless table whose generation changed (TRUNCATE, re-create, VACUUM FULL, CLUSTER,
        OPTIMIZE TABLE) is counted: its rows less those that other loads put in since (their
        entries carry the new generation) must hold what these entries loaded, and then it was
        rebuilt with them (the entries take the new generation); none left means the chunks'
        rows are gone (they reload); some but fewer is refused, since which chunks lost rows
        cannot be told.
        """
        dialect = self.dialect
        stale: list[tuple[LedgerEntry, str]] = []
        keyless: list[LedgerEntry] = []
        for entry in entries:
            if entry.probe is not None:
                reason = self._stale_reason(conn, ref, entry)
                if reason is not None:
                    stale.append((entry, reason))
            else:
                keyless.append(entry)
        if not keyless:
            return stale
        if dialect.table_is_empty(conn, ref):
            reason = "the table is empty (truncated, re-created or emptied since)"
            return stale + [(e, reason) for e in keyless]
        generation = dialect.table_generation(conn, ref)
        changed = [e for e in keyless if e.generation and generation and e.generation != generation]
        if not changed or generation is None:
            return stale
        in_table = dialect.count_rows(conn, ref)
        mine = {e.chunk_key for e in entries}
        changed_keys = {e.chunk_key for e in changed}
        theirs = sum(
            e.rows
            for e in dialect.ledger_entries(conn, ref, "")
            if e.chunk_key not in mine and e.generation == generation
        )
        unchanged = sum(e.rows for e in keyless if e.chunk_key not in changed_keys)
        left = in_table - theirs - unchanged
        expected = sum(e.rows for e in changed)
        if left <= 0:
            reason = (
                f"the table was truncated or re-created since, and its {in_table} rows are those "
                "other loads put in after that"
            )
            return stale + [(e, reason) for e in changed]
        if left < expected:
            raise BulkLoadError(
                f"{ref} has no primary or unique key and was truncated, re-created or rebuilt "
                f"since {len(changed)} chunk(s) of this input loaded; it now holds {in_table} "
                "rows"
                + (
                    f" ({theirs + unchanged} of them other loads', which leaves {left})"
                    if theirs + unchanged
                    else ""
                )
                + f", fewer than the {expected} these chunks loaded, so which chunks lost rows "
                "cannot be told. Delete the rows of this input yourself (or TRUNCATE the table), then run "
                "again: an empty table reloads every chunk"
            )
        self.log.info(
            "%s was rebuilt since %d chunk(s) loaded (VACUUM FULL, CLUSTER or OPTIMIZE TABLE) "
            "and holds %d rows besides other loads', at least the %d they loaded: their ledger "
            "entries stand",
            ref,
            len(changed),
            left,
            expected,
        )
        with dialect.transaction(conn):
            for entry in changed:
                dialect.set_chunk_generation(conn, entry, generation)
        return stale

    def _same_input_elsewhere(
        self, conn: Any, ref: TableRef, current_key: str, load_key: str
    ) -> list[str]:
        """A keyless table has nothing to reject a second copy of the same input with.

        Say so when the same input (same fingerprint) was loaded by another DAG or date.
        """
        if self._primary_key(conn, ref):
            return []
        fingerprint = current_key.rstrip("/").rsplit("/", 1)[-1]
        elsewhere = sorted(
            {
                e.chunk_key.rsplit("/", 1)[0]
                for e in self._same_input_outside(conn, ref, current_key, load_key, "")
            }
        )
        if not elsewhere:
            return []
        warning = (
            f"{ref} has no primary key, and the same input (fingerprint {fingerprint}) was "
            f"already loaded into it under {', '.join(elsewhere[:3])}: the ledger tells loads "
            "apart by DAG, table and date, so this load adds its rows again. Stop the run if "
            "that is not what you want"
        )
        self.log.warning("%s", warning)
        return [warning]
