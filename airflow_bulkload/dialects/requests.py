"""What a caller hands an engine role in one value: rows to load, a chunk to take back, indexes.

Each request carries the arguments that belong together, so the role's signature stays short and
each engine reads the same named fields.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from airflow_bulkload.catalog import LedgerEntry, TableRef
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat


@dataclass(frozen=True)
class LoadInto:
    """Where loaded rows go and how to read them.

    ``columns``: the table's columns in input order (``None``: every loadable column, in table
    order); ``file_format``: the input's delimiter, quoting, NULL marker and header.
    """

    table: TableRef
    columns: list[str] | None
    file_format: FileFormat


@dataclass(frozen=True)
class Withdrawal:
    """A committed chunk to take back out of ``table``.

    ``key_columns``: the columns a row of the chunk is matched on (empty: every column the chunk
    carries, NULL-safely). ``exact``: the delete must take exactly ``entry.rows`` rows, else at
    most that many (some of the chunk's rows are already gone).
    """

    table: TableRef
    entry: LedgerEntry
    chunk: ChunkSpec
    key_columns: list[str]
    exact: bool = True


@dataclass(frozen=True)
class WithdrawScratch:
    """The table withdrawn chunks are read into, one after another, and its ``columns``.

    A row of the target matches a scratch row on ``key_columns``, or on all ``columns``.
    """

    table: TableRef
    columns: list[str]


@dataclass(frozen=True)
class IndexBuild:
    """Saved indexes to build in one session.

    ``concurrent_sessions``: how many sessions build at once (PostgreSQL then gives each build no
    parallel workers of its own).
    """

    indexes: list[dict[str, Any]]
    maintenance_work_mem: str
    concurrent_sessions: int = 1
