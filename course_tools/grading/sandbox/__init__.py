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
grading.sandbox._cgroups` (the per-sandbox cgroup), :mod:`~course_tools.grading.sandbox._session`
(:class:`Session`); this module holds the command lines and the limits, and imports neither
torch nor the checkers (the sandboxed kernel's launcher, :mod:`.kernel`, needs only these).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course_tools.grading.sandbox import _cgroups as cgroups
from course_tools.grading.sandbox._student_view import LIBRARY, TOOLS, student_checks

__all__ = ["Limits", "SandboxError", "Session", "Remote", "RemoteError", "sandbox_problem",
           "sandbox_command", "student_checks"]

# The session and the stand-ins are imported when first used (PEP 562): they need torch (the
# plain-data protocol, wire) and the checkers; the command lines and limits here need neither,
# and the sandboxed kernel's launcher (kernel.py, one per kernel of every student) needs no more.
_LAZY = {
    "Session": "_session", "SandboxTimedOut": "_session", "BUDGET": "_session",
    "EXIT_WAIT": "_session", "_wait_unreaped": "_session", "_popen": "_session",
    "SandboxError": "_remote", "Remote": "_remote", "RemoteError": "_remote", "_error": "_remote",
    "WALL_FACTOR": "_fair_clock", "FairClock": "_fair_clock", "wire": None,
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    module = importlib.import_module(f"{__name__}.{_LAZY[name] or name}")
    value = module if _LAZY[name] is None else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


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
