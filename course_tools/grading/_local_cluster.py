"""A Dask cluster of separate processes on this machine: a scheduler and ``workers`` workers,
started with Dask's own ``dask scheduler`` / ``dask worker`` commands (what an instructor runs on
each machine), each in its own session so that one can be killed alone, as a machine dies.

For the tests and ``benchmarks/grade_cluster.py``: ``with local_cluster(2, folder) as (address,
processes): ...``; on leaving, every process (and what it started) is killed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

DASK = Path(sys.executable).parent / "dask"  # the dask command of this environment


def _start(command: list[str], cwd: Path, log: Path | None) -> subprocess.Popen:
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=log.open("wb") if log else subprocess.DEVNULL,
                            start_new_session=True)


@contextmanager
def local_cluster(workers: int, folder: Path, *, timeout: float = 300.0, logs: bool = True):
    """Yield ``(address, [scheduler, worker, ...])``: the scheduler's ``tcp://127.0.0.1:PORT``
    once ``workers`` workers (one thread each, no nanny: a killed worker stays dead) joined it.
    Logs go to ``folder/scheduler.log`` and ``folder/workerN.log`` (``logs=False``: nowhere)."""
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be an int >= 1, got {workers!r}")
    folder = Path(folder)
    address_file = folder / f"scheduler-{os.getpid()}-{time.monotonic_ns()}.json"

    def log(name: str) -> Path | None:
        return folder / f"{name}.log" if logs else None

    processes = [_start([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", "0",
                         "--no-dashboard", "--scheduler-file", str(address_file)],
                        folder, log("scheduler"))]
    try:
        end = time.monotonic() + timeout
        while not address_file.exists() or not address_file.read_text().strip():
            if time.monotonic() > end or processes[0].poll() is not None:
                raise RuntimeError(f"the Dask scheduler did not start (see {log('scheduler')})")
            time.sleep(0.2)
        address = json.loads(address_file.read_text())["address"]
        processes += [_start([str(DASK), "worker", address, "--host", "127.0.0.1", "--nthreads",
                              "1", "--no-nanny", "--no-dashboard", "--name", f"w{i}"],
                             folder, log(f"worker{i}")) for i in range(workers)]
        from distributed import Client

        with Client(address, timeout=60) as client:
            client.wait_for_workers(workers, timeout=timeout)
        yield address, processes
    finally:
        for process in reversed(processes):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
