"""Kill -9 at a chosen point of a DAG run, for the restartability tests.

Installed as the cluster policy of the test Airflow home (``airflow_local_settings.py`` imports
:func:`task_policy`), so the example DAGs run unchanged. It does nothing unless the run's
environment names a kill point:

``BULKLOAD_TEST_KILL_BEFORE=task_id``, ``task_id[map_index]`` or ``task_id#n``
    SIGKILL the whole ``airflow dags test`` process group as that task starts: everything before
    it has finished, nothing of it has run.
``BULKLOAD_TEST_KILL_DURING=task_id`` with ``BULKLOAD_TEST_KILL_WHEN_SQL=<query>``
    as that task starts, watch the target database from a thread and SIGKILL the group as soon as
    the query returns true (e.g. "a first index has been rebuilt").
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import closing
from typing import Any

KILL_BEFORE = "BULKLOAD_TEST_KILL_BEFORE"
KILL_DURING = "BULKLOAD_TEST_KILL_DURING"
KILL_WHEN_SQL = "BULKLOAD_TEST_KILL_WHEN_SQL"


def kill_run() -> None:
    """SIGKILL this process's group: the CLI process and any task processes it started."""
    os.killpg(os.getpgid(0), signal.SIGKILL)


#: task instances of each kill-point task started so far in this process (``dags test`` runs
#: them all in its own process, in an order of its choosing)
_started: dict[str, int] = {}


def _matches(point: str, ti: Any) -> bool:
    """``task_id`` (any instance), ``task_id[i]`` (map index i) or ``task_id#n`` (the n-th
    instance to start, counting from 0, whatever its map index)."""
    if "#" in point:
        task_id, _, nth = point.partition("#")
        if not ti.task_id.endswith(task_id):
            return False
        seen = _started.get(task_id, 0)
        _started[task_id] = seen + 1
        return seen == int(nth)
    task_id, _, index = point.partition("[")
    if not ti.task_id.endswith(task_id):
        return False
    return not index or int(index.rstrip("]")) == getattr(ti, "map_index", -1)


def _kill_before(context: Any) -> None:
    if _matches(os.environ[KILL_BEFORE], context["ti"]):
        kill_run()


def _kill_during(context: Any) -> None:
    if not _matches(os.environ[KILL_DURING], context["ti"]):
        return
    from airflow_bulkload.hooks.bulk_load import BulkLoadHook

    conn_id = context["task"].conn_id
    query = os.environ[KILL_WHEN_SQL]

    def watch() -> None:
        with closing(BulkLoadHook(conn_id=conn_id).get_conn()) as conn:
            if callable(conn.autocommit):  # MySQLdb
                conn.autocommit(True)
            else:  # psycopg
                conn.autocommit = True
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                cur = conn.cursor()
                cur.execute(query)
                row = cur.fetchone()
                cur.close()
                if row and row[0]:
                    kill_run()
                time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()


def task_policy(task: Any) -> None:
    """Airflow cluster policy: add the kill callback the environment asks for."""
    if os.environ.get(KILL_BEFORE):
        callback = _kill_before
    elif os.environ.get(KILL_DURING):
        callback = _kill_during
    else:
        return
    existing = task.on_execute_callback
    callbacks = list(existing) if isinstance(existing, list) else [existing] if existing else []
    task.on_execute_callback = [callback, *callbacks]
