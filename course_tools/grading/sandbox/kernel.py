"""nbgrader's kernels in the course's sandbox: ``python -m course_tools sandbox-kernelspec``.

nbgrader (``autograde``, ``validate``) runs every notebook in a Jupyter kernel that it starts as
the instructor's user, with the instructor's rights. This module gives it a kernel, named
``lectures-sandbox``, whose IPython runs inside bubblewrap, with the building blocks of
:mod:`course_tools.grading.sandbox`:

* an unprivileged user (nobody), new user, PID, network, IPC and UTS namespaces (no network),
  an empty environment (no grading secret, no token of the instructor's);
* read-only: the Python installation and ``lectures_lib`` (the real checkers: nbgrader's test
  cells run in this kernel and need them); the notebook's own folder (its working directory), and
  nothing above it: not the course, ``gradebook.db``, the other students' folders, the runtime
  folder of the other kernels. A working directory that holds a course (``gradebook.db``,
  ``nbgrader_config.py``, ``submitted/``, ...) is not bound at all: the kernel starts in its
  scratch folder;
* writable: a private scratch folder and ``/tmp`` in memory (256 MiB each), ``/dev/shm``
  (64 MiB) and ``/kernel``, where the kernel makes its sockets (:data:`KERNEL_FOLDER_BYTES`, in
  memory; its connection file is bound read-only into it), nothing else (``/`` and ``/dev`` are
  read-only): nothing the notebook writes reaches the host's disk;
* hard limits on memory, processes, file size, CPU time and open files (:class:`~course_tools.
  grading.sandbox.Limits`), set before IPython starts, and a cgroup of its own (``pids.max``,
  memory) where one can be made, which holds for root too; as root without one the launcher
  refuses (:func:`~course_tools.grading.sandbox.sandbox_problem`); ``--die-with-parent`` in a
  PID namespace: when nbgrader ends (or kills) the kernel, every process the notebook started
  ends with it.
* after each cell the kernel gives back the memory the cell freed (:mod:`._kernel_memory`): a
  class hub holds one kernel per active student.

Without network the kernel cannot reach its client's channels (nbgrader's TCP ports; the class
hub's Unix sockets in the student's own folder: ``ipc``, which ``$LECTURES_KERNEL_TRANSPORT``
then requires, since a 127.0.0.1 port is open to every user of the machine), so the kernel's
*launcher* (this module's ``launch``, outside the sandbox) binds them and relays the messages to
the kernel's Unix sockets in the sandbox's ``/kernel``, which it reaches as
``/proc/<sandbox>/root/kernel`` (ZeroMQ ROUTER/DEALER, XPUB/XSUB). The launcher ends with the
process that started it (:func:`watch_parent`), and the sandbox with the launcher. The messages keep their signatures (the kernel has the connection key,
as any kernel does). Output is capped on its way (:mod:`course_tools.grading.sandbox._kernel_output`): a
cell's beyond 4 MiB, a notebook's beyond 32 MiB, is cut with a note, since nbgrader keeps every
output in memory; an error always arrives. Without bubblewrap the launcher refuses, and says
why; the kernel then dies at its start, and nbgrader reports it (in the class hub it stays, as
a kernel that answers with the reason: :mod:`._refusal`).

What this does not change: nbgrader runs its hidden test cells in this same kernel, after the
student's cells, so a submission can still patch the checkers, ``assert``, builtins or IPython and
earn points it did not deserve (the README says so). For credit, grade with the course's grader.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from course_tools.grading.sandbox import (
    Limits,
    _base_command,
    _group_problem,
    _python,
    sandbox_problem,
    seal,
)
from course_tools.grading.sandbox import _cgroups as cgroups
from course_tools.grading.sandbox._kernel_output import MAX_FRAME_BYTES, OutputCap
from course_tools.grading.sandbox._refusal import channel_address, serve_refusal
from lectures_lib.plain_checks import check_bool, check_path  # no torch here

__all__ = ["KERNEL_NAME", "kernel_spec", "install", "launch_command", "main"]

KERNEL_NAME = "lectures-sandbox"
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
# A working directory holding any of these is (part of) a course: never shown to a kernel.
COURSE_MARKERS = ("gradebook.db", "nbgrader_config.py", "submitted", "autograded", "source",
                  "release", "feedback")
CONFIG_LINE = f'c.ExecutePreprocessor.kernel_name = "{KERNEL_NAME}"'
KERNEL_FOLDER_BYTES = 64 * 2**10  # /kernel: five sockets (no bytes) and the bound connection file


def kernel_spec() -> dict:
    """The ``kernel.json`` of the sandboxed kernel (this Python runs the launcher)."""
    return {
        # -P: Jupyter starts the launcher in the notebook's folder, whose files (a handed-in
        # torch.py) must never be importable by this process, which runs with your rights
        "argv": [sys.executable, "-P", "-m", "course_tools.grading.sandbox.kernel", "launch",
                 "{connection_file}"],
        "display_name": "Python 3 (lectures sandbox)",
        "language": "python",
        "interrupt_mode": "message",  # an interrupt crosses the relay as a message, not a signal
        "metadata": {"lectures_lib": "bubblewrap sandbox, see course_tools.grading.sandbox.kernel"},
    }


def install(*, user: bool = False, prefix: str | None = None) -> str:
    """Install the kernelspec; returns the folder. Raises RuntimeError where no sandbox can be
    made (the kernel would refuse to start anyway)."""
    _check_install(user, prefix)
    problem = sandbox_problem()
    if problem:
        raise RuntimeError(f"refusing to install the sandboxed kernel: {problem}")
    from jupyter_client.kernelspec import KernelSpecManager

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "kernel.json").write_text(json.dumps(kernel_spec(), indent=1))
        return KernelSpecManager().install_kernel_spec(folder, KERNEL_NAME, user=user,
                                                       prefix=prefix)


def _check_install(user: object, prefix: object) -> None:
    check_bool(user, "user")
    if prefix is not None and (not isinstance(prefix, (str, os.PathLike)) or not str(prefix)):
        raise TypeError(f"prefix must be None or a non-empty path, got {type(prefix).__name__} "
                        f"({prefix!r:.60})")
    if user and prefix is not None:
        raise ValueError(f"user and prefix are exclusive (user=True, prefix={prefix!r:.60})")


def _check_launch(inner: object, cwd: object, limits: object,
                  info_fd: object) -> tuple[Path, Path]:
    inner, cwd = check_path(inner, "inner"), check_path(cwd, "cwd")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be None or a sandbox Limits, got {type(limits).__name__}")
    if info_fd is not None and (isinstance(info_fd, bool) or not isinstance(info_fd, int)
                                or info_fd < 0):
        raise TypeError(f"info_fd must be None or a file descriptor (an int >= 0), got "
                        f"{info_fd!r:.60}")
    return inner, cwd


def _is_course(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in COURSE_MARKERS)


def launch_command(inner: Path, cwd: Path, limits: Limits | None = None, *,
                   info_fd: int | None = None) -> list[str]:
    """The ``bwrap`` command that starts IPython with the connection file ``inner/kernel.json``
    (bound read-only at ``/kernel/kernel.json``; its sockets in ``/kernel``, a tmpfs of
    :data:`KERNEL_FOLDER_BYTES`), in ``cwd`` (read-only) unless ``cwd`` holds a course. With
    ``info_fd``, bubblewrap writes the sandbox's process id there (``{"child-pid": N}``)."""
    inner, cwd = _check_launch(inner, cwd, limits, info_fd)
    limits = limits or Limits()
    command = _base_command(limits) + [
        "--size", str(KERNEL_FOLDER_BYTES), "--tmpfs", "/kernel",
        "--ro-bind", str(inner / "kernel.json"), "/kernel/kernel.json"]
    if info_fd is not None:
        command += ["--info-fd", str(info_fd)]
    workdir = "/scratch"
    if cwd.is_dir() and cwd != Path("/") and not _is_course(cwd):
        command += ["--ro-bind", str(cwd), str(cwd)]
        workdir = str(cwd)
    limits_json = json.dumps(limits.as_spec())
    command += [
        "--chdir", workdir,
        "--setenv", "PYTHONPATH", "/course", "--setenv", "HOME", "/scratch",
        "--setenv", "IPYTHONDIR", "/scratch/.ipython",
        "--setenv", "JUPYTER_RUNTIME_DIR", "/scratch/runtime",
        "--setenv", "TMPDIR", "/tmp", "--setenv", "MPLBACKEND", "module://matplotlib_inline."
        "backend_inline", "--setenv", "MPLCONFIGDIR", "/tmp",
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1", "--setenv", "OMP_NUM_THREADS", "1",
        "--setenv", "PATH", "/usr/bin:/bin",
        *seal(),
        "--", str(_python()), "-m", "course_tools.grading.sandbox.kernel", "inner",
        "/kernel/kernel.json", limits_json,
    ]
    return command


# after each cell, the pages it freed go back to the system (one kernel per active student)
MEMORY_EXTENSION = "course_tools.grading.sandbox._kernel_memory"


def _inner(connection_file: str, limits_json: str) -> int:
    """Inside the sandbox: hard limits, then IPython (this process becomes the kernel)."""
    from course_tools.grading.sandbox.worker import _apply_limits

    _apply_limits(json.loads(limits_json))
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f",
                              connection_file, f"--IPKernelApp.extra_extensions={MEMORY_EXTENSION}"])
    return 1  # not reached


def _relay(context, kind: str, outer: str, inner: str, identity: bytes,
           cap: OutputCap | None = None) -> None:
    """Relay one channel between nbgrader's TCP port and the kernel's Unix socket; the
    kernel's iopub messages through ``cap`` (:mod:`._kernel_output`)."""
    import zmq

    if kind == "iopub":
        front, back = context.socket(zmq.XPUB), context.socket(zmq.XSUB)
    else:
        front, back = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
        back.setsockopt(zmq.IDENTITY, identity)  # shell and stdin: one identity, as a client
    front.setsockopt(zmq.LINGER, 0)
    back.setsockopt(zmq.LINGER, 0)
    back.setsockopt(zmq.MAXMSGSIZE, MAX_FRAME_BYTES)  # what the launcher holds at once
    # Connected once, to the socket IPython made before any of the notebook's code ran, and
    # never again: a path the notebook later replaces (a symlink resolves on the host side of
    # /proc/<pid>/root, e.g. to another kernel's socket) is never followed.
    back.setsockopt(zmq.RECONNECT_IVL, -1)
    front.bind(outer)
    if not _kernel_socket_ready(inner.removeprefix("ipc://")):
        return  # the kernel ended before it made its sockets
    back.connect(inner)
    try:
        if kind in ("shell", "control"):
            _requests_proxy(front, back)
        elif cap is None:
            zmq.proxy(front, back)
        else:
            _capped_proxy(front, back, cap)
    except zmq.ZMQError:
        pass  # the context ended: the kernel is gone


def _requests_proxy(front, back) -> None:
    """``zmq.proxy`` for shell and control, noting each request the client sends
    (:data:`._kernel_output.REQUESTS`: past its caps, the iopub cap serves only those)."""
    import zmq

    from course_tools.grading.sandbox._kernel_output import REQUESTS

    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    while True:
        ready = dict(poller.poll())
        if front in ready:
            frames = front.recv_multipart()
            REQUESTS.record(frames)
            back.send_multipart(frames)
        if back in ready:
            front.send_multipart(back.recv_multipart())


def _kernel_socket_ready(path: str, seconds: float = 60.0) -> bool:
    """Wait until ``path`` is a Unix socket itself (``lstat``: a symlink is refused, raised as
    ``RuntimeError``); False if it is not there within ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            time.sleep(0.02)
            continue
        if not stat.S_ISSOCK(mode):
            raise RuntimeError(f"the kernel's {path} is not a socket (mode {mode:o}): "
                               "not connecting to it")
        time.sleep(0.05)  # bound: give IPython's listen() the moment that follows bind()
        return True
    return False


def _capped_proxy(front, back, cap: OutputCap) -> None:
    """``zmq.proxy`` for iopub, with the kernel's messages passed through ``cap``."""
    import zmq

    poller = zmq.Poller()
    poller.register(front, zmq.POLLIN)
    poller.register(back, zmq.POLLIN)
    while True:
        ready = dict(poller.poll())
        if front in ready:  # nbgrader's subscriptions, to the kernel as they are
            back.send_multipart(front.recv_multipart())
        if back in ready:
            for message in cap.filter(back.recv_multipart()):
                front.send_multipart(message)


def _sandbox_root(info: int, kernel: subprocess.Popen, seconds: float = 60.0) -> str:
    """``/proc/<pid>/root`` of the sandbox that bubblewrap reports on ``info`` (its
    ``--info-fd``): the kernel's ``/kernel`` is that path's ``kernel``, seen from here."""
    import select

    data = b""
    with os.fdopen(info, "rb", buffering=0) as pipe:
        while kernel.poll() is None and select.select([pipe], [], [], seconds)[0]:
            chunk = pipe.read(4096)
            data += chunk
            try:
                return f"/proc/{int(json.loads(data)['child-pid'])}/root"
            except (ValueError, KeyError, TypeError):
                if not chunk:
                    break
    raise RuntimeError(f"bubblewrap did not report the sandbox's process ({data[:200]!r})")


SLOTS_ENV = "LECTURES_KERNEL_SLOTS"  # set by the class hub: the student's kernel slots
# set by the class hub to "ipc": the launcher then refuses to relay on a TCP port, which every
# user of the machine can reach (a classmate subscribed to iopub reads the cells and outputs)
TRANSPORT_ENV = "LECTURES_KERNEL_TRANSPORT"


def watch_parent() -> None:
    """SIGTERM this process when the process that started it (Jupyter's server, nbgrader) ends,
    however it ends (a SIGKILL included): the launcher's handler then kills bubblewrap, whose
    ``--die-with-parent`` and PID namespace end every process of the notebook. A pidfd of the
    parent, watched by a thread (``PR_SET_PDEATHSIG`` would fire when the parent's *thread*
    that started this process ends, and the server starts kernels from its threads too)."""
    import select

    parent = os.getppid()
    try:
        watched = os.pidfd_open(parent)
    except (AttributeError, OSError):
        watched = None
    if os.getppid() != parent:  # it ended already
        os.kill(os.getpid(), signal.SIGTERM)
        return

    def wait() -> None:
        if watched is not None:
            select.select([watched], [], [])  # readable once the parent has ended
        else:
            while os.getppid() == parent:
                time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=wait, daemon=True, name="parent-watch").start()


def _refuse(connection_file: str, reason: str) -> int:
    """A kernel that is not started: the reason on stderr; in the class hub the launcher then
    stays, as a kernel that answers every request with the reason (:mod:`._refusal`), until it
    is shut down or its server ends, since Jupyter's server restarts a kernel that exits at
    once, and the student's lab asks for a new one after that: refused again, in a loop."""
    print(f"lectures-sandbox kernel: {reason}", file=sys.stderr)
    if not os.environ.get(SLOTS_ENV):
        return 1  # nbgrader: the kernel dies at its start, and nbgrader reports it
    return serve_refusal(json.loads(Path(connection_file).read_text()), reason)


def take_slot() -> tuple[int | None, str]:
    """(a locked slot's file descriptor, "") where ``$LECTURES_KERNEL_SLOTS`` names a folder of
    slot files (:func:`~course_tools.classroom.hub.kernel_slots`) and one is free; (None, why
    not) where none is; (None, "") without the variable (no cap: nbgrader's kernels). The lock
    lasts as long as this process: a kernel that ends frees its slot."""
    import fcntl

    folder = os.environ.get(SLOTS_ENV)
    if not folder:
        return None, ""
    slots = sorted(Path(folder).glob("slot-*"))
    for slot in slots:
        try:
            fd = os.open(slot, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd, ""
        except OSError:
            os.close(fd)
    return None, (f"you already run {len(slots)} kernel(s), the most one student may: shut one "
                  "down (Kernel > Shut Down Kernel, or the Running panel) and try again")


def _launch(connection_file: str) -> int:
    """Outside the sandbox (started by Jupyter in the notebook's folder): start the kernel in
    bubblewrap and relay its channels until it ends."""
    watch_parent()  # this launcher, and so its sandbox, end with the server that started it
    slot, refused = take_slot()  # held (open) until this launcher ends; first: it is quick
    if refused:
        return _refuse(connection_file, f"not started: {refused}")
    problem = sandbox_problem()
    if problem:
        return _refuse(connection_file, f"refusing to start without a sandbox: {problem}. "
                       "Student code would run with your rights. Install bubblewrap, or use "
                       "another kernel only inside a throwaway container or VM.")
    import zmq

    info = json.loads(Path(connection_file).read_text())
    transport, required = info.get("transport", "tcp"), os.environ.get(TRANSPORT_ENV)
    if transport not in ("tcp", "ipc") or (required and transport != required):
        print(f"lectures-sandbox kernel: not started: its channels would use {transport!r}, "
              f"and {required or 'tcp or ipc'!r} is required here (${TRANSPORT_ENV}): a "
              "127.0.0.1 port is open to every user of this machine", file=sys.stderr)
        return 1
    folder = tempfile.TemporaryDirectory(prefix="lectures-kernel-")
    inner = Path(folder.name)
    os.chmod(inner, 0o700)
    inner_info = {key: value for key, value in info.items()
                  if key not in ("ip", "transport") and not key.endswith("_port")}
    inner_info.update(transport="ipc", ip="/kernel/socket")
    for number, channel in enumerate(CHANNELS, start=1):
        inner_info[f"{channel}_port"] = number
    (inner / "kernel.json").write_text(json.dumps(inner_info))
    cap = OutputCap(str(info.get("key", "")).encode(),
                    str(info.get("signature_scheme", "hmac-sha256")))
    limits = Limits()
    group = cgroups.Group(processes=limits.processes, memory_bytes=limits.memory_bytes) \
        if _group_problem() is None else None
    report, report_to = os.pipe()
    kernel = subprocess.Popen(launch_command(inner, Path.cwd(), limits, info_fd=report_to),
                              stdin=subprocess.DEVNULL, env={}, pass_fds=(report_to,),
                              preexec_fn=group.join if group is not None else None)
    os.close(report_to)
    try:
        root = _sandbox_root(report, kernel)
    except RuntimeError as error:
        print(f"lectures-sandbox kernel: {error}", file=sys.stderr)
        kernel.kill()
        root = None
    context = zmq.Context()
    identity = os.urandom(8).hex().encode()
    for number, channel in enumerate(CHANNELS if root else (), start=1):
        outer = channel_address(info, channel)
        threading.Thread(target=_relay, daemon=True, args=(
            context, channel, outer, f"ipc://{root}/kernel/socket-{number}", identity,
            cap if channel == "iopub" else None)).start()

    def stop(signum, frame):
        kernel.kill()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, lambda *a: None)  # interrupts come as messages
    code = kernel.wait()  # the relays (daemon threads) end with this process
    if group is not None:
        group.close()
    folder.cleanup()
    shutil.rmtree(inner, ignore_errors=True)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["launch"] and len(argv) == 2:
        return _launch(argv[1])
    if argv[:1] == ["inner"] and len(argv) == 3:
        return _inner(argv[1], argv[2])
    parser = argparse.ArgumentParser(
        prog="python -m course_tools sandbox-kernelspec",
        description="Install a Jupyter kernel, 'lectures-sandbox', that runs IPython inside "
        "bubblewrap (no network, read-only course, private scratch, limits), for nbgrader: "
        f"add `{CONFIG_LINE}` to nbgrader_config.py. Without --install: print kernel.json.")
    parser.add_argument("--install", action="store_true", help="install the kernelspec")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--user", action="store_true", help="in your user's Jupyter folder")
    where.add_argument("--prefix", default=None, help="under PREFIX/share/jupyter/kernels")
    args = parser.parse_args(argv)
    if not args.install:
        print(json.dumps(kernel_spec(), indent=1))
        return 0
    try:
        folder = install(user=args.user, prefix=args.prefix)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"installed the kernel {KERNEL_NAME!r} in {folder}\nnbgrader_config.py: {CONFIG_LINE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
