"""``import airflow_bulkload.preload`` imports the tasks' modules and nothing else happens.

It runs in the scheduler and every worker before they fork, so it must leave no thread, client
session or open connection for a forked task to inherit.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_bulkload.preload import OPTIONAL_MODULES, REQUIRED_MODULES
from tests.harness import REPO_ROOT

#: a fresh interpreter's report after ``{imports}`` (see :func:`probe`)
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
{imports}
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


def probe(imports: str) -> str:
    """PROBE's program with ``imports`` run where its placeholder stands."""
    return PROBE.replace("{imports}", imports)


def _probe() -> dict:
    done = subprocess.run(
        [sys.executable, "-c", probe("import airflow_bulkload.preload")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return _report(done)


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


def test_a_module_that_fails_is_logged_never_raised(monkeypatch, tmp_path, caplog) -> None:
    """It runs inside every Airflow process's start: a broken install must not stop the
    scheduler (the task that needs the module fails on its own import instead)."""
    import airflow_bulkload.preload as preload

    (tmp_path / "bl_preload_broken.py").write_text("raise RuntimeError('broken install')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(preload, "REQUIRED_MODULES", ("bl_preload_missing", "bl_preload_broken"))
    monkeypatch.setattr(preload, "OPTIONAL_MODULES", ("bl_preload_broken",))
    with caplog.at_level("WARNING", logger="airflow_bulkload.preload"):
        assert preload.preload() == []
    assert "bl_preload_missing was not imported" in caplog.text
    assert "importing bl_preload_broken failed" in caplog.text


#: the first import of a process on a machine whose Airflow home has the preload line
FIRST_IMPORTS = [
    "from airflow_bulkload.pipeline import bulk_load_table",  # a DAG file run as a script
    "import airflow_bulkload.catalog",
    "import airflow_bulkload.exceptions",
    "import airflow_bulkload.operators",
    "from airflow_bulkload.assets import create_asset",
]


@pytest.fixture(scope="module")
def preloading_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("preloading-airflow-home")
    (home / "config").mkdir()
    (home / "config" / "airflow_local_settings.py").write_text(
        "import airflow_bulkload.preload  # noqa: F401\n"
    )
    return home


@pytest.mark.parametrize("statement", FIRST_IMPORTS)
def test_a_process_whose_first_import_is_the_provider_starts_with_the_preload_line(
    statement: str, preloading_home: Path
) -> None:
    """Found by the hostile round: Airflow imports its local settings inside the first ``import
    airflow``; when the provider's own module made that import (``python my_dag.py``, a test
    importing an operator first), the preload re-entered the half-imported package and the
    process died with a circular ImportError."""
    done = _run_in(preloading_home, f"{statement}\nimport airflow  # initialised by now\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "airflow_bulkload.preload" in _report(done)["modules"]  # the local settings ran


def test_airflow_s_own_start_preloads_every_required_module_and_nothing_more(
    preloading_home: Path,
) -> None:
    """The path deployments take: Airflow's first ``import airflow`` runs the local settings,
    which import every required module, without a warning, a thread or a socket."""
    done = _run_in(preloading_home, "import airflow\n")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "airflow_bulkload.preload:" not in done.stderr
    seen = _report(done)
    assert set(REQUIRED_MODULES) <= set(seen["modules"])
    assert seen["os_threads"] == 1
    assert seen["new_sockets"] == []


def _run_in(airflow_home: Path, statements: str) -> subprocess.CompletedProcess[str]:
    """``statements`` in a fresh interpreter on ``airflow_home``, then the PROBE's report."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env |= {
        "AIRFLOW_HOME": str(airflow_home),
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "PYTHONPATH": str(REPO_ROOT),
    }
    return subprocess.run(
        [sys.executable, "-c", probe(statements)],
        env=env,
        cwd=airflow_home,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def _report(done: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(done.stdout.strip().splitlines()[-1])
