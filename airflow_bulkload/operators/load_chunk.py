"""LoadChunkOperator: one staged chunk into one table, exactly once."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Context
from airflow.sdk.exceptions import AirflowFailException

from airflow_bulkload.exceptions import ChunkConflictError, ChunkLoadError
from airflow_bulkload.hooks.bulk_load import BulkLoadHook, ChunkResult
from airflow_bulkload.knobs import parse_optional_int
from airflow_bulkload.operators.base import TableTaskOperator
from airflow_bulkload.operators.validation import check_method, validate_or_fail
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat


class LoadChunkOperator(TableTaskOperator):
    """Load one chunk described by a manifest entry into ``table``, exactly once.

    Meant to be mapped over the staging task's chunk list::

        LoadChunkOperator.partial(task_id="load", table="public.events", conn_id="pg").expand(
            chunk=stage.output
        )

    One transaction per chunk: the chunk ledger makes a retry of a committed chunk a no-op and a
    failed chunk leaves no rows behind. The row count is checked against the manifest.

    :param table: target table, ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param chunk: a manifest chunk entry (dict from :class:`~airflow_bulkload.staging.ChunkSpec`).
    :param conn_id: a ``postgres`` or ``mysql`` connection; the SQL dialect follows its type.
    :param aws_conn_id: AWS connection for reading the chunk (``client``) or the region (server side).
    :param method: ``client`` (stream through the worker), ``rds_s3`` (RDS/Aurora PostgreSQL
        ``aws_s3.table_import_from_s3``) or ``aurora_s3`` (Aurora MySQL ``LOAD DATA FROM S3``).
    :param columns: target columns in file order; default: the chunk's columns, else all columns.
    :param file_format: override the chunk's format (dict of FileFormat fields).
    :param load_id: recorded in the ledger; defaults to ``dag_id/run_id``.
    :param max_concurrent_loads: at most this many chunks load into ``table`` at once, enforced
        by load slots held on the database server (so it holds across workers, runs and DAGs,
        and a killed worker's slot frees itself). An int, or its text from a template; the
        pipeline passes the pre-flight plan's parallelism (``preflight.planned("parallelism")``).
        ``None``: no limit beyond Airflow's own.
    """

    template_fields: Sequence[str] = (
        "table",
        "chunk",
        "columns",
        "file_format",
        "load_id",
        "method",
        "max_concurrent_loads",
    )
    ui_color = "#d9f0ff"

    def __init__(
        self,
        *,
        table: str,
        chunk: dict[str, Any],
        conn_id: str,
        aws_conn_id: str | None = "aws_default",
        method: str = "client",
        columns: list[str] | None = None,
        file_format: dict[str, Any] | None = None,
        load_id: str | None = None,
        max_concurrent_loads: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, conn_id=conn_id, aws_conn_id=aws_conn_id, **kwargs)
        self.chunk = chunk
        self.method = method
        self.columns = columns
        self.file_format = file_format
        self.load_id = load_id
        self.max_concurrent_loads = max_concurrent_loads

    def validate(self) -> None:
        """Refuse an unknown method or a limit that is not a number (``ValueError``).

        Run by ``execute`` before the chunk is read, with the templated fields rendered.
        """
        check_method(self.method)
        self._max_concurrent_loads()

    def _max_concurrent_loads(self) -> int | None:
        return parse_optional_int(self.max_concurrent_loads, "max_concurrent_loads")

    def execute(self, context: Context) -> dict[str, Any]:
        validate_or_fail(self.validate)
        spec = ChunkSpec.from_dict(self.chunk)
        load_id = self.load_id or f"{context['dag'].dag_id}/{context['run_id']}"
        hook = self.bulk_load_hook()
        try:
            result = self._load(hook, spec, load_id)
        except (ChunkLoadError, ChunkConflictError) as exc:
            # bad data stays bad: fail now rather than retry (the transaction left nothing behind)
            raise AirflowFailException(str(exc)) from exc
        return result.to_dict()

    def _load(self, hook: BulkLoadHook, spec: ChunkSpec, load_id: str) -> ChunkResult:
        return hook.load_chunk(
            self.table,
            spec,
            method=self.method,
            load_id=load_id,
            columns=self.columns,
            file_format=FileFormat.from_dict(self.file_format) if self.file_format else None,
            max_concurrent_loads=self._max_concurrent_loads(),
        )
