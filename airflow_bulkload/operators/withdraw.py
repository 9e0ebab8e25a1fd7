"""WithdrawSupersededChunksOperator: a corrected input never loads the earlier attempt twice."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.sdk import Context

from airflow_bulkload.knobs import parse_bool
from airflow_bulkload.modes import APPEND, parse_mode
from airflow_bulkload.operators.base import TableTaskOperator
from airflow_bulkload.operators.validation import validate_or_fail

if TYPE_CHECKING:
    from airflow_bulkload.hooks.bulk_load import BulkLoadHook


class WithdrawSupersededChunksOperator(TableTaskOperator):
    """Before loading a staged input, make the chunk ledger agree with the table.

    With :meth:`~airflow_bulkload.hooks.BulkLoadHook.reconcile`: take back what an earlier attempt
    of the same load committed from a staging that this one replaced, refuse a second input for a
    date that was already loaded and verified (unless ``reload``), and drop ledger entries whose
    rows are no longer in the table, so those chunks load again.

    When a run fails on a bad row, the chunks before it are committed. If the input is then
    corrected, staging writes a new manifest under a new fingerprint, whose chunks have new keys:
    the ledger would load them all, and the earlier attempt's rows would be there twice. This
    task deletes those rows (by key, reading the superseded chunks again from S3; by every column
    the input carries when the table has no key the input holds) and their ledger entries, one
    chunk per transaction, so the load that follows leaves each row of the corrected input
    exactly once. It does nothing when nothing was superseded; a chunk whose rows cannot be
    taken back exactly (rows of another load share its keys, or changed since) is refused, and
    nothing is deleted.

    :param table: the target table.
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param manifest: S3 URI of the current manifest (the stage task's ``manifest_uri``).
    :param aws_conn_id: AWS connection to read the superseded chunks.
    :param reload: take every chunk this load committed for the run's date back out (this input's
        and any earlier input's), so the date loads again from this input, exactly once. A bool,
        or a string (templated from a DAG Param: ``"true"``/``"false"``).
    :param load_id: recorded with the load; defaults to ``dag_id/run_id``.
    :param mode: ``replace``/``upsert`` load into a work table of their own and have nothing to
        withdraw: the task then does nothing.

    Returns (XCom) ``{"chunks": [...], "rows": n, "stale": [...], ...}``: the chunks taken back
    and their rows (none for replace/upsert, with ``"mode"``).
    """

    template_fields: Sequence[str] = ("table", "conn_id", "manifest", "reload", "mode")
    ui_color = "#f3e0ff"

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        manifest: str,
        aws_conn_id: str | None = "aws_default",
        reload: bool | str = False,
        load_id: str | None = None,
        mode: str = APPEND,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, conn_id=conn_id, aws_conn_id=aws_conn_id, **kwargs)
        self.mode = mode
        self.manifest = manifest
        self.reload = reload
        self.load_id = load_id

    def validate(self) -> None:
        """Refuse a ``reload`` that is not a bool or its text (``ValueError``).

        Run by ``execute`` with the templated fields rendered.
        """
        check_withdraw_arguments(self.reload, self.mode)

    def execute(self, context: Context) -> dict[str, Any]:
        validate_or_fail(self.validate)
        return withdraw_superseded(
            self,
            context,
            manifest=self.manifest,
            reload=self.reload,
            mode=self.mode,
            load_id=self.load_id,
        )


def check_withdraw_arguments(reload: bool | str, mode: str) -> None:
    """Refuse a rendered ``reload`` that is not a bool or its text, or an unknown ``mode``."""
    parse_bool(reload, "reload")
    parse_mode(mode)


def withdraw_superseded(
    operator: TableTaskOperator,
    context: Context,
    *,
    manifest: str,
    reload: bool | str,
    mode: str,
    load_id: str | None = None,
    hook: BulkLoadHook | None = None,
) -> dict[str, Any]:
    """What :class:`WithdrawSupersededChunksOperator` does, for ``operator``'s table.

    Through ``hook`` when the caller has one open (default: the operator's own). Also run by
    :class:`~airflow_bulkload.operators.claim.ClaimTableOperator` given a manifest, right after
    it takes the claim, so the pipeline spends one task launch on both.
    """
    log = operator.log
    table = operator.table
    mode = parse_mode(mode)
    if mode != APPEND:
        # a replace or upsert fills a fresh work table: no earlier chunk to take back out
        log.info("mode %s: nothing to withdraw from %s", mode, table)
        return {"mode": mode, "chunks": [], "rows": 0, "stale": []}  # as reconcile's to_dict
    again = parse_bool(reload, "reload")
    load_id = load_id or f"{context['dag'].dag_id}/{context['run_id']}"
    hook = hook or operator.bulk_load_hook()
    result = hook.reconcile(table, manifest, reload=again, load_id=load_id)
    if again:
        log.info(
            "reload: took %d chunk(s), %d rows, of this date back out of %s",
            len(result.withdrawn),
            sum(r.rows for r in result.withdrawn),
            table,
        )
    elif not result.withdrawn:
        log.info("nothing of an earlier staging of this load is in %s", table)
    if result.stale:
        log.warning(
            "%d chunk(s) recorded as loaded are no longer (all) in %s and load again: %s",
            len(result.stale),
            table,
            ", ".join(result.stale[:5]),
        )
    return result.to_dict()
