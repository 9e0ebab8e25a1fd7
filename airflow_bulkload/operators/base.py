"""Bases of the operators: one target table and its two connections; a staging worker's limits."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from airflow_bulkload.hooks.bulk_load import BulkLoadHook
from airflow_bulkload.staging.options import Resources


class TableTaskOperator(BaseOperator):
    """An operator on one target table, reached through a database and an AWS connection.

    :param table: ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param aws_conn_id: the AWS connection that reads the input, its chunks and manifest.
    """

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.conn_id = conn_id
        self.aws_conn_id = aws_conn_id

    def bulk_load_hook(self) -> BulkLoadHook:
        return BulkLoadHook(conn_id=self.conn_id, aws_conn_id=self.aws_conn_id)


class StagingWorkerOperator(BaseOperator):
    """An operator that stages input on its worker, within a temp directory and DuckDB's limits.

    :param temp_dir: local working directory (default: the system temp dir).
    :param duckdb_memory_limit: DuckDB's memory limit; it spills to ``temp_dir`` beyond it.
    :param duckdb_threads: DuckDB threads (default: all cores).
    :param check_temp_space: fail early when ``temp_dir`` lacks the estimated space.
    """

    def __init__(
        self,
        *,
        temp_dir: str | None = None,
        duckdb_memory_limit: str = "1GB",
        duckdb_threads: int | None = None,
        check_temp_space: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.temp_dir = temp_dir
        self.duckdb_memory_limit = duckdb_memory_limit
        self.duckdb_threads = duckdb_threads
        self.check_temp_space = check_temp_space

    def staging_resources(self, **more: Any) -> Resources:
        """What the staging run may use on this worker; ``more`` sets the other limits."""
        return Resources(
            temp_dir=self.temp_dir,
            memory_limit=self.duckdb_memory_limit,
            threads=self.duckdb_threads,
            check_temp_space=self.check_temp_space,
            **more,
        )
