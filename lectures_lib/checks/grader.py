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
  alarm of its own) and :func:`call_timeout` (the running check's limit for one call);
- what the student's code prints: :class:`CappedOutput` keeps its first characters, as a check
  does, in the sandbox's worker too.

A submission's sandbox gets this module too (``course_tools.grading.sandbox._student_view``):
it holds no checker, reference or probe, and the secret itself never reaches the sandbox.
"""

from __future__ import annotations

from . import _base
from ._base import _Capture as CappedOutput
from ._base import timed_elsewhere
from ._secrets import SECRET_ENV, secret_fingerprint, set_task_variant, task_key, task_variant
from ._time_limit import TimedOut

__all__ = ["SECRET_ENV", "secret_fingerprint", "task_key", "set_task_variant", "task_variant",
           "TimedOut", "timed_elsewhere", "call_timeout", "CappedOutput"]


def call_timeout(default: float) -> float:
    """The running check's limit in seconds for one call of the student's code (a training
    check allows longer); ``default`` outside a check."""
    run = getattr(_base._current, "run", None)  # set while a check runs
    return float(run.timeout) if run is not None else float(default)
