"""The session: one worker per submission (:class:`Session`), reached through two pipes.

Apart from the package's command lines and limits (:mod:`course_tools.grading.sandbox`), which
import no torch: the sandboxed kernel's launcher, one per kernel of every student of a class hub,
needs those and none of this (the plain-data protocol, :mod:`.wire`, imports torch).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import select
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from course_tools.grading.sandbox import (
    Limits,
    _group_problem,
    _unsandboxed_command,
    sandbox_command,
    wire,
)
from course_tools.grading.sandbox import _cgroups as cgroups
from course_tools.grading.sandbox._fair_clock import WALL_FACTOR, FairClock
from course_tools.grading.sandbox._remote import Remote, SandboxError, _error
from lectures_lib.checks.grader import TimedOut

__all__ = ["Session", "SandboxTimedOut", "BUDGET", "EXIT_WAIT"]

EXIT_WAIT = 1.0  # seconds a worker has to exit by itself when its session closes


class SandboxTimedOut(SandboxError, TimedOut):
    """The submission's code ran past a time limit (a check reads it as ``timed_out``)."""


class Session:
    """One submission's worker: started on :meth:`start`, ended (every process) on :meth:`close`.

    ``deadline`` bounds every wait: past it, the worker is killed and :class:`SandboxError` says
    so. Time limits (``deadline``, ``call_timeout``, a check's limit for one call) are kept on the
    session's :class:`~course_tools.grading.sandbox._fair_clock.FairClock`, which does not count the time
    the sandbox waited for a CPU that a neighbour held, so a busy machine does not change a
    grade; each is also a wall-clock limit :data:`WALL_FACTOR` times as long. ``deadline`` is
    given in ``time.monotonic()`` seconds (the clocks agree when the session is made).
    """

    def __init__(self, cells: list[str], checks: Path, *, deadline: float, sandbox: bool = True,
                 limits: Limits = Limits(),  # noqa: B008 - a frozen dataclass
                 call_timeout: float = 10.0, task_key: str | None = None) -> None:
        self.cells = list(cells)
        self.task_key = task_key  # the graded task variant (checks.grader.task_key), or None
        self.checks = checks
        self.deadline = deadline
        self.sandbox = sandbox
        self.limits = limits
        self.call_timeout = call_timeout
        self.process: subprocess.Popen | None = None
        self.generation = 0
        self.ran = 0
        self.dead_reason = ""
        self.reply_deadline = deadline
        self.clock = FairClock()
        self.wall_deadline = time.monotonic() + WALL_FACTOR * max(0.0, deadline - time.monotonic())
        self._folder: tempfile.TemporaryDirectory | None = None
        self._group: cgroups.Group | None = None

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Start the worker (it runs no cell before :meth:`run_until` asks)."""
        # The job folder (0700, as mkdtemp makes it) and its spec (0600) are the grader's alone:
        # they hold a student's code and the graded task variant. The sandbox reads them as the
        # grader's user (bubblewrap maps its "nobody" to that user), no other local user can.
        self._folder = tempfile.TemporaryDirectory(prefix="lectures-job-")
        job = Path(self._folder.name)
        os.chmod(job, 0o700)
        spec = os.open(job / "spec.json", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(spec, "w", encoding="utf-8") as file:
            json.dump({"cells": self.cells, "limits": self.limits.as_spec(),
                       "task_key": self.task_key}, file)
        if self.sandbox:
            command, env = sandbox_command(job, self.checks, self.limits), {}
        else:
            command, env = _unsandboxed_command(job, self.checks)
        if _group_problem() is None:  # limits that hold for root too, on the whole sandbox
            self._group = cgroups.Group(processes=self.limits.processes,
                                        memory_bytes=self.limits.memory_bytes)
        to_worker_r, to_worker_w = os.pipe()
        from_worker_r, from_worker_w = os.pipe()
        self.process = _popen(command, env, to_worker_r, from_worker_w, self._group, job)
        os.close(to_worker_r)
        os.close(from_worker_w)
        self._out, self._in = to_worker_w, from_worker_r
        root = self.process.pid
        self.clock.watch(self._group.pids if self._group is not None
                         else FairClock.of_tree(root)._processes)
        self.generation += 1
        self.ran = 0
        self.dead_reason = ""

    def close(self) -> None:
        """End the worker and everything it started (its whole process group / namespace).

        Hanging up lets a waiting worker exit by itself (so its CPU time is accounted to the
        grader); a worker still busy after :data:`EXIT_WAIT` seconds is killed. Either way its
        process group is killed before the worker is reaped (so the group's id is still its)."""
        if self.process is not None:
            for fd in (self._out, self._in):
                try:
                    os.close(fd)
                except OSError:
                    pass
            _wait_unreaped(self.process.pid, EXIT_WAIT if not self.dead_reason else 0.0)
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.process = None
        if self._group is not None:
            self._group.close()  # whatever is left in it (nothing, normally), then the group
            self._group = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _die(self, reason: str) -> SandboxError:
        self.dead_reason = reason
        if self.process is not None:
            try:
                os.killpg(self.process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        return SandboxError(reason)

    # -- requests --------------------------------------------------------------------------
    def request(self, message: dict, timeout: float | None = None) -> dict:
        """Send one request, wait for its answer (bounded by ``timeout`` and the deadline, on the
        fair clock, and by :data:`WALL_FACTOR` times each on the wall clock)."""
        if self.process is None or self.dead_reason:
            raise SandboxError(self.dead_reason or "the submission's process is not running")
        seconds = (timeout or self.call_timeout) + 1.0
        limit = min(self.deadline, self.clock.now() + seconds)
        wall_limit = min(self.wall_deadline, time.monotonic() + WALL_FACTOR * seconds)
        self.reply_deadline = wall_limit  # decoding the reply counts in the call's time too

        def wait() -> None:
            while True:
                self.clock.tick()
                left, wall_left = limit - self.clock.now(), wall_limit - time.monotonic()
                if min(left, wall_left) <= 0:
                    over = "the submission's time limit" if limit >= self.deadline else \
                        f"the time limit of {timeout or self.call_timeout:g} s for one call"
                    if wall_left <= 0:
                        over += (f" (stopped on the wall clock, at {WALL_FACTOR:g} times the "
                                 "limit: its processes kept one another waiting for the CPU)")
                    self._die(f"the submission's code ran past {over} and was stopped")
                    raise SandboxTimedOut(self.dead_reason)
                if select.select([self._in], [], [], min(FairClock.POLL, left, wall_left))[0]:
                    return

        try:
            wire.write_frame(self._out, message)
            return wire.read_frame(self._in, wait)
        except SandboxError:
            raise
        except (EOFError, OSError):
            raise self._die("the submission's process ended (os._exit, a crash, or a limit: "
                            "memory, processes, CPU time)") from None
        except wire.WireError as error:
            raise self._die(f"the submission's process broke the protocol ({error})") from None
        except BaseException:  # a checker's time limit interrupted the wait
            self._die("stopped at a time limit while the submission's code ran")
            raise

    def run_until(self, upto: int) -> list[list]:
        """Run the submission's cells before index ``upto``; returns [[cell, error], ...]."""
        reply = self.request({"op": "run", "upto": int(upto)},
                             timeout=max(1.0, self.deadline - self.clock.now()))
        self.ran = upto
        value = self.value(reply)
        try:
            errors = json.loads(value) if isinstance(value, str) else []
        except ValueError:
            errors = []
        return [e for e in errors if isinstance(e, list) and len(e) == 2]

    def value(self, reply: dict, generation: int | None = None):
        """The data of a reply (under :data:`BUDGET` and the call's deadline), handles as
        :class:`Remote` stand-ins; the submission's error re-raised by its name."""
        if type(reply.get("raised")) is dict:
            raise _error(reply["raised"])
        if "ok" not in reply:
            raise SandboxError("the submission's process gave no value")
        budget = dataclasses.replace(BUDGET, seconds=self.reply_deadline)
        try:
            return wire.decode(reply["ok"], lambda n: Remote(self, n, generation or self.generation),
                               budget)
        except wire.WireError as error:
            raise self._die(f"the submission's answer was refused ({error})") from None

    def lookup(self, name: str):
        """The value of a global name of the submission: data, or a :class:`Remote` (a module
        too: the grader never imports, runs or looks up anything a submission names)."""
        reply = self.request({"op": "lookup", "name": name})
        if reply.get("missing") is True:
            raise NameError(f"name {name!r} is not defined in the submission")
        return self.value(reply)


# What one reply may decode to in the grader (the frame itself is at most wire.MAX_FRAME bytes).
BUDGET = wire.Budget(nodes=100_000, depth=32, elements=2**26, bytes=2**28)


def _wait_unreaped(pid: int, seconds: float) -> None:
    """Wait up to ``seconds`` for ``pid`` to exit, leaving it unreaped (a zombie)."""
    end = time.monotonic() + seconds
    while True:
        try:
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return
        except ChildProcessError:
            return
        if time.monotonic() >= end:
            return
        time.sleep(0.005)


def _popen(command: list[str], env: dict, read_fd: int, write_fd: int,
           group: cgroups.Group | None = None, cwd: Path | None = None) -> subprocess.Popen:
    """Start ``command`` with ``read_fd``/``write_fd`` as its fds 3 and 4, in its own session
    (and in ``group`` before it runs: everything it starts is counted there)."""

    def preexec() -> None:  # high copies first: read_fd or write_fd may itself be 3 or 4
        if group is not None:
            group.join()
        high_read = fcntl.fcntl(read_fd, fcntl.F_DUPFD, 10)
        high_write = fcntl.fcntl(write_fd, fcntl.F_DUPFD, 10)
        os.dup2(high_read, 3)
        os.dup2(high_write, 4)

    return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env=env, pass_fds=(3, 4), cwd=cwd,
                            preexec_fn=preexec, start_new_session=True)
