"""Wait in the triggerer, not a worker slot, for a table's claim or one of its load slots.

A load that must wait for another (the table claimed by another load, every load slot taken)
defers to one of these triggers. Each poll is one short session through the same hook and
dialect methods the synchronous wait uses, run in a thread (the hooks are synchronous); the
triggers hold no lock between polls.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_bulkload.exceptions import TableClaimedError

MIN_POLL_INTERVAL = 0.2


class _DatabaseWaitTrigger(BaseTrigger):
    """Poll a check every ``poll_interval`` seconds until it passes or ``deadline`` (epoch s)."""

    def __init__(
        self, *, conn_id: str, table: str, deadline: float, poll_interval: float = 5.0
    ) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.table = table
        self.deadline = deadline
        # never a busy loop on the database, whatever the task was given
        self.poll_interval = max(float(poll_interval), MIN_POLL_INTERVAL)

    def _arguments(self) -> dict[str, Any]:
        return {
            "conn_id": self.conn_id,
            "table": self.table,
            "deadline": self.deadline,
            "poll_interval": self.poll_interval,
        }

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return f"{type(self).__module__}.{type(self).__qualname__}", self._arguments()

    def check(self) -> str | None:
        """``None`` when the wait is over, else what still blocks it (run in a thread)."""
        raise NotImplementedError

    async def run(self) -> AsyncIterator[TriggerEvent]:
        blocker = "not checked"
        while True:
            try:
                # a thread of its own: one slow database never stalls the triggerer's others
                blocker = await sync_to_async(self.check, thread_sensitive=False)() or ""
            except Exception as exc:  # the operator fails the task with the reason
                yield TriggerEvent({"status": "error", "message": repr(exc)})
                return
            if not blocker:
                yield TriggerEvent({"status": "done", "deadline": self.deadline})
                return
            left = self.deadline - time.time()
            if left <= 0:
                yield TriggerEvent({"status": "timeout", "message": blocker})
                return
            self.log.info(
                "%s: %s; checking again in %.0f s", self.table, blocker, self.poll_interval
            )
            await asyncio.sleep(min(self.poll_interval, left))


class LoadSlotFreeTrigger(_DatabaseWaitTrigger):
    """Fire when one of ``table``'s ``slots`` load slots is free (see ``max_concurrent_loads``).

    The slot is not kept: the resumed load takes one for real and defers again if another load
    took it first.

    :param conn_id: the target's ``postgres`` or ``mysql`` connection.
    :param table: the target table.
    :param slots: the table's number of load slots.
    :param deadline: when to give up (epoch seconds); event ``timeout``.
    :param poll_interval: seconds between checks.
    """

    def __init__(
        self,
        *,
        conn_id: str,
        table: str,
        slots: int,
        deadline: float,
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__(
            conn_id=conn_id, table=table, deadline=deadline, poll_interval=poll_interval
        )
        self.slots = slots

    def _arguments(self) -> dict[str, Any]:
        return super()._arguments() | {"slots": self.slots}

    def check(self) -> str | None:
        from airflow_bulkload.hooks.bulk_load import BulkLoadHook

        if BulkLoadHook(conn_id=self.conn_id).load_slot_free(self.table, self.slots):
            return None
        return f"all {self.slots} load slots are busy"


class TableClaimTrigger(_DatabaseWaitTrigger):
    """Take ``table``'s claim for ``load_id`` as soon as the load holding it lets go.

    The claim is a durable row, so the trigger takes it (the resumed task takes it again as its
    own, which is idempotent for the same load id) and no other waiting load can slip in between.

    :param conn_id: the target's ``postgres`` or ``mysql`` connection.
    :param table: the target table.
    :param load_id: the load the claim is for.
    :param deadline: when to give up (epoch seconds); event ``timeout`` names the holder.
    :param poll_interval: seconds between checks.
    """

    def __init__(
        self,
        *,
        conn_id: str,
        table: str,
        load_id: str,
        deadline: float,
        poll_interval: float = 5.0,
    ) -> None:
        super().__init__(
            conn_id=conn_id, table=table, deadline=deadline, poll_interval=poll_interval
        )
        self.load_id = load_id

    def _arguments(self) -> dict[str, Any]:
        return super()._arguments() | {"load_id": self.load_id}

    def check(self) -> str | None:
        from airflow_bulkload.hooks.table_state import TableStateHook

        try:
            TableStateHook(conn_id=self.conn_id).claim(self.table, load_id=self.load_id)
        except TableClaimedError as exc:
            return str(exc)
        return None
