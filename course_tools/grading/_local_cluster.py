"""A Dask cluster of separate processes on this machine: a scheduler and ``workers`` workers,
started with Dask's own ``dask scheduler`` / ``dask worker`` commands (what an instructor runs on
each machine), each in its own session so that one can be killed alone, as a machine dies.

For the tests and ``benchmarks/grade_cluster.py``: ``with local_cluster(2, folder) as (address,
processes): ...``; on leaving, every process (and what it started) is killed. The cluster speaks
mutual TLS, as the README's (certificates from :func:`~._tls.make_certificates` in
``folder/tls``; the client's are ``folder/tls/client``), unless ``plain_tcp``. Run as root (a CI
container), its workers are told that root is allowed here (``LECTURES_GRADING_WORKER_AS_ROOT``),
unless ``worker_user`` names the unprivileged user (a uid) they run as (``setpriv``, with their
own copy of their certificates; ``folder`` must be that user's), as a grading cluster's are.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from course_tools.grading._cluster import WORKER_AS_ROOT_ENV
from course_tools.grading._tls import ROLES, dask_options, make_certificates
from course_tools.grading._tls import security as tls_security

DASK = Path(sys.executable).parent / "dask"  # the dask command of this environment


def _start(command: list[str], cwd: Path, log: Path | None,
           env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=log.open("wb") if log else subprocess.DEVNULL,
                            start_new_session=True, env=env)


@contextmanager
def local_cluster(workers: int, folder: Path, *, timeout: float = 300.0, logs: bool = True,
                  plain_tcp: bool = False, worker_env: dict | None = None,
                  worker_user: int | None = None):
    """Yield ``(address, [scheduler, worker, ...])``: the scheduler's ``tls://127.0.0.1:PORT``
    (``tcp://`` with ``plain_tcp``)
    once ``workers`` workers (one thread each, no nanny: a killed worker stays dead) joined it.
    Logs go to ``folder/scheduler.log`` and ``folder/workerN.log`` (``logs=False``: nowhere)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    folder = Path(folder)
    address_file = folder / f"scheduler-{os.getpid()}-{time.monotonic_ns()}.json"

    def log(name: str) -> Path | None:
        return folder / f"{name}.log" if logs else None

    security, options = None, {role: [] for role in ROLES}
    if not plain_tcp:
        made = make_certificates(folder / "tls")
        security = tls_security(made["client"])
        options = {role: ["--protocol", "tls", *dask_options(made[role])] if role == "scheduler"
                   else dask_options(made[role]) for role in ROLES}
    env = dict(os.environ, **(worker_env or {}))
    as_user: list[str] = []
    if worker_user is not None:
        as_user = ["setpriv", "--reuid", str(worker_user), "--regid", str(worker_user),
                   "--clear-groups", "--"]
        env["HOME"] = str(folder)
        if not plain_tcp:  # the workers' own copy of their certificates (folder/tls is 0700)
            mine = folder / "worker-tls"
            shutil.rmtree(mine, ignore_errors=True)
            shutil.copytree(made["worker"], mine)
            for path in (mine, *mine.iterdir()):
                os.chown(path, worker_user, worker_user)
            options["worker"] = dask_options(mine)
    elif os.geteuid() == 0:
        env.setdefault(WORKER_AS_ROOT_ENV, "unsafe")  # this one machine, for tests
    processes = [_start([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                         "--no-dashboard", "--scheduler-file", str(address_file),
                         *options["scheduler"]], folder, log("scheduler"))]
    try:
        end = time.monotonic() + timeout
        while not address_file.exists() or not address_file.read_text().strip():
            if time.monotonic() > end or processes[0].poll() is not None:
                raise RuntimeError(f"the Dask scheduler did not start (see {log('scheduler')})")
            time.sleep(0.2)
        address = json.loads(address_file.read_text())["address"]
        processes += [_start([*as_user, str(DASK), "worker", address, "--host", "127.0.0.1",
                              "--nthreads", "1", "--no-nanny", "--no-dashboard", "--name",
                              f"w{i}", *options["worker"]], folder, log(f"worker{i}"), env)
                      for i in range(workers)]
        from distributed import Client

        with Client(address, timeout=60, security=security) as client:
            client.wait_for_workers(workers, timeout=timeout)
        yield address, processes
    finally:
        for process in reversed(processes):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
