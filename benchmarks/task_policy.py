"""Cluster policy of the benchmark's Airflow home: each task instance gets a temp dir of its own.

``benchmarks/cluster.py`` writes an ``airflow_local_settings.py`` that imports :func:`task_policy`.
When ``BULKLOAD_BENCH_TASK_TMP`` is set, every task, just before it executes, points ``TMPDIR``
(and Python's ``tempfile``) at ``<that dir>/<task_id>.<map_index>.<try_number>``, so the
benchmark can measure each task's temp disk by the size of its directory. Where a task writes its
temp files is all that changes.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

TASK_TMP = "BULKLOAD_BENCH_TASK_TMP"


def task_temp_dir(root: str, task_id: str, map_index: int, try_number: int) -> str:
    return os.path.join(root, f"{task_id}.{map_index}.{try_number}")


def use_own_temp_dir(context: Any) -> None:
    """``on_execute_callback``: this task's temp files go to its own directory."""
    root = os.environ.get(TASK_TMP)
    if not root:
        return
    ti = context["ti"]
    path = task_temp_dir(root, ti.task_id, ti.map_index, ti.try_number)
    os.makedirs(path, exist_ok=True)
    os.environ["TMPDIR"] = path
    tempfile.tempdir = path


def task_policy(task: Any) -> None:
    """Airflow cluster policy: add :func:`use_own_temp_dir` before the task's own callbacks."""
    existing = task.on_execute_callback
    callbacks = list(existing) if isinstance(existing, list) else [existing] if existing else []
    task.on_execute_callback = [use_own_temp_dir, *callbacks]
