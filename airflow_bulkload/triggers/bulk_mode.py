"""RdsParameterGroupInSyncTrigger: wait, without a worker slot, for an RDS parameter change."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_bulkload.bulk_mode.status import WaitSpec, describe_request, poll_async


class RdsParameterGroupInSyncTrigger(BaseTrigger):
    """Poll until an RDS parameter change is in effect, or waits for a reboot.

    Polls the instance until it is ``available`` with the expected parameter group ``in-sync``
    and/or (Aurora cluster-level parameters) the cluster until every member reports the DB cluster
    parameter group ``in-sync`` (event ``ready``), or either reports ``pending-reboot`` (event
    ``pending-reboot``: the operator decides about the reboot and defers again). Each poll is
    :func:`~airflow_bulkload.bulk_mode.status.poll_steps`, the routine the synchronous wait runs
    too, fed by the hook's async (aiobotocore) client. Like the amazon provider's waiter
    triggers, it takes ``waiter_delay``/``waiter_max_attempts``.

    :param spec: a :class:`~airflow_bulkload.bulk_mode.status.WaitSpec` as a dict.
    :param waiter_delay: seconds between checks.
    :param waiter_max_attempts: checks before giving up (event ``timeout``).
    :param aws_conn_id: AWS connection.
    :param region_name: AWS region, if not the connection's.
    """

    def __init__(
        self,
        spec: dict[str, Any],
        waiter_delay: int,
        waiter_max_attempts: int,
        aws_conn_id: str | None = "aws_default",
        region_name: str | None = None,
    ) -> None:
        super().__init__()
        self.spec = spec
        self.waiter_delay = waiter_delay
        self.waiter_max_attempts = waiter_max_attempts
        self.aws_conn_id = aws_conn_id
        self.region_name = region_name

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "spec": self.spec,
                "waiter_delay": self.waiter_delay,
                "waiter_max_attempts": self.waiter_max_attempts,
                "aws_conn_id": self.aws_conn_id,
                "region_name": self.region_name,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        spec = WaitSpec.from_dict(self.spec)
        from airflow.providers.amazon.aws.hooks.rds import RdsHook  # the triggerer's import

        hook = RdsHook(aws_conn_id=self.aws_conn_id, region_name=self.region_name)
        try:
            async with await hook.get_async_conn() as client:

                async def describe(kind: str, ident: str) -> dict[str, Any]:
                    method, arguments, results = describe_request(kind, ident)
                    found = await getattr(client, method)(**arguments)
                    return dict(found[results][0])

                for attempt in range(1, self.waiter_max_attempts + 1):
                    # the same poll as the synchronous wait (RdsBulkModeBackend.check)
                    status = await poll_async(spec, describe)
                    self.log.info(
                        "%s / %s: %s (check %d of %d)",
                        spec.target,
                        spec.groups,
                        status,
                        attempt,
                        self.waiter_max_attempts,
                    )
                    if status != "wait":
                        yield TriggerEvent({"status": status, "spec": self.spec})
                        return
                    await asyncio.sleep(self.waiter_delay)
        except Exception as exc:  # report to the operator, which fails the task with the reason
            yield TriggerEvent({"status": "error", "message": repr(exc), "spec": self.spec})
            return
        yield TriggerEvent(
            {
                "status": "timeout",
                "message": f"not in-sync after {self.waiter_max_attempts} checks",
                "spec": self.spec,
            }
        )
