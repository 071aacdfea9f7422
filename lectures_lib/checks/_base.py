"""The machinery every checker shares: results, safe calls of student code, named mistakes.

A checker is written as a plain function ``body(student_fn)`` that probes the student's function
through :func:`call` and raises :class:`Mistake` with a code and a learner-readable message at the
first problem it finds. :func:`checker` turns it into ``check_<name>(student_fn) -> CheckResult``,
which never raises because of the student's code.
"""

from __future__ import annotations

import html
import os
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps

import torch

__all__ = ["CheckResult", "Mistake", "checker", "call", "expect_tensor", "NOT_IMPLEMENTED"]

NOT_IMPLEMENTED = "not_implemented"


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

    def __str__(self) -> str:
        status = "PASSED" if self.passed else "FAILED"
        return f"[{status}] {self.name}: {self.message}"

    def __repr__(self) -> str:
        return str(self)

    def __bool__(self) -> bool:
        return self.passed

    def _repr_html_(self) -> str:
        colour, border, status = (
            ("#e8f5e9", "#2e7d32", "passed") if self.passed else ("#fdecea", "#c62828", "failed")
        )
        return (
            f'<div style="background:{colour};border-left:4px solid {border};padding:6px 10px;'
            f'font-family:sans-serif"><b>{html.escape(self.name)}: {status}</b><br>'
            f"{html.escape(self.message).replace(chr(10), '<br>')}</div>"
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


def call(student_fn: Callable, *args, **kwargs):
    """Call the student's function on *copies* of the arguments.

    Raises :class:`Mistake` when it is not implemented yet, raises any other exception, or
    modifies its inputs in place. The caller's tensors are never touched.
    """
    originals = (_clone(args), _clone(kwargs))
    given = (_clone(args), _clone(kwargs))
    try:
        result = student_fn(*given[0], **given[1])
    except NotImplementedError:
        raise Mistake(
            NOT_IMPLEMENTED,
            "not implemented yet: replace `raise NotImplementedError` with your code and run the "
            "cell again.",
        ) from None
    # The student's code crashed: report it, never re-raise. SystemExit too (`exit()`,
    # `sys.exit()` in a function must not end the checker); KeyboardInterrupt still stops it.
    except (Exception, SystemExit) as error:
        where = _student_frame(error)
        raise Mistake(
            "raised",
            f"your function raised {type(error).__name__}: {error} (line {where.lineno} of "
            f"{where.name}). It was called with "
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
    return result


def _describe(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor of shape {tuple(value.shape)}"
    return repr(value)


def expect_tensor(value, what: str, shape: tuple[int, ...] | None = None, dtype=None) -> torch.Tensor:
    """Raise :class:`Mistake` unless ``value`` is a tensor (of ``shape``/``dtype`` when given)."""
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


def checker(name: str) -> Callable[[Callable[[Callable], str | None]], Callable[[Callable], CheckResult]]:
    """Decorator: ``body(student_fn) -> success message`` becomes ``check(student_fn) -> CheckResult``."""

    def decorate(body: Callable[[Callable], str | None]) -> Callable[[Callable], CheckResult]:
        @wraps(body)
        def check(student_fn: Callable) -> CheckResult:
            if not callable(student_fn):
                return CheckResult(
                    name, False,
                    f"expected your function itself (e.g. `my_{name}`), got "
                    f"{type(student_fn).__name__}. Pass the function, do not call it.",
                    "not_callable",
                )
            try:
                with torch.random.fork_rng(devices=[]):  # checks never change the caller's RNG
                    torch.manual_seed(1234)
                    message = body(student_fn)
            except Mistake as mistake:
                return CheckResult(name, False, str(mistake), mistake.code)
            except Exception as error:  # a bug in the checker must not look like the student's
                return CheckResult(
                    name, False,
                    f"the checker could not finish ({type(error).__name__}: {error}); "
                    "this is probably a bug in the checker, please report it.",
                    "checker_error",
                )
            return CheckResult(name, True, message or "all checks passed.")

        return check

    return decorate
