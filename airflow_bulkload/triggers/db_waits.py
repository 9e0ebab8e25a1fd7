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
from typing import Any, ClassVar, NotRequired, TypedDict, Unpack

from airflow.triggers.base import BaseTrigger, TriggerEvent
from asgiref.sync import sync_to_async

from airflow_bulkload.exceptions import TableClaimedError

MIN_POLL_INTERVAL = 0.2


class WaitArguments(TypedDict):
    """What every database wait takes: the connection, the table, the deadline, the interval."""

    conn_id: str
    table: str
    #: when to give up (epoch seconds)
    deadline: float
    #: seconds between checks (default 5)
    poll_interval: NotRequired[float]


class _DatabaseWaitTrigger(BaseTrigger):
    """Poll a check every ``poll_interval`` seconds until it passes or ``deadline`` (epoch s).

    Every wait takes :class:`WaitArguments`: ``conn_id`` (the target's ``postgres`` or ``mysql``
    connection), ``table`` (the target table), ``deadline`` (when to give up, epoch seconds: event
    ``timeout``) and ``poll_interval`` (seconds between checks).
    """

    #: the attributes :meth:`serialize` hands the triggerer, to build the trigger again
    arguments: ClassVar[tuple[str, ...]] = ("conn_id", "table", "deadline", "poll_interval")

    def __init__(
        self, *, conn_id: str, table: str, deadline: float, poll_interval: float = 5.0
    ) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.table = table
        self.deadline = deadline
        # never a busy loop on the database, whatever the task was given
        self.poll_interval = max(float(poll_interval), MIN_POLL_INTERVAL)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        arguments = {name: getattr(self, name) for name in self.arguments}
        return f"{type(self).__module__}.{type(self).__qualname__}", arguments

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

    :param slots: the table's number of load slots; the rest are :class:`WaitArguments`.
    """

    arguments = (*_DatabaseWaitTrigger.arguments, "slots")

    def __init__(self, *, slots: int, **wait: Unpack[WaitArguments]) -> None:
        super().__init__(**wait)
        self.slots = slots

    def check(self) -> str | None:
        from airflow_bulkload.hooks.bulk_load import BulkLoadHook

        if BulkLoadHook(conn_id=self.conn_id).load_slot_free(self.table, self.slots):
            return None
        return f"all {self.slots} load slots are busy"


class TableClaimTrigger(_DatabaseWaitTrigger):
    """Take ``table``'s claim for ``load_id`` as soon as the load holding it lets go.

    The claim is a durable row, so the trigger takes it (the resumed task takes it again as its
    own, which is idempotent for the same load id) and no other waiting load can slip in between.

    :param load_id: the load the claim is for; the rest are :class:`WaitArguments` (the event
        ``timeout`` names the holder).
    """

    arguments = (*_DatabaseWaitTrigger.arguments, "load_id")

    def __init__(self, *, load_id: str, **wait: Unpack[WaitArguments]) -> None:
        super().__init__(**wait)
        self.load_id = load_id

    def check(self) -> str | None:
        from airflow_bulkload.hooks.table_state import TableStateHook

        try:
            TableStateHook(conn_id=self.conn_id).claim(self.table, load_id=self.load_id)
        except TableClaimedError as exc:
            return str(exc)
        return None
