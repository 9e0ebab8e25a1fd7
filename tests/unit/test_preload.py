"""``import airflow_bulkload.preload`` imports the tasks' modules and nothing else happens.

It runs in the scheduler and every worker before they fork, so it must leave no thread, client
session or open connection for a forked task to inherit.
"""

from __future__ import annotations

import json
import subprocess
import sys

from airflow_bulkload.preload import OPTIONAL_MODULES, REQUIRED_MODULES

PROBE = """
import json, os, sys, threading

def open_files():
    found = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:  # the listing's own descriptor, closed by now
            pass
    return found

before = open_files()
import airflow_bulkload.preload
import boto3
after = open_files()
print(json.dumps({
    "threads": threading.active_count(),
    "os_threads": len(os.listdir("/proc/self/task")),
    "boto3_default_session": boto3.DEFAULT_SESSION is not None,
    "new_sockets": sorted(fd for fd in after - before if fd.startswith("socket:")),
    "modules": sorted(sys.modules),
}))
"""


def _probe() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_preload_imports_the_tasks_modules_and_opens_nothing() -> None:
    seen = _probe()
    modules = set(seen["modules"])
    assert set(REQUIRED_MODULES) <= modules
    # installed here (the dev environment has the MySQL client, DuckDB and OpenLineage)
    assert {"MySQLdb", "airflow_bulkload.dialects.mysql", "duckdb"} <= modules
    assert seen["threads"] == 1
    assert seen["os_threads"] == 1
    assert not seen["boto3_default_session"]
    assert seen["new_sockets"] == []


def test_an_optional_module_that_is_missing_is_skipped(monkeypatch) -> None:
    import airflow_bulkload.preload as preload

    monkeypatch.setattr(preload, "OPTIONAL_MODULES", ("airflow_bulkload_no_such_module",))
    assert "airflow_bulkload_no_such_module" not in preload.preload()
    assert set(REQUIRED_MODULES) <= set(preload.preload())
    assert OPTIONAL_MODULES  # the real list is not empty
