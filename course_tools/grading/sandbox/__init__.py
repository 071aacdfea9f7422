"""Where a submission runs for the grade command: a sandboxed process, reached by plain data.

:class:`Session` starts :mod:`course_tools.grading.sandbox.worker` for one submission and talks to it
through two pipes; :class:`Remote` is the grader's stand-in for an object of the submission (its
function, its trained model): calling it sends the arguments across and brings back the answer
as data (:mod:`course_tools.grading.sandbox.wire`). The course's checker runs in the grader with that
stand-in, so the verdict, the reference answers and the hidden probes never enter the
submission's process.

The sandbox (:func:`sandbox_command`) is Debian's ``bubblewrap`` (``bwrap``, what Flatpak uses):
new user, PID, network, IPC and UTS namespaces (no network at all), an unprivileged user
(nobody), only the Python installation and a read-only view of ``lectures_lib`` whose
``checks`` package is a stand-in without checkers, references or probes (:func:`student_checks`),
a private scratch folder in memory as the working directory, an empty environment, and
``--die-with-parent`` in a PID namespace: when the session ends or is killed, every process the
submission started ends with it. Every writable mount has a size (``/scratch`` and ``/tmp``
:attr:`Limits.scratch_bytes` each, ``/dev/shm`` :attr:`Limits.shm_bytes`); ``/``, ``/course``
and ``/dev`` are read-only. The worker sets hard limits on memory, processes, file size, CPU time
and open files before the first student line runs, and where the grader may make a cgroup
(:mod:`course_tools.grading.sandbox._cgroups`) the whole sandbox runs in one of its own, whose
``pids.max`` and memory limit hold for root too (the kernel does not apply ``RLIMIT_NPROC`` to
root). Run as root where no cgroup can be made, :func:`sandbox_problem` refuses (unless
``allow_root_without_cgroup``: then nothing limits the number of processes). Without bubblewrap (or where user
namespaces are disabled) :func:`sandbox_problem` says why and the grade command refuses, unless
the instructor passes ``--no-sandbox`` (then the limits and the process boundary remain, the
isolation does not).

Its parts: :mod:`~course_tools.grading.sandbox._remote` (the stand-ins and the errors that cross back),
:mod:`~course_tools.grading.sandbox._student_view` (the sandbox's ``checks``), :mod:`~course_tools.
grading.sandbox._cgroups` (the per-sandbox cgroup); this module holds the command lines, the limits and
the session.
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from course_tools.grading.sandbox import _cgroups as cgroups
from course_tools.grading.sandbox import wire
from course_tools.grading.sandbox._fair_clock import WALL_FACTOR, FairClock
from course_tools.grading.sandbox._remote import Remote, RemoteError, SandboxError, _error
from course_tools.grading.sandbox._student_view import LIBRARY, TOOLS, student_checks
from lectures_lib.checks.grader import TimedOut

__all__ = ["Limits", "SandboxError", "Session", "Remote", "RemoteError", "sandbox_problem",
           "sandbox_command", "student_checks"]

EXIT_WAIT = 1.0  # seconds a worker has to exit by itself when its session closes


@dataclass(frozen=True)
class Limits:
    """Per-submission limits. The worker makes them hard rlimits before any student code;
    ``processes`` and ``memory_bytes`` are also the sandbox's cgroup's ``pids.max`` and memory
    limit, where one can be made (``RLIMIT_NPROC`` alone does not hold for root)."""

    memory_bytes: int = 6 * 2**30  # address space: torch reserves some, a 2 GiB tensor is fine
    processes: int = 64  # threads count too
    file_bytes: int = 64 * 2**20
    cpu_seconds: int = 600
    open_files: int = 256
    scratch_bytes: int = 256 * 2**20  # /scratch and /tmp, each (tmpfs: counted in memory)
    shm_bytes: int = 64 * 2**20  # /dev/shm

    def as_spec(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "processes": self.processes,
                "file_bytes": self.file_bytes, "cpu_seconds": self.cpu_seconds,
                "open_files": self.open_files}










# --------------------------------------------------------------------------------------------
# The sandbox
# --------------------------------------------------------------------------------------------


def _bwrap() -> str | None:
    return shutil.which("bwrap")


_GROUPS: dict[str, str | None] = {}


def _group_problem() -> str | None:
    """:func:`cgroups.group_problem`, asked once per process."""
    if "problem" not in _GROUPS:
        _GROUPS["problem"] = cgroups.group_problem()
    return _GROUPS["problem"]


def limits_problem(allow_root_without_cgroup: bool = False) -> str | None:
    """``None`` when the sandbox's limits hold here, else why they do not.

    Only a cgroup bounds a sandbox as a whole: its processes (the kernel ignores
    ``RLIMIT_NPROC`` for root, and for others it counts the user's processes, not the
    sandbox's) and its memory (``RLIMIT_AS`` is per process: a cell that forks holds a multiple
    of it). So a sandbox needs a group of its own, or runs inside a student's group that root
    made (the class hub's kernels: :func:`cgroups.in_student_group`); otherwise it is refused,
    for every user, unless ``allow_root_without_cgroup`` (``--unbounded-without-cgroup``)."""
    problem = _group_problem()
    if problem is None or allow_root_without_cgroup or cgroups.in_student_group():
        return None
    return ("only a cgroup bounds a sandbox's processes and memory as a whole, and none can be "
            f"made here ({problem}). Give the grader a writable cgroup (as root: cgroup v1 pids "
            "and memory, or a cgroup v2 delegating them; unprivileged: a delegated cgroup v2, "
            "e.g. `systemd-run --user --scope -p Delegate=yes`), or pass "
            "--unbounded-without-cgroup (allow_root_without_cgroup=True) to grade with no "
            "bound on a submission's processes and total memory")


def sandbox_problem(allow_root_without_cgroup: bool = False) -> str | None:
    """``None`` when bubblewrap can start a sandbox here whose limits hold, else the reason."""
    if not sys.platform.startswith("linux"):
        return f"the sandbox needs Linux (bubblewrap); this is {sys.platform}"
    bwrap = _bwrap()
    if bwrap is None:
        return ("bubblewrap is not installed (Debian/Ubuntu: `apt-get install bubblewrap`; "
                "Fedora: `dnf install bubblewrap`)")
    probe = subprocess.run(
        [bwrap, "--unshare-all", "--die-with-parent", "--uid", "65534", "--gid", "65534",
         "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "true"],
        capture_output=True, text=True, timeout=30,
    )
    if probe.returncode != 0:
        return ("bubblewrap cannot create a sandbox here (user namespaces disabled? "
                f"`{probe.stderr.strip()[:200]}`)")
    return limits_problem(allow_root_without_cgroup)


def _python_roots() -> list[Path]:
    """Folders the sandbox needs to run this Python and its packages (read-only)."""
    roots = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(),
             Path(sys.executable).resolve().parent.parent}
    for path in sys.path:
        if path and ("site-packages" in path or "dist-packages" in path) and Path(path).is_dir():
            roots.add(Path(path).resolve())
    return sorted(roots)


def _base_command(limits: Limits) -> list[str]:
    """What every sandbox of the course shares (the graders' workers and nbgrader's kernels): new
    namespaces, user nobody, an empty environment, read-only system and Python folders, private
    size-limited ``/tmp`` and ``/scratch``, and the library read-only at ``/course/lectures_lib``,
    the tools (the worker, the kernel's inner side) at ``/course/course_tools`` (the grader's
    installed copies hidden where they lie below a bound folder)."""
    command = [
        _bwrap() or "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
        "--uid", "65534", "--gid", "65534", "--hostname", "sandbox", "--clearenv",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64",
        "/lib64", "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
        "--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache",
        "--ro-bind-try", "/etc/alternatives", "/etc/alternatives",
        # fontconfig's configuration and cache: without them every plot's first font lookup
        # prints "Fontconfig error: Cannot load default config file" in the student's notebook
        "--ro-bind-try", "/etc/fonts", "/etc/fonts",
        "--ro-bind-try", "/var/cache/fontconfig", "/var/cache/fontconfig",
        "--proc", "/proc", "--dev", "/dev",
        "--size", str(limits.shm_bytes), "--tmpfs", "/dev/shm",
        "--size", str(limits.scratch_bytes), "--tmpfs", "/tmp",
        "--size", str(limits.scratch_bytes), "--tmpfs", "/scratch",
    ]
    for root in _python_roots():
        if not str(root).startswith("/usr/"):
            command += ["--ro-bind", str(root), str(root)]
    # The grader's own copy of the library (with the real checkers) is hidden wherever it lives
    # below a bound folder (an installed, non-editable package in site-packages).
    for root in _python_roots():
        for package in (LIBRARY, TOOLS):
            if package.is_relative_to(root):
                command += ["--size", "4096", "--tmpfs", str(package), "--remount-ro", str(package)]
    return command + ["--ro-bind", str(LIBRARY), "/course/lectures_lib",
                      "--ro-bind", str(TOOLS), "/course/course_tools"]


def seal() -> list[str]:
    """The last mount options of every sandbox: ``/`` (bubblewrap's own tmpfs, which has no
    size: ``/course`` and every mount point lie on it) and ``/dev`` read-only. Only the sized
    mounts stay writable (``/tmp``, ``/scratch``, ``/dev/shm``)."""
    return ["--remount-ro", "/dev", "--remount-ro", "/"]


def sandbox_command(job: Path, checks: Path, limits: Limits) -> list[str]:
    """The ``bwrap`` command line that runs the worker of ``job`` (its folder, read-only)."""
    command = _base_command(limits) + [
        "--tmpfs", "/course/lectures_lib/checks", "--ro-bind", str(checks),
        "/course/lectures_lib/checks",
        "--ro-bind", str(job), "/job",
        "--chdir", "/scratch",
        "--setenv", "PYTHONPATH", "/course", "--setenv", "HOME", "/scratch",
        "--setenv", "TMPDIR", "/tmp", "--setenv", "MPLBACKEND", "Agg",
        "--setenv", "MPLCONFIGDIR", "/tmp", "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        "--setenv", "OMP_NUM_THREADS", "1", "--setenv", "PATH", "/usr/bin:/bin",
        *seal(),
        "--", str(_python()), "-m", "course_tools.grading.sandbox.worker", "/job/spec.json",
    ]
    return command


def _python() -> Path:
    """This Python by a path without links outside the bound folders (a venv's own bin/)."""
    venv = Path(sys.prefix).resolve() / "bin" / Path(sys.executable).name
    return venv if venv.exists() else Path(sys.executable).resolve()


def _unsandboxed_command(job: Path, checks: Path) -> tuple[list[str], dict]:
    """The worker without a sandbox (``--no-sandbox``): a separate process with the limits."""
    course = job / "course"
    (course / "lectures_lib").mkdir(parents=True, exist_ok=True)
    for item in LIBRARY.iterdir():
        target = course / "lectures_lib" / item.name
        if item.name == "checks":
            shutil.copytree(checks, target)
        elif item.is_dir():
            shutil.copytree(item, target, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copyfile(item, target)
    shutil.copytree(TOOLS, course / "course_tools", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": str(course), "HOME": str(job), "PATH": "/usr/bin:/bin",
           "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "MPLCONFIGDIR": str(job),
           "PYTHONDONTWRITEBYTECODE": "1"}
    return [sys.executable, "-m", "course_tools.grading.sandbox.worker", str(job / "spec.json")], env















# --------------------------------------------------------------------------------------------
# The session: one worker per submission
# --------------------------------------------------------------------------------------------


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
                 limits: Limits = Limits(), call_timeout: float = 10.0,
                 task_key: str | None = None) -> None:
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






