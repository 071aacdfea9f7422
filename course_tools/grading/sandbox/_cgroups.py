"""Process and memory limits that hold for root: one Linux control group per sandbox.

``RLIMIT_NPROC`` counts the processes of a *user* and the kernel does not apply it to root (uid 0,
or a user namespace whose real user is root: containers, CI). A cgroup's ``pids.max`` and its
memory limit hold for every user, count only the processes put in the group (and all they
start, ``setsid`` or not), and memory charged there includes what the group writes to tmpfs.

:class:`Group` makes one group per sandbox, below the grader's own groups (so the machine's
own limits still apply above it), with

* cgroup v1 (``/sys/fs/cgroup/pids`` and ``/sys/fs/cgroup/memory``): ``pids.max``,
  ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes`` where swap is accounted);
* cgroup v2 (unified): ``pids.max`` and ``memory.max``, where the grader's group has those
  controllers enabled for its children (``cgroup.subtree_control``: a delegated group).

The sandbox's first process joins the group between ``fork`` and ``exec`` (:meth:`Group.join`,
in the child), so nothing of the submission ever runs outside it; :meth:`Group.close` kills what
is left in it and removes it. :func:`group_problem` says why no group can be made (not Linux,
no writable cgroup filesystem, a controller missing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

__all__ = ["Group", "group_problem", "in_student_group"]

ROOT = Path("/sys/fs/cgroup")
PREFIX = "lectures-sandbox-"
_COUNTER = [0]


def _own_path(hierarchy: str) -> str | None:
    """This process's group in a v1 hierarchy (``"pids"``), or in v2 (``""``)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if (hierarchy == "" and number == "0" and controllers == "") or (
                hierarchy and hierarchy in controllers.split(",")):
            return path
    return None


def _parents(controllers: tuple[str, ...] = ("pids", "memory")
             ) -> tuple[str, dict[str, Path]] | tuple[None, str]:
    """("v1" or "v2", {controller: the folder new groups are made in}) or (None, why not)."""
    v1 = {}
    for controller in controllers:
        own = _own_path(controller)
        folder = ROOT / controller / (own or "/").lstrip("/")
        if own is not None and (folder / "cgroup.procs").exists():
            v1[controller] = folder
    if len(v1) == len(controllers):
        if all(os.access(folder, os.W_OK) for folder in v1.values()):
            return "v1", v1
        return None, f"the cgroup folders {', '.join(map(str, v1.values()))} are not writable"
    own = _own_path("")
    for base in (ROOT, ROOT / "unified"):
        folder = base / (own or "/").lstrip("/")
        if own is None or not (folder / "cgroup.subtree_control").exists():
            continue
        enabled = (folder / "cgroup.subtree_control").read_text().split()
        missing = set(controllers) - set(enabled)
        if missing:
            return None, (f"the cgroup {folder} does not delegate the {', '.join(sorted(missing))} "
                          "controller to its children (cgroup.subtree_control)")
        if not os.access(folder, os.W_OK):
            return None, f"the cgroup {folder} is not writable"
        return "v2", {controller: folder for controller in controllers}
    return None, (f"no cgroup filesystem with the {' and '.join(controllers)} controllers is "
                  "mounted")


def group_problem(cpus: float | None = None) -> str | None:
    """``None`` when :class:`Group` can limit processes and memory (and CPU, given ``cpus``)
    here, else the reason."""
    if not os.uname().sysname == "Linux":
        return "cgroups need Linux"
    version, found = _parents(_controllers(cpus))
    if version is None:
        return found
    try:  # made, limited, joined by a process (as a sandbox will be), removed
        group = Group(processes=4, memory_bytes=2**26, cpus=cpus)
        try:
            subprocess.run(["true"], preexec_fn=group.join, check=True, timeout=30)
        finally:
            group.close()
    except (OSError, subprocess.SubprocessError) as error:
        return f"a cgroup cannot be made or joined here ({type(error).__name__}: {error})"
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _controllers(cpus: float | None) -> tuple[str, ...]:
    return ("pids", "memory") if cpus is None else ("pids", "memory", "cpu")


def in_student_group() -> bool:
    """Whether this process is in a student's group (:meth:`Group.for_student`, made by root:
    its processes and memory bounded), for every controller."""
    return all((_own_path(controller) or "").rsplit("/", 1)[-1].startswith(STUDENT_PREFIX)
               for controller in ("pids", "memory"))


STUDENT_PREFIX = "lectures-student-"
PERIOD_US = 100_000  # the CPU quota's period


class Group:
    """One cgroup (v1: one per controller) limiting ``processes`` and ``memory_bytes`` (and
    the CPU to ``cpus`` cores). ``name``: a stable group, reused if it exists (a student's:
    :meth:`for_student`); by default a new one per object."""

    def __init__(self, *, processes: int, memory_bytes: int, cpus: float | None = None,
                 name: str | None = None) -> None:
        version, parents = _parents(_controllers(cpus))
        if version is None:
            raise OSError(parents)
        self.version = version
        if name is None:
            _COUNTER[0] += 1
            name = f"{PREFIX}{os.getpid()}-{_COUNTER[0]}-{os.urandom(3).hex()}"
        self.folders: list[Path] = []
        try:
            for controller in _controllers(cpus):
                parent = parents[controller]
                _remove_stale(parent)
                folder = parent / name
                if folder not in self.folders:
                    folder.mkdir(exist_ok=name.startswith(STUDENT_PREFIX))
                    self.folders.append(folder)
                self._limit(controller, folder, processes, memory_bytes, cpus)
        except OSError:
            self.close()
            raise
        self._procs = [str(folder / "cgroup.procs") for folder in self.folders]

    @classmethod
    def for_student(cls, username: str, *, processes: int, memory_bytes: int,
                    cpus: float) -> Group:
        """The group of one student's server and all it starts (made by root for the hub)."""
        return cls(processes=processes, memory_bytes=memory_bytes, cpus=cpus,
                   name=f"{STUDENT_PREFIX}{username}")

    def _limit(self, controller: str, folder: Path, processes: int, memory_bytes: int,
               cpus: float | None = None) -> None:
        if controller == "cpu":
            quota = max(1000, int(cpus * PERIOD_US))
            if self.version == "v2":
                (folder / "cpu.max").write_text(f"{quota} {PERIOD_US}")
            else:
                (folder / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (folder / "cpu.cfs_quota_us").write_text(str(quota))
        elif controller == "pids":
            (folder / "pids.max").write_text(str(int(processes)))
        elif self.version == "v2":
            (folder / "memory.max").write_text(str(int(memory_bytes)))
            if (folder / "memory.swap.max").exists():
                (folder / "memory.swap.max").write_text("0")
        else:
            (folder / "memory.limit_in_bytes").write_text(str(int(memory_bytes)))
            if (folder / "memory.memsw.limit_in_bytes").exists():
                (folder / "memory.memsw.limit_in_bytes").write_text(str(int(memory_bytes)))

    def join(self) -> None:
        """Put the calling process in the group (in a child, between fork and exec)."""
        pid = str(os.getpid()).encode()
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)

    def pids(self) -> list[int]:
        found = set()
        for folder in self.folders:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                pass
        return sorted(found)

    def close(self, wait: float = 5.0) -> None:
        """Kill every process left in the group, then remove it."""
        end = time.monotonic() + wait
        for folder in reversed(self.folders):
            while True:
                for pid in self.pids():
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    if time.monotonic() > end:
                        break  # left for the next grader to remove (_remove_stale)
                    time.sleep(0.01)
        self.folders = []


def _remove_stale(parent: Path) -> None:
    """Remove empty groups that graders which no longer run left behind (killed mid-run)."""
    try:
        entries = [e for e in parent.iterdir() if e.name.startswith(PREFIX) and e.is_dir()]
    except OSError:
        return
    for entry in entries:
        try:
            owner = int(entry.name[len(PREFIX):].split("-")[0])
        except ValueError:
            continue
        if owner != os.getpid() and not _alive(owner):
            try:
                entry.rmdir()
            except OSError:
                pass
