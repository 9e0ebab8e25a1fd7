"""Peak memory (RSS) of benchmark processes, read from ``/proc``.

Not getrusage's ``ru_maxrss``: Linux carries that over from the parent across fork+exec, so a
child would report the data generator's peak. ``VmHWM`` is each process's own high-water mark.
"""

from __future__ import annotations

import os
import resource
import threading
from collections.abc import Callable, Collection
from pathlib import Path


def peak_rss_kib(pid: int | str = "self") -> int:
    """The RSS high-water mark (VmHWM) of ``pid`` in KiB; 0 if it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss if pid == "self" else 0


def parent_pids() -> dict[int, int]:
    """pid -> parent pid of every live process."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields start after the last ')'
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return parents


def descendants(root: int, parents: dict[int, int] | None = None) -> set[int]:
    """Every live process below ``root`` (children, grandchildren, ...)."""
    parents = parent_pids() if parents is None else parents
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


class ChildPeakRss:
    """Samples the largest VmHWM among this process's descendants while active (a context
    manager). VmHWM only grows, so sampling misses at most the growth after the last sample.

    ``exclude()`` names processes that serve every case (the S3 server, Airflow's services): they
    and their descendants are not sampled."""

    def __init__(
        self, interval: float = 0.2, exclude: Callable[[], Collection[int]] = frozenset
    ) -> None:
        self.interval = interval
        self.exclude = exclude
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        parents = parent_pids()
        skipped = set(self.exclude())
        for root in list(skipped):
            skipped |= descendants(root, parents)
        for pid in descendants(os.getpid(), parents) - skipped:
            self.peak_kib = max(self.peak_kib, peak_rss_kib(pid))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def __enter__(self) -> ChildPeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float | None:
        """None when no child lived long enough to be sampled."""
        return round(self.peak_kib / 1024, 1) if self.peak_kib else None
