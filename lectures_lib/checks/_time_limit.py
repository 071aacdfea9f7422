"""Running the student's function under a time limit (the grading-proof half of :func:`call`).

In the main thread (a notebook kernel, pytest, the grade command) the limit is a ``SIGALRM``
timer that keeps firing every 50 ms until the call gives up, so an ``except Exception`` inside a
loop cannot swallow it; elsewhere the call runs in a helper thread that is abandoned (and sent an
asynchronous exception) when time is up. Machinery only, no answers: the grader's sandbox keeps
this file whole (:mod:`course_tools.grading.sandbox._student_view`).
"""

from __future__ import annotations

import ctypes
import signal
import threading
from collections.abc import Callable
from contextlib import contextmanager

__all__ = ["TimedOut", "limited"]


class TimedOut(BaseException):
    """Raised inside the student's code when its time is up (not an Exception: harder to catch)."""


def _async_raise(thread: threading.Thread, exception: type[BaseException]) -> None:
    """Ask ``thread`` to raise ``exception`` at its next bytecode (ends a Python loop)."""
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(exception)
        )


def _limited_in_thread(function: Callable, seconds: float):
    """Run ``function()`` in a daemon thread; raise :class:`TimedOut` if it outlasts ``seconds``."""
    outcome: dict = {}

    def target() -> None:
        try:
            outcome["value"] = function()
        except BaseException as error:  # handed over to the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=target, name="student-function", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        _async_raise(worker, TimedOut)  # stops a Python loop; a sleep ends on its own
        raise TimedOut()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


@contextmanager
def _alarm(seconds: float):
    """Raise :class:`TimedOut` in this (main) thread after ``seconds``, then every 50 ms."""
    state = {"armed": True}

    def on_alarm(signum, frame):
        if state["armed"]:
            raise TimedOut()

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.05)
    try:
        yield
    finally:
        state["armed"] = False  # first: an alarm that fires now is ignored
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def limited(function: Callable, seconds: float):
    """``function()``, or :class:`TimedOut` once it has run ``seconds``: a repeating alarm in the
    main thread, an abandoned helper thread elsewhere."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
        with _alarm(seconds):
            return function()
    return _limited_in_thread(function, seconds)
