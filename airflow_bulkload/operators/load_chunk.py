"""LoadChunkOperator: one staged chunk (or a batch of them) into one table, exactly once."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from airflow.sdk import Context, conf
from airflow.sdk.exceptions import AirflowFailException

from airflow_bulkload.exceptions import (
    BulkLoadError,
    ChunkConflictError,
    ChunkLoadError,
    LoadSlotsBusyError,
)
from airflow_bulkload.hooks.bulk_load import BulkLoadHook, ChunkResult
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.knobs import parse_flag, parse_optional_int
from airflow_bulkload.modes import APPEND, parse_mode
from airflow_bulkload.operators.base import TableTaskOperator
from airflow_bulkload.operators.validation import check_method, validate_or_fail
from airflow_bulkload.staging.manifest import ChunkSpec, FileFormat
from airflow_bulkload.triggers.db_waits import LoadSlotFreeTrigger

if TYPE_CHECKING:
    from airflow.providers.openlineage.extractors import OperatorLineage


class LoadChunkOperator(TableTaskOperator):
    """Load one chunk described by a manifest entry into ``table``, exactly once.

    Meant to be mapped over the staging task's chunk list::

        LoadChunkOperator.partial(task_id="load", table="public.events", conn_id="pg").expand(
            chunk=stage.output
        )

    One transaction per chunk: the chunk ledger makes a retry of a committed chunk a no-op and a
    failed chunk leaves no rows behind. The row count is checked against the manifest.

    ``chunk`` may also be a batch, a list of chunks loaded one after another in one task (see
    :mod:`~airflow_bulkload.staging.load_batches`; ``bulk_load_table`` deals them with
    ``load_batch_size``): one task launch for several chunks, each still its own transaction
    and ledger entry, so a retried batch skips what it committed and loads the rest. The task
    then returns a list of chunk results.

    :param table: target table, ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param chunk: a manifest chunk entry (dict from :class:`~airflow_bulkload.staging.ChunkSpec`),
        or a list of them (a batch).
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
    :param slot_wait_timeout: seconds to wait for a load slot before failing (default 6 h).
    :param deferrable: wait for a load slot in the triggerer (:class:`~airflow_bulkload.triggers.
        db_waits.LoadSlotFreeTrigger`), so a waiting load holds no worker slot.
    :param poll_interval: seconds between the deferred wait's checks.
    :param validate_only: a dry run: load the chunk into a temporary copy of the table and throw it away
        (:meth:`~airflow_bulkload.hooks.BulkLoadHook.try_chunk`): every value is checked by the
        engine's own parser, and nothing is written (no ledger entry, no load slot).
    :param mode: ``append`` (into ``table``), or ``replace``/``upsert``: into the work table
        :class:`~airflow_bulkload.operators.table.PrepareTableOperator` made for that mode
        (see :mod:`airflow_bulkload.modes`); templated.
    """

    template_fields: Sequence[str] = (
        "table",
        "conn_id",
        "chunk",
        "columns",
        "file_format",
        "load_id",
        "method",
        "max_concurrent_loads",
        "validate_only",
        "mode",
    )
    ui_color = "#d9f0ff"
    #: the chunks' results once they are in the table, for OpenLineage (set by ``execute``)
    _loaded: list[ChunkResult] | None = None

    def __init__(
        self,
        *,
        table: str,
        chunk: dict[str, Any] | list[dict[str, Any]],
        conn_id: str,
        aws_conn_id: str | None = "aws_default",
        method: str = "client",
        columns: list[str] | None = None,
        file_format: dict[str, Any] | None = None,
        load_id: str | None = None,
        max_concurrent_loads: int | str | None = None,
        slot_wait_timeout: float = 6 * 3600,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        validate_only: bool | str = False,
        mode: str = APPEND,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, conn_id=conn_id, aws_conn_id=aws_conn_id, **kwargs)
        self.mode = mode
        self.chunk = chunk
        self.method = method
        self.columns = columns
        self.file_format = file_format
        self.load_id = load_id
        self.max_concurrent_loads = max_concurrent_loads
        self.slot_wait_timeout = slot_wait_timeout
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.validate_only = validate_only

    def validate(self) -> None:
        """Refuse an unknown method or a limit that is not a number (``ValueError``).

        Run by ``execute`` before the chunk is read, with the templated fields rendered.
        """
        check_method(self.method)
        self._chunk_dicts()
        self._max_concurrent_loads()
        parse_flag(self.validate_only, "validate_only")
        parse_mode(self.mode)

    def _max_concurrent_loads(self) -> int | None:
        return parse_optional_int(self.max_concurrent_loads, "max_concurrent_loads")

    def _chunk_dicts(self) -> list[Mapping[str, Any]]:
        """The chunks to load, in order: ``chunk`` itself, or each chunk of a batch."""
        chunks: list[Any] = [self.chunk] if isinstance(self.chunk, Mapping) else self.chunk
        if not isinstance(chunks, list) or not all(isinstance(c, Mapping) for c in chunks):
            raise ValueError(
                f"chunk must be a manifest chunk (a dict) or a list of them, got "
                f"{type(self.chunk).__name__}"
            )
        return chunks

    def _returned(self, results: list[ChunkResult]) -> dict[str, Any] | list[dict[str, Any]]:
        """One chunk's result as a dict, a batch's as a list (what ``chunk`` was)."""
        if isinstance(self.chunk, Mapping):
            return results[0].to_dict()
        return [r.to_dict() for r in results]

    def execute(self, context: Context) -> dict[str, Any] | list[dict[str, Any]]:
        validate_or_fail(self.validate)
        return self._run(context, deadline=None)

    def execute_complete(
        self, context: Context, event: dict[str, Any]
    ) -> dict[str, Any] | list[dict[str, Any]]:
        """Resume after :class:`LoadSlotFreeTrigger`: load now, or wait again if beaten to it."""
        if event.get("status") == "timeout":
            raise LoadSlotsBusyError(
                f"no free load slot for {self.table} after {self.slot_wait_timeout:.0f} s: "
                f"{event.get('message')}"
            )
        if event.get("status") != "done":
            raise BulkLoadError(f"waiting for a load slot of {self.table} failed: {event}")
        return self._run(context, deadline=float(event["deadline"]))

    def _run(
        self, context: Context, deadline: float | None
    ) -> dict[str, Any] | list[dict[str, Any]]:
        batch = [ChunkSpec.from_dict(dict(c)) for c in self._chunk_dicts()]
        hook = self.bulk_load_hook()
        if parse_flag(self.validate_only, "validate_only"):
            try:
                return self._returned(
                    [hook.try_chunk(self.table, spec, columns=self.columns) for spec in batch]
                )
            except (ChunkLoadError, ChunkConflictError) as exc:
                raise AirflowFailException(str(exc)) from exc
        load_id = self.load_id or f"{context['dag'].dag_id}/{context['run_id']}"
        slots = self._max_concurrent_loads()
        defers = bool(self.deferrable and slots)
        # replace/upsert: the chunk goes into the work table prepare made
        into = LoadModesHook(self.conn_id, self.aws_conn_id).load_table(
            self.table, parse_mode(self.mode)
        )
        results: list[ChunkResult] = []
        for spec in batch:
            try:
                result = self._load(hook, into, spec, load_id, 0 if defers else None)
            except LoadSlotsBusyError:
                if not defers or slots is None:
                    raise
                # the resumed task starts the batch again: the ledger skips what committed
                self._defer(into, slots, deadline or time.time() + self.slot_wait_timeout)
            except (ChunkLoadError, ChunkConflictError) as exc:
                # bad data stays bad: fail now rather than retry (its transaction left nothing)
                raise AirflowFailException(str(exc)) from exc
            results.append(result)
            if len(batch) > 1:
                self.log.info(
                    "batch: %d of %d chunks done, %d rows (%s)",
                    len(results),
                    len(batch),
                    sum(r.rows for r in results),
                    "skipped, already loaded" if result.skipped else "loaded",
                )
        self._loaded = results
        return self._returned(results)

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """OpenLineage: the chunks' S3 objects in, the table out.

        The table comes with its schema and the chunks' rows and bytes (also when an earlier try
        had committed them: they are in the table).
        """
        from airflow_bulkload.lineage import load_lineage

        if not self._loaded:
            from airflow.providers.openlineage.extractors import OperatorLineage

            return OperatorLineage()
        return load_lineage(
            self.bulk_load_hook(),
            self.table,
            list(dict.fromkeys(r.uri for r in self._loaded)),
            rows=sum(r.rows for r in self._loaded),
            nbytes=sum(r.bytes for r in self._loaded),
        )

    def _defer(self, into: str, slots: int, deadline: float) -> NoReturn:
        self.log.info("%s: all %d load slots are busy; deferring the wait", into, slots)
        self.defer(
            trigger=LoadSlotFreeTrigger(
                conn_id=self.conn_id,
                table=into,
                slots=slots,
                deadline=deadline,
                poll_interval=self.poll_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=max(deadline - time.time(), 0) + 60),
        )

    def _load(
        self,
        hook: BulkLoadHook,
        into: str,
        spec: ChunkSpec,
        load_id: str,
        slot_wait: float | None = None,
    ) -> ChunkResult:
        return hook.load_chunk(
            into,
            spec,
            method=self.method,
            load_id=load_id,
            columns=self.columns,
            file_format=FileFormat.from_dict(self.file_format) if self.file_format else None,
            max_concurrent_loads=self._max_concurrent_loads(),
            slot_wait_timeout=self.slot_wait_timeout if slot_wait is None else slot_wait,
        )
