"""A clock a neighbour cannot speed up: wall-clock time less the time the sandbox waited for a CPU.

A time limit in wall-clock seconds changes a grade when the machine is busy: beside a CPU hog a
correct submission gets half a core and runs past its limit. A limit in CPU seconds alone never
stops code that sleeps. :class:`FairClock` counts what the submission would have had on an idle
machine: the seconds that passed, minus the seconds its processes were ready to run but waited
for a CPU the kernel gave to someone else (the second field of ``/proc/PID/schedstat``, the
run-queue delay, which Linux keeps for every task). Sleeping, waiting for a pipe or computing all
count; only waiting behind a neighbour does not.

Code that hogs the CPU among its *own* processes also waits, so it also gets more wall time; the
session bounds that with a wall-clock backstop (:data:`WALL_FACTOR` times the limit). Where
``schedstat`` cannot be read (not Linux, a kernel without ``CONFIG_SCHED_INFO``) the clock is
the wall clock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["FairClock", "WALL_FACTOR", "run_delay"]

# A limit of t fair seconds is also a wall-clock limit of WALL_FACTOR * t (code that competes
# with its own processes for the CPU would otherwise wait without end).
WALL_FACTOR = 4.0


def run_delay(pid: int) -> float | None:
    """Seconds the main thread of ``pid`` has waited, ready to run, for a CPU; None if unknown."""
    try:
        fields = Path(f"/proc/{pid}/schedstat").read_text().split()
        return int(fields[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it (from the parents in ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [root]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            parent = int(stat[stat.rindex(")") + 2:].split()[1])  # after "(comm) state"
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(parent, []).append(int(entry))
    found, stack = [], [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack += children.get(pid, [])
    return found


class FairClock:
    """``now()``: monotonic seconds less what the watched processes waited for a CPU.

    ``processes()`` names the processes to watch (a sandbox's cgroup, or a process and its
    descendants: :meth:`of_tree`). :meth:`tick` reads their run-queue delays and adds the
    largest growth of one since the last tick (never more than the wall time between ticks): call it while the watched code runs (the session
    calls it every :data:`POLL` seconds while it waits for an answer).
    """

    POLL = 0.05

    def __init__(self, processes: Callable[[], list[int]] | None = None) -> None:
        self._processes = processes
        self._seen: dict[int, float] = {}
        self.waited = 0.0

    @classmethod
    def of_tree(cls, root: int) -> FairClock:
        return cls(lambda: _descendants(root))

    def watch(self, processes: Callable[[], list[int]] | None) -> None:
        """Watch other processes from now on (a restarted sandbox); what was waited stays."""
        self._processes, self._seen = processes, {}

    def tick(self) -> None:
        """Add the longest wait for a CPU of any watched process since the last tick (a process
        seen for the first time counts from now: its wait before was not the submission's)."""
        if self._processes is None:
            return
        grown = 0.0
        for pid in self._processes():
            delay = run_delay(pid)
            if delay is None:
                continue
            grown = max(grown, delay - self._seen.get(pid, delay))
            self._seen[pid] = delay
        self.waited += grown

    def now(self) -> float:
        return time.monotonic() - self.waited
