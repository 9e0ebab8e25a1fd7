"""The base of the operators that work on one target table: the table and its two connections."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperator

from airflow_bulkload.hooks.bulk_load import BulkLoadHook


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
