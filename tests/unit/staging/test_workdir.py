from __future__ import annotations

import json
import os
import time
from pathlib import Path

from airflow_bulkload.staging.workdir import (
    OWNER_FILE,
    UNOWNED_GRACE_SECONDS,
    WORK_ROOT_NAME,
    owner_is_alive,
    process_start_time,
    remove_abandoned,
    staging_workdir,
)


def test_a_process_is_known_by_pid_and_start_time() -> None:
    me = {"pid": os.getpid(), "started": process_start_time(os.getpid())}
    assert owner_is_alive(me)
    assert not owner_is_alive(me | {"started": "1"})  # the pid was reused by another process
    assert not owner_is_alive({"pid": 2**22 + 12345, "started": "1"})  # no such process
    assert not owner_is_alive({})


def test_the_workdir_is_removed_when_staging_ends_even_on_error(tmp_path: Path) -> None:
    try:
        with staging_workdir(tmp_path, "dag/stage/run/-1") as work:
            (work / "normalized.csv").write_text("x")
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert list((tmp_path / WORK_ROOT_NAME).iterdir()) == []


def test_only_dead_owners_directories_are_removed(tmp_path: Path) -> None:
    root = tmp_path / WORK_ROOT_NAME
    live, dead, unowned = root / "live", root / "dead", root / "unowned"
    for path in (live, dead, unowned):
        path.mkdir(parents=True)
    me = os.getpid()
    (live / OWNER_FILE).write_text(json.dumps({"pid": me, "started": process_start_time(me)}))
    (dead / OWNER_FILE).write_text(json.dumps({"pid": me, "started": "not-its-start-time"}))

    later = time.time() + UNOWNED_GRACE_SECONDS + 1
    assert sorted(p.name for p in remove_abandoned(root, now=later)) == ["dead", "unowned"]
    assert [p.name for p in root.iterdir()] == ["live"]


def test_a_directory_just_made_by_a_sibling_attempt_is_left_alone(tmp_path: Path) -> None:
    """A sibling task on the same worker between mkdir and writing its owner file (or half way
    through writing it) is not a killed attempt."""
    root = tmp_path / WORK_ROOT_NAME
    (root / "being-created").mkdir(parents=True)
    (root / "half-written").mkdir()
    (root / "half-written" / OWNER_FILE).write_text('{"pid": 1')
    (root / "dead").mkdir()
    (root / "dead" / OWNER_FILE).write_text(json.dumps({"pid": 1, "started": "not-its-start"}))

    assert [p.name for p in remove_abandoned(root)] == ["dead"]
    assert sorted(p.name for p in root.iterdir()) == ["being-created", "half-written"]
