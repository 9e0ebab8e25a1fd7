"""ClaimTableOperator: the table is this load's before anything changes on the server."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import Context, conf

from airflow_bulkload.exceptions import BulkLoadError, TableClaimedError
from airflow_bulkload.hooks.load_modes import LoadModesHook
from airflow_bulkload.modes import APPEND
from airflow_bulkload.operators.table import _TableOperator
from airflow_bulkload.operators.undone_by_teardown import refuse_if_run_on
from airflow_bulkload.operators.validation import validate_or_fail
from airflow_bulkload.operators.withdraw import check_withdraw_arguments, withdraw_superseded
from airflow_bulkload.triggers.db_waits import TableClaimTrigger

CLAIM_OUTLIVES = (
    "the table would stay claimed after the run, a failure would leave it without its indexes, "
    "and a reload would take this run's rows back out with nothing to load them again"
)


class ClaimTableOperator(_TableOperator):
    """Claim the table for this load before anything changes on the server.

    The claim (a durable row in the state tables) says which load may strip the table; a second
    load waits up to ``claim_timeout`` seconds, then fails naming the holder. Taking it before
    ``enter_bulk_mode`` means a load that must wait for another never holds a shared server in
    bulk mode for the wait. :class:`PrepareTableOperator` with the same load id finds the claim
    its own; finalize or restore (the teardown, which also runs when this fails) releases it.
    Cleared to run again without the tasks downstream of it once they ran in its DAG run
    (cleared alone; "only failed" after it failed), it fails without claiming or withdrawing
    (:mod:`~airflow_bulkload.operators.undone_by_teardown`).

    :param table: ``schema.table`` (PostgreSQL) or ``db.table``/``table`` (MySQL).
    :param conn_id: a ``postgres`` or ``mysql`` connection.
    :param load_id: the load id shared with prepare/finalize/restore (default as theirs).
    :param claim_timeout: seconds to wait for another load's claim.
    :param deferrable: wait for the claim in the triggerer (:class:`~airflow_bulkload.triggers.
        db_waits.TableClaimTrigger`, which takes the claim as soon as it is free), so a waiting
        load holds no worker slot.
    :param poll_interval: seconds between the wait's checks.
    :param manifest: the staged input's manifest: once the table is claimed, also take back
        superseded chunks in the same task, as :class:`~airflow_bulkload.operators.withdraw.
        WithdrawSupersededChunksOperator` would (the pipeline does, saving a task launch).
        ``None`` (default): only claim.
    :param reload: with ``manifest``: as the withdraw operator's ``reload`` (templated).
    :param mode: with ``manifest``: as the withdraw operator's ``mode`` (templated); replace and
        upsert have nothing to take back.
    """

    template_fields: Sequence[str] = ("table", "conn_id", "load_id", "manifest", "reload", "mode")

    def __init__(
        self,
        *,
        table: str,
        conn_id: str,
        load_id: str | None = None,
        claim_timeout: float = 0.0,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poll_interval: float = 5.0,
        manifest: str | None = None,
        reload: bool | str = False,
        mode: str = APPEND,
        **kwargs: Any,
    ) -> None:
        super().__init__(table=table, conn_id=conn_id, load_id=load_id, **kwargs)
        self.claim_timeout = claim_timeout
        self.deferrable = deferrable
        self.poll_interval = poll_interval
        self.manifest = manifest
        self.reload = reload
        self.mode = mode

    def validate(self) -> None:
        """Refuse a ``reload`` or ``mode`` that is not one (``ValueError``), before claiming.

        Run by ``execute`` with the templated fields rendered.
        """
        check_withdraw_arguments(self.reload, self.mode)

    def _then_withdraw(
        self, context: Context, hook: LoadModesHook, claimed: dict[str, Any]
    ) -> dict[str, Any]:
        if not self.manifest:
            return claimed
        withdrawn = withdraw_superseded(
            self, context, manifest=self.manifest, reload=self.reload, mode=self.mode, hook=hook
        )
        return {**claimed, "withdraw": withdrawn}

    def execute(self, context: Context) -> dict[str, Any]:
        validate_or_fail(self.validate)
        refuse_if_run_on(self, context, CLAIM_OUTLIVES, whole_downstream=True)
        load_id = self.resolved_load_id(context)
        hook = self.hook()
        if not (self.deferrable and self.claim_timeout > 0):
            claimed = hook.claim(
                self.table,
                load_id=load_id,
                timeout=self.claim_timeout,
                poll_interval=self.poll_interval,
            )
            return self._then_withdraw(context, hook, claimed)
        try:
            claimed = hook.claim(self.table, load_id=load_id)
        except TableClaimedError as exc:
            self.log.info("%s; deferring the wait (up to %.0f s)", exc, self.claim_timeout)
        else:
            return self._then_withdraw(context, hook, claimed)
        self.defer(
            trigger=TableClaimTrigger(
                conn_id=self.conn_id,
                table=self.table,
                load_id=load_id,
                deadline=time.time() + self.claim_timeout,
                poll_interval=self.poll_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.claim_timeout + 60),
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after :class:`TableClaimTrigger` took the claim: take it as this task's own."""
        if event.get("status") == "timeout":
            raise TableClaimedError(str(event.get("message")))
        if event.get("status") != "done":
            raise BulkLoadError(f"waiting for the claim on {self.table} failed: {event}")
        hook = self.hook()
        claimed = hook.claim(self.table, load_id=self.resolved_load_id(context))
        return self._then_withdraw(context, hook, claimed)
