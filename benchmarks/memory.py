"""Peak memory (RSS) of benchmark processes, read from ``/proc``.

Not getrusage's ``ru_maxrss``: Linux carries that over from the parent across fork+exec, so a
child would report the data generator's peak. ``VmHWM`` is each process's own high-water mark.
"""

from __future__ import annotations

import os
import resource
import threading
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


def descendants(root: int) -> set[int]:
    """Every live process below ``root`` (children, grandchildren, ...)."""
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
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in parents.items() if ppid in frontier} - found
        found |= frontier
    return found


class ChildPeakRss:
    """Samples the largest VmHWM among this process's descendants while active (a context
    manager). VmHWM only grows, so sampling misses at most the growth after the last sample."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval = interval
        self.peak_kib = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _sample(self) -> None:
        for pid in descendants(os.getpid()):
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
