"""WithdrawSupersededChunksOperator: a corrected input never loads the earlier attempt twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import BaseOperator, Context

from airflow_bulkload.hooks.bulk_load import BulkLoadHook


class WithdrawSupersededChunksOperator(BaseOperator):
    """Before loading a staged input, take back what an earlier attempt of the same load
    committed from a staging that this one replaced.

    When a run fails on a bad row, the chunks before it are committed. If the input is then
    corrected, staging writes a new manifest under a new fingerprint, whose chunks have new keys:
    the ledger would load them all, and the earlier attempt's rows would be there twice. This
    task deletes those rows (by primary key, reading the superseded chunks again from S3) and
    their ledger entries, one chunk per transaction, so the load that follows leaves each row
    of the corrected input exactly once. It does nothing when nothing was superseded; a table
    without a primary key is refused with what to do.

    :param table: the target table.
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param manifest: S3 URI of the current manifest (the stage task's ``manifest_uri``).
    :param aws_conn_id: AWS connection to read the superseded chunks.
    """

    template_fields: Sequence[str] = ("table", "manifest")
    ui_color = "#f3e0ff"

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        manifest: str,
        aws_conn_id: str | None = "aws_default",
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table = table
        self.conn_id = conn_id
        self.manifest = manifest
        self.aws_conn_id = aws_conn_id

    def execute(self, context: Context) -> dict[str, Any]:
        hook = BulkLoadHook(conn_id=self.conn_id, aws_conn_id=self.aws_conn_id)
        results = hook.withdraw_superseded_chunks(self.table, self.manifest)
        if not results:
            self.log.info("nothing of an earlier staging of this load is in %s", self.table)
        return {"chunks": [r.uri for r in results], "rows": sum(r.rows for r in results)}
