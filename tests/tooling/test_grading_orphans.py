"""A grader that dies leaves no grading behind: when the process that started a zygote (a Dask
worker, a grade command) is killed alone, with SIGKILL, the zygote, its grading process and the
sandbox end too, within seconds, instead of grading on for nobody.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import nbformat
import pytest

from tests.tooling.test_grading import COURSE, _submission

pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]
psutil = pytest.importorskip("psutil")

STARTER = """
import sys
from pathlib import Path
from course_tools.grading._batch import _Zygote
zygote = _Zygote(300.0, Path(sys.argv[1]), None, True)
zygote.grade(Path(sys.argv[2]))  # a submission that sleeps: still grading when killed
"""


def _alive(processes) -> list:
    return [p for p in processes if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]


def test_a_killed_worker_leaves_no_zygote_grader_or_sandbox(tmp_path):
    path = tmp_path / f"sleeping_{COURSE.stem}.ipynb"
    nbformat.write(_submission("sleeping"), path)
    starter = subprocess.Popen([sys.executable, "-c", STARTER, str(COURSE.parent), str(path)])
    parent = psutil.Process(starter.pid)
    try:
        end = time.monotonic() + 120
        while not any(p.name() == "bwrap" for p in parent.children(recursive=True)):
            assert time.monotonic() < end, "no sandbox started"
            time.sleep(0.2)
        below = parent.children(recursive=True)  # zygote, grading process, bwrap, worker
        assert len(below) >= 3, below
        starter.send_signal(signal.SIGKILL)  # the worker alone, not what it started
        starter.wait()
        end = time.monotonic() + 5  # the sleeping submission would keep them busy for longer
        while _alive(below) and time.monotonic() < end:
            time.sleep(0.2)
        assert not _alive(below), [(p.pid, p.name()) for p in _alive(below)]
    finally:
        for p in [parent, *(_alive(below) if "below" in dir() else [])]:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
