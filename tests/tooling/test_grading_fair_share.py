"""A neighbour cannot change a grade (issue 33, item 4): the sandbox's time limits are kept on a
clock that does not count the time its processes waited for a CPU someone else held
(:mod:`course_tools.grading.sandbox._fair_clock`), so a correct submission graded beside CPU hogs keeps
its time, while code that sleeps is still stopped at its limit, not at the wall-clock backstop.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest

from course_tools import grading
from course_tools.grading import sandbox
from course_tools.grading.sandbox import _fair_clock
from lectures_lib.checks import _base

pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]

# Busy for `seconds` of its own CPU time, then returns them: the same work on any machine.
BURN = ("import time\n"
        "def burn(seconds):\n"
        "    start = time.process_time()\n"
        "    while time.process_time() - start < seconds:\n"
        "        pass\n"
        "    return seconds\n"
        "def nap(seconds):\n"
        "    time.sleep(seconds)\n"
        "    return seconds\n")


@contextmanager
def cpu_hogs(count: int):
    """``count`` busy processes at the grader's own priority (more than the machine's cores)."""
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"], start_new_session=True)
            for _ in range(count)]  # each in its own session, as another sandbox is
    try:
        time.sleep(0.5)  # running before the submission's call starts
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _hogs() -> int:
    return 3 * (os.cpu_count() or 2)  # the sandbox gets at most a quarter of a core's share


def test_the_run_queue_delay_is_read():
    assert _fair_clock.run_delay(os.getpid()) is not None, (
        "this kernel keeps no /proc/PID/schedstat: the fair clock would be the wall clock")


def test_a_cpu_hog_beside_the_sandbox_leaves_a_call_its_time():
    # 1.5 s of CPU under a 2 s limit (+1 s for the reply): on an idle machine it fits, beside
    # the hogs it takes several times as long on the wall clock; only the wait for a CPU that
    # the hogs held is not counted
    with sandbox.Session([BURN], grading._student_checks(), deadline=time.monotonic() + 120,
                         call_timeout=2) as session:
        session.start()
        session.run_until(1)
        burn = session.lookup("burn")
        with cpu_hogs(_hogs()):
            started, waited_before = time.monotonic(), session.clock.waited
            assert burn(1.5) == 1.5
            wall = time.monotonic() - started
        waited = session.clock.waited - waited_before  # during this call (starting waited too)
        assert waited > 0.5, "the hogs made the sandbox wait: the clock saw it"
        assert wall > waited


def test_code_that_sleeps_is_stopped_at_its_limit_not_at_the_backstop():
    # a call of student code outside any check first (as a notebook or another test makes):
    # it must not leave its default limit behind as if a check with that limit were running
    assert _base.call(len, [1, 2]) == 2
    with sandbox.Session([BURN], grading._student_checks(), deadline=time.monotonic() + 120,
                         call_timeout=1) as session:
        session.start()
        session.run_until(1)
        with pytest.raises(sandbox.SandboxError, match="time limit of 1 s") as raised:
            session.lookup("nap")(3600)
        assert "wall clock" not in str(raised.value)  # the fair clock stopped it, at ~2 s


def test_a_checker_reads_the_sessions_limit_as_timed_out():
    # in the grader, `call` sets no wall-clock alarm of its own (it would fire beside the hogs);
    # the session's stop comes back as the check's `timed_out`
    with sandbox.Session([BURN], grading._student_checks(), deadline=time.monotonic() + 120,
                         call_timeout=1) as session, _base.timed_elsewhere():
        session.start()
        session.run_until(1)
        nap, burn = session.lookup("nap"), session.lookup("burn")
        with cpu_hogs(_hogs()):
            assert _base.call(burn, 1.0) == 1.0
        with pytest.raises(_base.Mistake) as raised:
            _base.call(nap, 3600)
        assert raised.value.code == _base.TIMED_OUT


def test_the_submission_deadline_is_on_the_fair_clock_too():
    # the whole submission's budget: 20 s, of which starting takes a few; then 6.4 s of CPU in
    # eight calls beside the hogs, which on the wall clock takes more than the 20 s
    with sandbox.Session([BURN], grading._student_checks(), deadline=time.monotonic() + 20,
                         call_timeout=5) as session:
        session.start()
        session.run_until(1)
        burn = session.lookup("burn")
        with cpu_hogs(_hogs()):
            assert [burn(0.8) for _ in range(8)] == [0.8] * 8
