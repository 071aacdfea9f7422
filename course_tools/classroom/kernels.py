"""The students' kernels on the class hub: where they are described, where their channels lie,
what the students' servers may read, and their end (issue 38, causes 5, 9 and 10).

* **channels no other user reaches**: each student's server starts its kernels with ZeroMQ's
  ``ipc`` transport (Unix sockets), never ``tcp`` (``127.0.0.1`` ports, which every user of the
  machine can connect to: a classmate subscribed to iopub read the cells and their outputs).
  The sockets, the connection files and the server's own runtime files lie in
  :func:`runtime_dir`, ``/run/lectures-kernels/<uid>`` (``0700``, the student's, in a folder of
  root's: short enough for a socket path, which a home folder's ``.local/share/jupyter/runtime``
  is not for every user name); the kernel's launcher refuses any other transport
  (``$LECTURES_KERNEL_TRANSPORT``), and relays them to the kernel's own sockets inside its
  sandbox, which other users cannot reach either;
* **the hub's state is root's alone**: ``HUBDIR`` is ``0700`` and the hub runs with umask
  ``077`` (``jupyterhub.sqlite``: every user name and server port; ``class.json``); what the
  students' servers read (the kernelspec, the kernel slots) lies beside it, in
  :func:`public_dir`, ``HUBDIR-public/``. The students' servers and the copies of their
  notebooks are made with umask ``022`` (:data:`STUDENT_UMASK`), not the hub's;
* **no kernel outlives its server or the hub**: the launcher ends with the server that started
  it (:func:`~course_tools.grading.sandbox.kernel.watch_parent`), and when a student's server
  stops (the hub's shutdown stops every server) the hub's ``post_stop_hook`` kills whatever is
  left in the student's cgroup (:func:`~course_tools.classroom.hub.configure`) and removes
  their runtime folder (:func:`clear_runtime`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

RUNTIME_BASE = Path("/run/lectures-kernels")
STUDENT_UMASK = 0o022
SERVER_ARGS = ["--KernelManager.transport=ipc"]  # every kernel of a student's server


def public_dir(hub_dir: Path) -> Path:
    """``HUBDIR-public``: what the students' servers read (the kernelspec, the kernel slots)."""
    hub_dir = Path(hub_dir).resolve()
    return hub_dir.with_name(f"{hub_dir.name}-public")


def install_kernelspec(hub_dir: Path) -> Path:
    """The one kernel students get, ``python3``, in ``HUBDIR-public/jupyter`` (readable by all);
    returns the ``jupyter`` folder (the students' ``JUPYTER_PATH``)."""
    from course_tools.grading.sandbox.kernel import kernel_spec

    public = public_dir(hub_dir)
    kernel = public / "jupyter" / "kernels" / "python3"
    kernel.mkdir(parents=True, exist_ok=True)
    spec = kernel_spec() | {"display_name": "Python 3 (course sandbox)"}
    (kernel / "kernel.json").write_text(json.dumps(spec, indent=1))
    os.chmod(kernel / "kernel.json", 0o644)
    for folder in (public, public / "jupyter", public / "jupyter" / "kernels", kernel):
        os.chmod(folder, 0o755)
    return public / "jupyter"


def runtime_dir(username: str) -> Path:
    """The student's runtime folder, made afresh (``0700``, theirs) in root's
    :data:`RUNTIME_BASE` (``0711``): their kernels' sockets and connection files."""
    import pwd

    record = pwd.getpwnam(username)
    RUNTIME_BASE.mkdir(mode=0o711, parents=True, exist_ok=True)
    base = os.lstat(RUNTIME_BASE)
    if base.st_uid != 0 or not os.path.isdir(RUNTIME_BASE) or os.path.islink(RUNTIME_BASE):
        raise RuntimeError(f"{RUNTIME_BASE} must be a folder of root's (it is not): remove it")
    os.chmod(RUNTIME_BASE, 0o711)
    folder = RUNTIME_BASE / str(record.pw_uid)
    if folder.is_symlink() or folder.exists():
        if folder.is_symlink() or not folder.is_dir():
            folder.unlink()
        else:
            shutil.rmtree(folder)  # the last server's sockets (rmtree follows no symlink)
    folder.mkdir(mode=0o700)
    os.chmod(folder, 0o700)
    os.chown(folder, record.pw_uid, record.pw_gid)
    return folder


def student_environment(hub_dir: Path, username: str, slots: Path) -> dict[str, str]:
    """The kernel part of a student's server's environment."""
    from course_tools.grading.sandbox.kernel import SLOTS_ENV, TRANSPORT_ENV

    return {"JUPYTER_PATH": str(public_dir(hub_dir) / "jupyter"),  # the sandboxed `python3`
            "JUPYTER_RUNTIME_DIR": str(runtime_dir(username)),
            TRANSPORT_ENV: "ipc", SLOTS_ENV: str(slots)}



def clear_runtime(username: str) -> None:
    """Remove the student's runtime folder (after their server stopped: stale sockets)."""
    import pwd

    try:
        uid = pwd.getpwnam(username).pw_uid
    except KeyError:
        return
    shutil.rmtree(RUNTIME_BASE / str(uid), ignore_errors=True)
