"""The machinery every checker shares: results, safe calls of student code, named mistakes.

A checker is written as a plain function ``body(student_fn)`` that probes the student's function
through :func:`call` and raises :class:`Mistake` with a code and a learner-readable message at the
first problem it finds. :func:`checker` turns it into ``check_<name>(student_fn) -> CheckResult``,
which never raises because of the student's code.

Grading-proof calls. Every call of the student's function through :func:`call` runs under a
per-call time limit (``timeout`` seconds, :data:`DEFAULT_TIMEOUT` unless the check is called with
``timeout=``): a ``time.sleep(3600)`` or a ``while True`` loop ends in a "timed out after N s"
failure, never a hang. In the main thread (a notebook kernel, pytest, the grade command) the limit
is a ``SIGALRM`` timer that keeps firing every 50 ms until the call gives up, so an ``except
Exception`` inside the loop cannot swallow it; elsewhere the call runs in a helper thread that is
abandoned (and sent an asynchronous exception) when time is up (:mod:`._time_limit`). Only code that catches
``BaseException`` in a loop, or one C call that runs for ever, can outlast it: the grade command's
per-submission limit (a separate process) is the backstop for those. Whatever the function prints
is captured (not shown in the notebook); ``result.output`` keeps a short excerpt and the message
mentions it.
"""

from __future__ import annotations

import hashlib
import hmac
import html
import inspect
import io
import os
import sys
import threading
import traceback
from collections.abc import Callable
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from dataclasses import dataclass
from functools import wraps

import torch

from ._secrets import (
    SECRET_ENV,
    _secret,
    secret_fingerprint,
    set_task_variant,
    task_key,
    task_variant,
    task_variant_generator,
)
from ._time_limit import TimedOut, limited

__all__ = [
    "CheckResult",
    "Mistake",
    "checker",
    "call",
    "expect_tensor",
    "expect_finite",
    "NOT_IMPLEMENTED",
    "TIMED_OUT",
    "DEFAULT_TIMEOUT",
    "SECRET_ENV",
    "probe_seed",
    "probe_generator",
    "secret_fingerprint",
    "task_key",
    "set_task_variant",
    "task_variant",
    "task_variant_generator",
]

NOT_IMPLEMENTED = "not_implemented"
TIMED_OUT = "timed_out"
# Seconds one call of the student's function may take. Every exercise's reference runs in well
# under 0.1 s; the limit only has to stop a loop or a sleep, and leave room for a slow machine.
# The grade command sets LECTURES_CHECK_TIMEOUT for the kernel it starts.
DEFAULT_TIMEOUT = float(os.environ.get("LECTURES_CHECK_TIMEOUT", "10"))
# How much of what the student's function printed is kept in ``result.output``.
OUTPUT_EXCERPT = 160
def probe_seed(public_seed: int, what: str = "") -> int:
    """The seed a checker draws probes (or held-out data) with.

    Without a grading secret: ``public_seed`` itself, the probes anyone can read in this package
    (a student can precompute them). With the instructor's secret in ``LECTURES_GRADING_SECRET``
    (``python -m course_tools grade --secret-file PATH`` sets it in the grader, never in the
    sandbox): HMAC-SHA256 of the secret, the running check's name, ``what`` and ``public_seed``,
    so each exercise's probes are new values of the same shapes that nobody without the secret
    can compute. A correct solution passes either way.
    """
    secret = _secret()
    if secret is None:
        return int(public_seed)
    run = getattr(_current, "run", None)
    name = getattr(run, "name", "")
    message = f"{name}/{what}/{int(public_seed)}".encode()
    digest = hmac.new(secret, message, hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big") & (2**63 - 1)


def probe_generator(public_seed: int, what: str = "") -> torch.Generator:
    """A CPU ``torch.Generator`` seeded with :func:`probe_seed` (``public_seed``, ``what``)."""
    return torch.Generator().manual_seed(probe_seed(public_seed, what))


@dataclass(frozen=True)
class CheckResult:
    """Outcome of a check: ``.passed``, a ``.message`` for the learner and a ``.mistake`` code.

    ``mistake`` is ``None`` when the check passed, otherwise a short identifier such as
    ``"missing_scaling"`` or ``"not_implemented"`` (tests and graders can rely on it).
    ``str(result)`` is the full message; in a notebook the result renders as a coloured box.
    """

    name: str
    passed: bool
    message: str
    mistake: str | None = None
    output: str = ""  # a short excerpt of what the student's function printed (captured)

    def _localised(self) -> tuple[str, str] | None:
        """(verdict, message) in the notebook's language, None in English (checks/messages.py)."""
        from .messages import localise

        return localise(self.passed, self.message, self.mistake)

    def __str__(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        local = self._localised()
        if local is not None:  # "[PASSED] name: " stays first: graders read that prefix
            return f"[{status}] {self.name}: {local[0]}。{local[1]}"
        return f"[{status}] {self.name}: {self.message}"

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return self.passed

    def _repr_html_(self) -> str:
        colour, border, status = (
            ("#e8f5e9", "#2e7d32", "passed") if self.passed else ("#fdecea", "#c62828", "failed")
        )
        local = self._localised()
        status, message = (status, self.message) if local is None else local
        return (
            f'<div style="background:{colour};border-left:4px solid {border};padding:6px 10px;'
            f'font-family:sans-serif"><b>{html.escape(self.name)}: {status}</b><br>'
            f"{html.escape(message).replace(chr(10), '<br>')}</div>"
        )


class Mistake(Exception):
    """Raised inside a checker body: ``code`` names the mistake, ``args[0]`` explains it."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _clone(value):
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _same(a, b) -> bool:
    """True when ``b`` still holds what ``a`` holds (tensors bit for bit, NaNs included)."""
    if isinstance(a, torch.Tensor):
        return (
            isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
            and bool(torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, equal_nan=True, rtol=0, atol=0)))
        )
    if isinstance(a, (list, tuple)):
        return (
            isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(_same(x, y) for x, y in zip(a, b, strict=True))
        )
    if isinstance(a, dict):  # keyword arguments: a mask passed as ``mask=`` is checked too
        return (
            isinstance(b, dict)
            and a.keys() == b.keys()
            and all(_same(a[key], b[key]) for key in a)
        )
    return True


# Frames in these folders are never the student's: torch's own code and this package.
_NOT_STUDENT_CODE = tuple(
    os.path.dirname(os.path.abspath(path)) + os.sep
    for path in (torch.__file__, os.path.dirname(os.path.abspath(__file__)))
)


def _student_frame(error: BaseException) -> traceback.FrameSummary:
    """The deepest frame of the traceback that is the student's code, not torch's or ours."""
    frames = traceback.extract_tb(error.__traceback__)
    for frame in reversed(frames):
        if not os.path.abspath(frame.filename).startswith(_NOT_STUDENT_CODE):
            return frame
    return frames[-1]


def _student_location(error: BaseException) -> tuple[int, str]:
    """(line, function) where the student's code raised: the traceback's deepest student frame,
    or what the grade command's sandbox reported (the code ran in another process)."""
    reported = getattr(error, "student_location", None)
    if isinstance(reported, tuple) and len(reported) == 2:
        return reported
    where = _student_frame(error)
    return where.lineno, where.name


class _Run:
    """What the current check has seen: its time limit and the output captured so far."""

    def __init__(self, timeout: float = DEFAULT_TIMEOUT, name: str = "") -> None:
        self.timeout = timeout
        self.name = name  # the check's name: part of what a grading secret's seeds derive from
        self.printed = _Capture()
        self.capture = True  # False while a training function runs: its progress bar shows


class _Capture(io.TextIOBase):
    """A write-only text stream that keeps the first ``limit`` characters and counts the rest
    (a check's capture; the sandbox's worker's too, as ``grader.CappedOutput``)."""

    def __init__(self, limit: int = 4 * OUTPUT_EXCERPT) -> None:
        self.limit = limit
        self.kept: list[str] = []
        self.size = 0
        self.total = 0

    def writable(self) -> bool:
        return True

    def write(self, text) -> int:
        text = str(text)
        self.total += len(text)
        if self.size < self.limit:
            self.kept.append(text[: self.limit - self.size])
            self.size += len(self.kept[-1])
        return len(text)

    def take(self) -> str:
        """The characters kept so far; the stream starts again empty."""
        text = "".join(self.kept)
        self.kept, self.size, self.total = [], 0, 0
        return text

    def excerpt(self) -> str:
        text = "".join(self.kept).strip()
        if len(text) > OUTPUT_EXCERPT or self.total > self.size:
            text = text[:OUTPUT_EXCERPT].rstrip() + " ..."
        return text


_current = threading.local()


def _run() -> _Run:
    """The running check's :class:`_Run`; outside a check (tests, notebooks calling
    :func:`call`), a fresh one with the defaults that is *not* installed: only a check's run may
    be read as a check's limit by others (the grader's stand-ins for the sandbox's objects)."""
    run = getattr(_current, "run", None)
    return _Run() if run is None else run


@contextmanager
def running(run: _Run | None = None):
    """Within: ``run`` (default: the current check's, or a fresh one) is the current run."""
    outer = getattr(_current, "run", None)
    _current.run = run or outer or _Run()
    try:
        yield _current.run
    finally:
        _current.run = outer


@contextmanager
def timed_elsewhere():
    """Within: the student's code runs in another process whose session times every call
    (the grade command's sandbox, on a clock a busy machine does not speed up:
    :mod:`course_tools.grading.sandbox._fair_clock`), so :func:`call` sets no wall-clock alarm here."""
    before = getattr(_current, "timed_elsewhere", False)
    _current.timed_elsewhere = True
    try:
        yield
    finally:
        _current.timed_elsewhere = before


def _import_before_the_clock() -> None:
    """Import what PyTorch imports lazily on first use, before a time limit is armed.

    ``torch._dynamo`` is imported by the first call of any function that
    ``torch._compile._disable_dynamo`` wraps (every optimizer's ``add_param_group``, so the first
    ``torch.optim.Adam(...)``): about 2 s of CPU, 4-7 s on a busy machine. Inside a limit it
    made the first checked call that builds an optimizer time out under load, and a
    :class:`TimedOut` raised mid-import could leave a half-imported torch behind. Imported once,
    outside every limit."""
    if "torch._dynamo" not in sys.modules:
        import torch._dynamo  # noqa: F401


def _call_limited(function: Callable, seconds: float):
    """``function()`` with a time limit, printing into the current check's capture."""
    run = _run()
    if getattr(_current, "timed_elsewhere", False):
        limit = lambda: function()  # noqa: E731 - the session raises TimedOut
    else:
        _import_before_the_clock()
        limit = lambda: limited(function, seconds)  # noqa: E731
    if not run.capture:
        return limit()
    with redirect_stdout(run.printed), redirect_stderr(run.printed):
        return limit()


def call(student_fn: Callable, *args, **kwargs):
    """Call the student's function on *copies* of the arguments, with a time limit.

    Raises :class:`Mistake` when it is not implemented yet, raises any other exception, runs
    longer than the check's time limit (``timed_out``), returns ``None`` (``returned_none``: a
    forgotten ``return``), or modifies its inputs in place. The caller's tensors are never touched.
    """
    originals = (_clone(args), _clone(kwargs))
    given = (_clone(args), _clone(kwargs))
    seconds = _run().timeout
    try:
        result = _call_limited(lambda: student_fn(*given[0], **given[1]), seconds)
    except TimedOut:
        raise Mistake(
            TIMED_OUT,
            f"timed out after {seconds:g} s: your function did not return within {seconds:g} s "
            + ("when called with " + ", ".join(_describe(a) for a in args) if args else
               "when called") + ". Look for an endless loop (a `while` whose condition never changes), a "
            "`time.sleep`, or far more work than the inputs need.",
        ) from None
    except NotImplementedError:
        raise Mistake(
            NOT_IMPLEMENTED,
            "not implemented yet: replace `raise NotImplementedError` with your code and run the "
            "cell again.",
        ) from None
    # The student's code crashed: report it, never re-raise. SystemExit and any other
    # BaseException too (`exit()` in a function must not end the checker); only
    # KeyboardInterrupt (the user, or a grader's interrupt) still stops it.
    except KeyboardInterrupt:
        raise
    except BaseException as error:
        line, name = _student_location(error)
        raise Mistake(
            "raised",
            f"your function raised {type(error).__name__}: {error} (line {line} of "
            f"{name}). It was called with "
            + ", ".join(_describe(a) for a in args)
            + ".",
        ) from None
    if not (_same(originals[0], given[0]) and _same(originals[1], given[1])):
        raise Mistake(
            "modified_input",
            "your function changed one of its input tensors in place (e.g. `x /= ...`, "
            "`x.masked_fill_(...)`, `x[...] = ...`). Compute new tensors instead: callers "
            "still need their inputs.",
        )
    if result is None:
        raise Mistake(
            "returned_none",
            "your function returned None: forgot `return`? (A function without a `return` "
            "statement, or one that only prints its result, returns None.) It was called with "
            + ", ".join(_describe(a) for a in args) + ".",
        )
    return result


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return repr(value)


def expect_finite(value: torch.Tensor, what: str) -> torch.Tensor:
    """Raise :class:`Mistake` (``nan`` or ``not_finite``) when ``value`` holds NaN or inf."""
    if value.is_floating_point() or value.is_complex():
        if bool(torch.isnan(value).any()):
            count = int(torch.isnan(value).sum())
            raise Mistake(
                "nan",
                f"{what} contains NaN ({count} of {value.numel()} entries): look for 0 / 0, "
                "sqrt or log of a negative number or 0, or -inf - (-inf) (a row whose every "
                "score was masked with -inf).",
            )
        if not bool(torch.isfinite(value).all()):
            raise Mistake(
                "not_finite",
                f"{what} contains inf: look for a division by zero or exp of a large number.",
            )
    return value


def expect_tensor(value, what: str, shape: tuple[int, ...] | None = None, dtype=None) -> torch.Tensor:
    """Raise :class:`Mistake` unless ``value`` is a tensor (of ``shape``/``dtype`` when given)."""
    if value is None:
        raise Mistake(
            "returned_none",
            f"{what} is None: forgot `return`? (A function that only prints its result, or "
            "computes it without `return`, returns None.)",
        )
    if not isinstance(value, torch.Tensor):
        raise Mistake(
            "wrong_return_type",
            f"{what} should be a torch.Tensor, but your function returned "
            f"{type(value).__name__}.",
        )
    if shape is not None and tuple(value.shape) != tuple(shape):
        raise Mistake(
            "wrong_shape",
            f"{what} should have shape {tuple(shape)}, got {tuple(value.shape)}.",
        )
    if dtype is not None and value.dtype != dtype:
        raise Mistake("wrong_dtype", f"{what} should have dtype {dtype}, got {value.dtype}.")
    return value


def _with_output(result: CheckResult, capture: _Capture) -> CheckResult:
    """``result`` with the excerpt of what the student's function printed, if anything."""
    excerpt = capture.excerpt()
    if not excerpt:
        return result
    message = (
        f"{result.message}\n(Your function printed {capture.total} characters; they are not "
        f"shown while checking. They began: {excerpt!r})"
    )
    return CheckResult(result.name, result.passed, message, result.mistake, excerpt)


def checker(name: str, *, forbid: tuple[str, ...] = (),
            positional_limit: dict[str, int] | None = None,
            ) -> Callable[[Callable[..., str | None]], Callable[..., CheckResult]]:
    """Decorator: ``body(student_fn) -> success message`` becomes ``check(student_fn) -> CheckResult``.

    The check takes keyword options: ``timeout`` (seconds per call of the student's function,
    :data:`DEFAULT_TIMEOUT` by default) and, for the bodies that accept them, ``hidden=True``
    (the hidden tests' extra probes: other shapes, seeds and dtypes than the student saw).

    ``forbid`` states the exercise's rule as names its solution may not use (``"label_smoothing"``:
    neither as a keyword, a name nor an attribute); ``positional_limit`` caps
    the positional arguments of a call (``{"cross_entropy": 7}``: the 8th is ``label_smoothing``).
    They are attached to the check (``check.forbidden``, ``check.positional_limit``); the grade
    command enforces them on the submission's source (a checker cannot see how an answer was
    computed).
    """

    def decorate(body: Callable[..., str | None]) -> Callable[..., CheckResult]:
        accepts_hidden = "hidden" in inspect.signature(body).parameters

        @wraps(body)
        def check(student_fn: Callable, *, timeout: float | None = None,
                  hidden: bool = False) -> CheckResult:
            if not callable(student_fn):
                return CheckResult(
                    name, False,
                    f"expected your function itself (e.g. `my_{name}`), got "
                    f"{type(student_fn).__name__}. Pass the function, do not call it.",
                    "not_callable",
                )
            outer = getattr(_current, "run", None)
            run = _current.run = _Run(DEFAULT_TIMEOUT if timeout is None else float(timeout),
                                      name)
            try:
                with torch.random.fork_rng(devices=[]):  # checks never change the caller's RNG
                    torch.manual_seed(probe_seed(1234, "global"))
                    message = body(student_fn, hidden=hidden) if accepts_hidden else body(
                        student_fn
                    )
            except Mistake as mistake:
                result = CheckResult(name, False, str(mistake), mistake.code)
            except Exception as error:  # a bug in the checker must not look like the student's
                result = CheckResult(
                    name, False,
                    f"the checker could not finish ({type(error).__name__}: {error}); "
                    "this is probably a bug in the checker, please report it.",
                    "checker_error",
                )
            else:
                result = CheckResult(name, True, message or "all checks passed.")
            finally:
                _current.run = outer
            return _with_output(result, run.printed)

        check.forbidden = tuple(forbid)
        check.positional_limit = dict(positional_limit or {})
        return check

    return decorate
