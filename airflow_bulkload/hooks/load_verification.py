"""The report's check: the rows a load claims must be in the table.

:class:`LoadVerificationMixin` is the part of :class:`~airflow_bulkload.hooks.bulk_load.BulkLoadHook`
that verifies a finished load against the table (``verify_load``, the report task) and traces a
key the loaded rows hold twice back to the input's lines (for finalize's error).
"""

from __future__ import annotations

from contextlib import closing
from typing import Any

from airflow_bulkload.catalog import LoadRecord
from airflow_bulkload.exceptions import LoadVerificationError
from airflow_bulkload.hooks.table_truth import TableTruthMixin
from airflow_bulkload.staging.manifest import FileFormat, read_manifest, staging_key_of
from airflow_bulkload.staging.origin import records_with_key
from airflow_bulkload.staging.sources import open_source


def _few(items: list[str], limit: int = 5) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


class LoadVerificationMixin(TableTruthMixin):
    """Verify a load against the table (see the module docstring)."""

    def input_places_of_key(self, manifest_uri: str, key: dict[str, str]) -> list[str]:
        """Where the input staged at ``manifest_uri`` holds records with ``key``: ``file, line N``.

        For an error naming a key the loaded rows hold twice. The input files are read again (an
        error path, bounded in time); an input moved or deleted since gives nothing.
        """
        if not key:
            return []
        s3 = self.s3
        manifest = read_manifest(s3, manifest_uri)
        if manifest is None or not manifest.sources or not manifest.source_format:
            return []
        try:
            found = records_with_key(
                key,
                manifest.columns or [],
                manifest.sources,
                source_format=FileFormat.from_dict(manifest.source_format),
                open_source=lambda source: open_source(source, s3),
            )
        except Exception as exc:  # tracing is a courtesy: never hide the error itself
            self.log.warning("could not read the input of %s again: %s", manifest_uri, exc)
            return []
        return [f"{place.source}, line {place.line}" for place in found]

    def verify_load(
        self, table: str, manifest_uri: str, *, load_id: str = "", mode: str = "append"
    ) -> dict[str, Any]:
        """Check that the rows the load claims are in ``table``.

        Raise :class:`~airflow_bulkload.exceptions.LoadVerificationError` with the numbers
        otherwise.

        Every chunk of the manifest must have its ledger entry (rows as the manifest says); a
        chunk with a key must have its first and last key in the table (two index lookups);
        when the table was empty before the load, its row count must equal the input's. A
        keyless table that held rows before can only be checked to hold at least the input's
        rows. On success the load is recorded as verified (see :meth:`reconcile`).

        An ``upsert`` was checked row by row when it merged (every input row's key in the table
        with the input's values): its verified load record is what is checked here.
        """
        if mode == "upsert":
            return self._verified_merge(table, manifest_uri)
        s3 = self.s3
        manifest = read_manifest(s3, manifest_uri)
        if manifest is None:
            raise LoadVerificationError(f"{manifest_uri}: the manifest is gone; nothing to verify")
        current_key = staging_key_of(manifest_uri)
        dialect = self.dialect
        problems: list[str] = []
        checks: list[str] = []
        expected = manifest.total_rows
        found: int | None = None
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            entries = {e.chunk_key: e for e in dialect.ledger_entries(conn, ref, current_key)}
            if any(c.rows is None for c in manifest.chunks):
                # direct chunks: their rows are counted when they load, in the ledger
                expected = sum(entries[c.key].rows for c in manifest.chunks if c.key in entries)
            unrecorded = [c.label for c in manifest.chunks if c.key not in entries]
            if unrecorded:
                problems.append(f"{len(unrecorded)} chunk(s) never committed: {_few(unrecorded)}")
            miscounted = [
                f"{c.label} ({entries[c.key].rows} rows, manifest {c.rows})"
                for c in manifest.chunks
                if c.key in entries and c.rows is not None and entries[c.key].rows != c.rows
            ]
            if miscounted:
                problems.append(f"chunks whose rows differ from the manifest: {_few(miscounted)}")
            probed = [(c, entries[c.key]) for c in manifest.chunks if c.key in entries]
            probed = [(c, e) for c, e in probed if e.probe is not None]
            missing: list[str] = []
            for chunk, entry in probed:
                reason = self._stale_reason(conn, ref, entry)
                if reason is not None:
                    missing.append(f"{chunk.label} ({reason})")
            if probed:
                checks.append(f"first and last key of {len(probed)} chunk(s) found")
            if missing:
                problems.append(f"rows missing from the table: {_few(missing)}")
            record = dialect.read_load_record(conn, ref, current_key)
            empty_before = bool(record and record.empty_before)
            every_chunk_probed = bool(probed) and len(probed) == len(manifest.chunks)
            if empty_before and every_chunk_probed:
                # a key makes doubles impossible: rows beyond the input's were added by others
                found = dialect.count_rows(conn, ref)
                checks.append("row count at least the input's (the table was empty before)")
                if found < expected:
                    problems.append(
                        f"the table was empty before the load and holds {found} rows, "
                        f"fewer than the input's {expected}"
                    )
            elif empty_before:
                found = dialect.count_rows(conn, ref)
                checks.append("row count equals the input's (the table was empty before)")
                if found != expected:
                    problems.append(
                        f"the table was empty before the load and holds {found} rows, "
                        f"but the input has {expected}"
                    )
            elif len(probed) < len(manifest.chunks):
                found = dialect.count_rows(conn, ref)
                checks.append("row count at least the input's (no key to probe)")
                if found < expected:
                    problems.append(
                        f"the table holds {found} rows, fewer than the input's {expected}"
                    )
            if problems:
                raise LoadVerificationError(
                    f"{ref} does not hold what this load claims (expected {expected} rows"
                    + (f", found {found}" if found is not None else "")
                    + "): "
                    + "; ".join(problems)
                )
            with dialect.transaction(conn):
                dialect.write_load_record(
                    conn,
                    LoadRecord(
                        str(ref),
                        current_key,
                        record.load_id if record and not load_id else load_id,
                        empty_before=empty_before,
                        verified=True,
                    ),
                )
        return {
            "verified": True,
            "checks": checks,
            "rows_expected": expected,
            "rows_in_table": found,
            "sources": manifest.sources,
            "input_empty": expected == 0 and not manifest.rejected_rows,
            # records staging set aside (max_errors): not loaded, listed in these files
            "rejected_rows": manifest.rejected_rows,
            "rejects": manifest.rejects,
        }

    def _verified_merge(self, table: str, manifest_uri: str) -> dict[str, Any]:
        manifest = read_manifest(self.s3, manifest_uri)
        if manifest is None:
            raise LoadVerificationError(f"{manifest_uri}: the manifest is gone; nothing to verify")
        current_key = staging_key_of(manifest_uri)
        dialect = self.dialect
        with closing(self.get_conn()) as conn:
            dialect.ensure_state_schema(conn)
            ref = dialect.qualified_name(conn, dialect.table_ref(table))
            record = dialect.read_load_record(conn, ref, current_key)
        empty = not manifest.chunks
        if not empty and (record is None or not record.verified):
            raise LoadVerificationError(
                f"{ref}: no verified merge of {manifest_uri} is recorded: finalize_table did "
                "not complete the upsert"
            )
        counted = all(c.rows is not None for c in manifest.chunks)  # direct chunks: not yet
        return {
            "verified": True,
            "checks": [
                "the input is empty: nothing to merge"
                if empty
                else "every input row's key is in the table with the input's values (merge)"
            ],
            "rows_expected": manifest.total_rows if counted else None,
            "rows_in_table": None,
            "sources": manifest.sources,
            "input_empty": empty and not manifest.rejected_rows,
            "rejected_rows": manifest.rejected_rows,
            "rejects": manifest.rejects,
        }
