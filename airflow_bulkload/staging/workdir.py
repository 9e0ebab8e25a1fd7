"""Staging's local working directories.

One per staging attempt, removed by the next attempt when a kill -9 left it behind.

A staging attempt writes downloads, the normalized input and chunks under
``<temp root>/bulkload-staging/<owner>-<pid>-<token>/`` and removes it when it ends. A killed
attempt cannot; its directory records the process that owns it (pid and the kernel's start time
of that process), and every later staging call on the worker removes the directories whose owner
is gone, so a long-lived worker's disk does not fill with dead attempts' files. A live sibling's
directory (another staging task running on the same worker) is never touched.
"""

from __future__ import annotations

import json
import logging
import os
import re
import secrets
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

log = logging.getLogger(__name__)

WORK_ROOT_NAME = "bulkload-staging"
OWNER_FILE = "owner.json"
#: a directory without a readable owner file is left alone this long: its attempt may be
#: between creating it and writing the file (a sibling task on the same worker)
UNOWNED_GRACE_SECONDS = 60.0


def process_start_time(pid: int) -> str | None:
    """The kernel's start time of ``pid`` (``/proc/<pid>/stat`` field 22).

    ``None`` when there is no such process; ``""`` where ``/proc`` is not available but the
    process exists. With the pid, it names a process uniquely: a reused pid has another start
    time.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return ""
        return ""
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses: split after its last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else ""


def owner_is_alive(owner: dict[str, object]) -> bool:
    pid = owner.get("pid")
    if not isinstance(pid, int):
        return False
    started = process_start_time(pid)
    return started is not None and (started == "" or started == owner.get("started"))


def remove_abandoned(root: Path, *, now: float | None = None) -> list[Path]:
    """Remove the work directories under ``root`` whose owning process is gone; returns them.

    A directory with no readable owner file was left by an attempt killed before it wrote one,
    or belongs to an attempt writing it right now: it is removed once it is older than
    :data:`UNOWNED_GRACE_SECONDS`.
    """
    removed: list[Path] = []
    if not root.is_dir():
        return removed
    now = time.time() if now is None else now
    for child in root.iterdir():
        if not child.is_dir():
            continue
        try:
            owner = json.loads((child / OWNER_FILE).read_text())
        except (OSError, ValueError):
            owner = None
        if not isinstance(owner, dict):
            try:
                if now - child.stat().st_mtime < UNOWNED_GRACE_SECONDS:
                    continue
            except OSError:
                continue  # its attempt ended and removed it meanwhile
            owner = {}
        elif owner_is_alive(owner):
            continue
        shutil.rmtree(child, ignore_errors=True)
        removed.append(child)
        log.warning(
            "removed %s, left by a staging attempt that was killed (%s)",
            child,
            owner.get("owner", "owner unknown") if isinstance(owner, dict) else "owner unknown",
        )
    return removed


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:80] or "staging"


@contextmanager
def staging_workdir(temp_root: Path, owner: str) -> Iterator[Path]:
    """A fresh working directory for one staging attempt, removed when the block ends.

    First removes what killed attempts left under the same root.
    """
    root = temp_root / WORK_ROOT_NAME
    root.mkdir(parents=True, exist_ok=True)
    remove_abandoned(root)
    pid = os.getpid()
    path = root / f"{_safe(owner)}-{pid}-{secrets.token_hex(4)}"
    path.mkdir()
    # written whole, then renamed: a sibling attempt never reads half an owner file
    partial = path / f".{OWNER_FILE}.partial"
    partial.write_text(json.dumps({"pid": pid, "started": process_start_time(pid), "owner": owner}))
    partial.rename(path / OWNER_FILE)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
