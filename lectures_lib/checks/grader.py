"""What the course's grader uses of the checkers: their one public interface to it.

The grade command (``course_tools.grading``) runs these checkers in its own process against a
submission that runs elsewhere (a sandbox). Checkers and grader share a few facts, named here
once; the grader imports them from this module only, never from the checkers' private modules:

- the instructor's grading secret: its environment variable :data:`SECRET_ENV` and its
  :func:`secret_fingerprint` (the public name of the secret in use, e.g. for a cluster's workers
  to agree on it);
- the task variant a submission is graded on: :func:`task_key` names it from the submission's
  content and the secret, :func:`set_task_variant` / :func:`task_variant` set and read it (the
  trained exercises draw their data from it);
- the time limits: :class:`TimedOut` (what a call past its limit raises), :func:`timed_elsewhere`
  (the student's code runs in another process that times every call, so the checker sets no
  alarm of its own), :func:`call_timeout` (the running check's limit for one call), and
  :func:`graders_own_time` / :func:`own_time_listener`: a checker that does long work of the
  course's own in the grader (08's homework trains the submitted recipe) says so, and the grade
  command does not count that time against the submission's limit;
- what the student's code prints: :class:`CappedOutput` keeps its first characters, as a check
  does, in the sandbox's worker too.

A submission's sandbox gets this module too (``course_tools.grading.sandbox._student_view``):
it holds no checker, reference or probe, and the secret itself never reaches the sandbox.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from . import _base
from ._base import _Capture as CappedOutput
from ._base import timed_elsewhere
from ._secrets import SECRET_ENV, secret_fingerprint, set_task_variant, task_key, task_variant
from ._time_limit import TimedOut

__all__ = ["SECRET_ENV", "secret_fingerprint", "task_key", "set_task_variant", "task_variant",
           "TimedOut", "timed_elsewhere", "call_timeout", "CappedOutput", "graders_own_time",
           "own_time_listener"]

_LISTENERS: list[Callable[[float], None]] = []


def call_timeout(default: float) -> float:
    """The running check's limit in seconds for one call of the student's code (a training
    check allows longer); ``default`` outside a check."""
    run = getattr(_base._current, "run", None)  # set while a check runs
    return float(run.timeout) if run is not None else float(default)


@contextmanager
def graders_own_time() -> Iterator[None]:
    """Within: the grader's own work, not the submission's (a recipe the checker trains with the
    course's code); when it ends, every :func:`own_time_listener` hears its wall seconds."""
    start = time.monotonic()
    try:
        yield
    finally:
        spent = time.monotonic() - start
        for listener in list(_LISTENERS):
            listener(spent)


@contextmanager
def own_time_listener(listener: Callable[[float], None]) -> Iterator[None]:
    """Within: ``listener(seconds)`` is called after each :func:`graders_own_time` block (the
    grade command moves the submission's deadline by that much)."""
    _LISTENERS.append(listener)
    try:
        yield
    finally:
        _LISTENERS.remove(listener)
