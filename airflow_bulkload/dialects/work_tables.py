"""The WorkTables role: what the ``replace`` and ``upsert`` load modes need of an engine.

A work table is created from the target's definition; chunks load into it as into any table
(ledger, slots, prepare/finalize); then it replaces the target in one swap (``replace``) or is
merged into it by key (``upsert``) and dropped. See :mod:`airflow_bulkload.modes`.
"""

from __future__ import annotations

import abc
from collections.abc import Iterator, Sequence
from typing import Any

from airflow_bulkload.catalog import TableRef
from airflow_bulkload.modes import MergeSpec


class WorkTables(abc.ABC):
    """Work tables, the atomic swap and the batched merge."""

    @abc.abstractmethod
    def mode_blockers(
        self, conn: Any, table: TableRef, mode: str, keys: Sequence[str] | None
    ) -> list[str]:
        """Why ``mode`` cannot load ``table`` as promised (empty when it can).

        ``replace``: what a swap would not carry over (views or foreign keys bound to the table,
        triggers, ...). ``upsert``: no unique key on ``keys`` (the primary key when ``None``).
        """

    @abc.abstractmethod
    def table_exists(self, conn: Any, table: TableRef) -> bool:
        """Whether ``table`` exists."""

    @abc.abstractmethod
    def work_table_marker(self, conn: Any, work: TableRef) -> str | None:
        """The marker :meth:`create_work_table` left on ``work`` (``None``: no such table)."""

    @abc.abstractmethod
    def create_work_table(self, conn: Any, table: TableRef, work: TableRef, mode: str) -> None:
        """Create ``work`` from ``table``'s definition, empty, for ``mode``.

        ``replace``: everything a swap keeps (columns, defaults, constraints, indexes, storage
        options, comments); ``upsert``: the columns and defaults (PostgreSQL: UNLOGGED, no index).
        """

    @abc.abstractmethod
    def mark_work_table(self, conn: Any, work: TableRef, marker: str) -> None:
        """Leave ``marker`` on ``work``: which load and input it is being filled for."""

    @abc.abstractmethod
    def drop_table_if_exists(self, conn: Any, table: TableRef) -> None:
        """``DROP TABLE IF EXISTS``."""

    @abc.abstractmethod
    def swap_in(self, conn: Any, table: TableRef, work: TableRef, old: TableRef) -> list[str]:
        """Put ``work`` in ``table``'s place and drop the old table; what was carried over.

        Readers see the old table or the new one, never neither (PostgreSQL: one transaction, in
        the caller's; MySQL: one ``RENAME TABLE``, then the drop of ``old``). The new table gets
        the old one's name, comment, grants and index names.
        """

    @abc.abstractmethod
    def merge_batches(self, conn: Any, merge: MergeSpec, batch_rows: int) -> Iterator[int]:
        """Run ``merge`` in batches of about ``batch_rows`` rows, in the caller's transaction.

        Yields the rows each batch wrote. A merge run again gives the same table.
        """

    @abc.abstractmethod
    def merge_differences(self, conn: Any, merge: MergeSpec) -> int:
        """Work-table rows whose key is missing from the table or whose updated columns differ.

        Keys match as the engine matches them (its collations); the columns compare byte-exact.
        """

    @abc.abstractmethod
    def duplicate_keys(
        self, conn: Any, table: TableRef, keys: Sequence[str], limit: int = 5
    ) -> list[str]:
        """A sample of the keys ``table`` holds more than once, as ``(a, b)=(1, x) x2``."""
