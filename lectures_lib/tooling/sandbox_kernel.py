"""nbgrader's kernels in the course's sandbox: ``python -m lectures_lib sandbox-kernelspec``.

nbgrader (``autograde``, ``validate``) runs every notebook in a Jupyter kernel that it starts as
the instructor's user, with the instructor's rights. This module gives it a kernel, named
``lectures-sandbox``, whose IPython runs inside bubblewrap, with the building blocks of
:mod:`lectures_lib.tooling.sandbox`:

* an unprivileged user (nobody), new user, PID, network, IPC and UTS namespaces (no network),
  an empty environment (no grading secret, no token of the instructor's);
* read-only: the Python installation and ``lectures_lib`` (the real checkers: nbgrader's test
  cells run in this kernel and need them); the notebook's own folder (its working directory), and
  nothing above it: not the course, ``gradebook.db``, the other students' folders, the runtime
  folder of the other kernels. A working directory that holds a course (``gradebook.db``,
  ``nbgrader_config.py``, ``submitted/``, ...) is not bound at all: the kernel starts in its
  scratch folder;
* writable: a private scratch folder and ``/tmp`` in memory (256 MiB each) and ``/dev/shm``
  (64 MiB), nothing else (``/`` and ``/dev`` are read-only);
* hard limits on memory, processes, file size, CPU time and open files (:class:`~lectures_lib.
  tooling.sandbox.Limits`), set before IPython starts, and a cgroup of its own (``pids.max``,
  memory) where one can be made, which holds for root too; as root without one the launcher
  refuses (:func:`~lectures_lib.tooling.sandbox.sandbox_problem`); ``--die-with-parent`` in a
  PID namespace: when nbgrader ends (or kills) the kernel, every process the notebook started
  ends with it.

Without network the kernel cannot reach nbgrader's TCP ports, so the kernel's *launcher* (this
module's ``launch``, outside the sandbox) binds them and relays every message, unchanged, to the
kernel's Unix sockets in a private folder (ZeroMQ ROUTER/DEALER, XPUB/XSUB). The messages keep
their signatures (the kernel has the connection key, as any kernel does). Without bubblewrap the
launcher refuses, and says why; the kernel then dies at its start, and nbgrader reports it.

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
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from ..utils import check_bool, check_path
from . import _cgroups as cgroups
from .sandbox import Limits, _base_command, _group_problem, _python, sandbox_problem, seal

__all__ = ["KERNEL_NAME", "kernel_spec", "install", "launch_command", "main"]

KERNEL_NAME = "lectures-sandbox"
CHANNELS = ("shell", "iopub", "stdin", "control", "hb")
# A working directory holding any of these is (part of) a course: never shown to a kernel.
COURSE_MARKERS = ("gradebook.db", "nbgrader_config.py", "submitted", "autograded", "source",
                  "release", "feedback")
CONFIG_LINE = f'c.ExecutePreprocessor.kernel_name = "{KERNEL_NAME}"'


def kernel_spec() -> dict:
    """The ``kernel.json`` of the sandboxed kernel (this Python runs the launcher)."""
    return {
        # -P: Jupyter starts the launcher in the notebook's folder, whose files (a handed-in
        # torch.py) must never be importable by this process, which runs with your rights
        "argv": [sys.executable, "-P", "-m", "lectures_lib.tooling.sandbox_kernel", "launch",
                 "{connection_file}"],
        "display_name": "Python 3 (lectures sandbox)",
        "language": "python",
        "interrupt_mode": "message",  # an interrupt crosses the relay as a message, not a signal
        "metadata": {"lectures_lib": "bubblewrap sandbox, see lectures_lib.tooling.sandbox_kernel"},
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


def _check_launch(inner: object, cwd: object, limits: object) -> tuple[Path, Path]:
    inner, cwd = check_path(inner, "inner"), check_path(cwd, "cwd")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits must be None or a sandbox Limits, got {type(limits).__name__}")
    return inner, cwd


def _is_course(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in COURSE_MARKERS)


def launch_command(inner: Path, cwd: Path, limits: Limits | None = None) -> list[str]:
    """The ``bwrap`` command that starts IPython with the connection file ``inner/kernel.json``
    (its sockets in ``inner``), in ``cwd`` (read-only) unless ``cwd`` holds a course."""
    inner, cwd = _check_launch(inner, cwd, limits)
    limits = limits or Limits()
    command = _base_command(limits) + ["--bind", str(inner), "/kernel"]
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
        "--", str(_python()), "-m", "lectures_lib.tooling.sandbox_kernel", "inner",
        "/kernel/kernel.json", limits_json,
    ]
    return command


def _inner(connection_file: str, limits_json: str) -> int:
    """Inside the sandbox: hard limits, then IPython (this process becomes the kernel)."""
    from .worker import _apply_limits

    _apply_limits(json.loads(limits_json))
    os.execv(sys.executable, [sys.executable, "-m", "ipykernel_launcher", "-f",
                              connection_file])
    return 1  # not reached


def _relay(context, kind: str, outer: str, inner: str, identity: bytes) -> None:
    """Relay one channel between nbgrader's TCP port and the kernel's Unix socket."""
    import zmq

    if kind == "iopub":
        front, back = context.socket(zmq.XPUB), context.socket(zmq.XSUB)
    else:
        front, back = context.socket(zmq.ROUTER), context.socket(zmq.DEALER)
        back.setsockopt(zmq.IDENTITY, identity)  # shell and stdin: one identity, as a client
    front.setsockopt(zmq.LINGER, 0)
    back.setsockopt(zmq.LINGER, 0)
    front.bind(outer)
    back.connect(inner)
    try:
        zmq.proxy(front, back)
    except zmq.ZMQError:
        pass  # the context ended: the kernel is gone


def _launch(connection_file: str) -> int:
    """Outside the sandbox (started by Jupyter in the notebook's folder): start the kernel in
    bubblewrap and relay its channels until it ends."""
    problem = sandbox_problem()
    if problem:
        print(f"lectures-sandbox kernel: refusing to start without a sandbox: {problem}. "
              "Student code would run with your rights. Install bubblewrap, or use another "
              "kernel only inside a throwaway container or VM.", file=sys.stderr)
        return 1
    import zmq

    info = json.loads(Path(connection_file).read_text())
    if info.get("transport", "tcp") != "tcp":
        print("lectures-sandbox kernel: only the tcp transport is relayed "
              f"(got {info.get('transport')!r})", file=sys.stderr)
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
    context = zmq.Context()
    identity = os.urandom(8).hex().encode()
    for number, channel in enumerate(CHANNELS, start=1):
        outer = f"tcp://{info['ip']}:{info[f'{channel}_port']}"
        threading.Thread(target=_relay, daemon=True, args=(
            context, channel, outer, f"ipc://{inner}/socket-{number}", identity)).start()
    limits = Limits()
    group = cgroups.Group(processes=limits.processes, memory_bytes=limits.memory_bytes) \
        if _group_problem() is None else None
    kernel = subprocess.Popen(launch_command(inner, Path.cwd(), limits), stdin=subprocess.DEVNULL,
                              env={}, preexec_fn=group.join if group is not None else None)

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
        prog="python -m lectures_lib sandbox-kernelspec",
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
