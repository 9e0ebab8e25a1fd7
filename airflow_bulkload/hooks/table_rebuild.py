"""Rebuilding what prepare dropped: indexes, their constraints, comments and foreign keys.

:class:`TableRebuildMixin` is the part of
:class:`~airflow_bulkload.hooks.table_state.TableStateHook` that finalize and restore share: it
builds what the saved state has and the table lacks (PostgreSQL: one session per index, several
at once; MySQL: one ``ALTER TABLE``), and turns a duplicate key found on the way into a
:class:`~airflow_bulkload.exceptions.DuplicateKeyError` with a sample of the offending keys.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from airflow_bulkload.advice.plan import DEFAULT_PARALLELISM
from airflow_bulkload.catalog import TableRef
from airflow_bulkload.dialects import IndexBuild
from airflow_bulkload.exceptions import DuplicateKeyError
from airflow_bulkload.knobs import parse_parallelism
from airflow_bulkload.table_state import plan_rebuild

if TYPE_CHECKING:
    from airflow.sdk.types import Logger

    from airflow_bulkload.dialects import Dialect


class TableRebuildMixin:
    """Build the missing indexes, constraints and foreign keys of a saved table state."""

    if TYPE_CHECKING:

        @property
        def log(self) -> Logger: ...

        @property
        def dialect(self) -> Dialect: ...

        def _session(self) -> AbstractContextManager[Any]: ...

    def _rebuild(
        self,
        conn: Any,
        ref: TableRef,
        saved: dict[str, Any],
        load_id: str,
        parallelism: int | str,
        maintenance_work_mem: str,
    ) -> dict[str, float]:
        """Build what is missing; returns seconds per object.

        Indexes (PostgreSQL: one session per index, up to ``parallelism`` at once; MySQL: one ALTER
        TABLE), then PK/UNIQUE constraints on their rebuilt indexes, then foreign keys.
        """
        dialect = self.dialect
        plan = plan_rebuild(saved, dialect.table_snapshot(conn, ref))
        seconds: dict[str, float] = {}
        indexes = plan.create_indexes
        if indexes and dialect.traits.parallel_index_builds:
            workers = parse_parallelism(parallelism, len(indexes), DEFAULT_PARALLELISM)
            self.log.info(
                "%s: rebuilding %d index(es) in %d parallel session(s), maintenance_work_mem %s",
                ref,
                len(indexes),
                workers,
                maintenance_work_mem,
            )
            with ThreadPoolExecutor(max_workers=workers) as pool:
                futures = [
                    (
                        ix,
                        pool.submit(
                            self._build_in_own_session, ref, ix, maintenance_work_mem, workers
                        ),
                    )
                    for ix in indexes
                ]
                failures: list[tuple[dict[str, Any], BaseException]] = []
                for ix, future in futures:
                    error = future.exception()
                    if error is None:
                        seconds[f"index {ix['name']}"] = future.result()
                        self.log.info(
                            "%s: rebuilt index %s (%.2f s)", ref, ix["name"], future.result()
                        )
                    else:
                        failures.append((ix, error))
            if failures:
                ix, first = failures[0]
                for other_ix, other in failures[1:]:
                    self.log.error("%s: index %s failed too: %s", ref, other_ix["name"], other)
                error = self._build_error(conn, ref, ix, first, load_id)
                if error is first:
                    raise first
                raise error from first
        elif indexes:
            started = time.monotonic()
            try:
                dialect.create_indexes(conn, ref, IndexBuild(indexes, maintenance_work_mem))
            except Exception as exc:
                error = self._build_error(conn, ref, _failed_index(indexes, exc), exc, load_id)
                if error is exc:
                    raise
                raise error from exc
            took = time.monotonic() - started
            names = [ix["name"] for ix in indexes]
            for name in names:
                seconds[f"index {name}"] = took
            self.log.info("%s: rebuilt index(es) %s in one pass (%.2f s)", ref, names, took)
        for ix in plan.attach_constraints:
            started = time.monotonic()
            dialect.attach_constraint(conn, ref, ix)
            seconds[f"constraint {ix['constraint_name']}"] = time.monotonic() - started
            self.log.info(
                "%s: constraint %s attached to index %s (%.2f s)",
                ref,
                ix["constraint_name"],
                ix["name"],
                time.monotonic() - started,
            )
        rebuilt = {ix["name"] for ix in indexes} | {ix["name"] for ix in plan.attach_constraints}
        for ix in saved["indexes"]:
            if ix["name"] in rebuilt:
                dialect.restore_comments(conn, ref, ix)
        for fk in plan.add_foreign_keys:
            started = time.monotonic()
            dialect.add_foreign_key(conn, fk)
            seconds[f"foreign key {fk['table']}.{fk['name']}"] = time.monotonic() - started
            self.log.info(
                "%s: foreign key %s on %s.%s re-added (%.2f s)",
                ref,
                fk["name"],
                fk["schema"],
                fk["table"],
                time.monotonic() - started,
            )
        return seconds

    def _build_in_own_session(
        self, ref: TableRef, index: dict[str, Any], maintenance_work_mem: str, sessions: int
    ) -> float:
        started = time.monotonic()
        with self._session() as conn:
            build = IndexBuild([index], maintenance_work_mem, concurrent_sessions=sessions)
            self.dialect.create_indexes(conn, ref, build)
        return time.monotonic() - started

    def _build_error(
        self, conn: Any, ref: TableRef, index: dict[str, Any], error: BaseException, load_id: str
    ) -> BaseException:
        if not isinstance(error, Exception):
            return error
        sample = self.dialect.duplicate_key_sample(conn, ref, index, error)
        if sample is None:
            return error
        return DuplicateKeyError(
            f"{ref}: unique index {index['name']} cannot be rebuilt: the loaded data has "
            f"duplicate keys, e.g. {'; '.join(sample) or '(no sample)'}. The saved state of load "
            f"{load_id} is kept: remove the duplicates, then run finalize (or restore) again.",
            index=index["name"],
            sample=sample,
        )


def _failed_index(indexes: list[dict[str, Any]], exc: Exception) -> dict[str, Any]:
    """The index a combined MySQL ALTER failed on, from "Duplicate entry ... for key 'name'"."""
    match = re.search(r"for key '(?:[^']*\.)?([^']*)'", str(exc))
    if match:
        for ix in indexes:
            if ix["name"] == match.group(1):
                return ix
    return next((ix for ix in indexes if ix["is_unique"]), indexes[0])
