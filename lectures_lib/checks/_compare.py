"""A small engine for checkers that compare the student's function with a reference.

A checker built on it lists its *probes* (arguments to call the function with), its reference and
a *catalogue* of classic mistakes, each a wrong version of the function. On a probe where the
student's answer differs from the reference, the engine first rules out NaN and randomness
(dropout left on), then recomputes every wrong version on that probe and names the mistake whose
answer matches. Used by the exercises of sections 01-05 (``additive``, ``padding``,
``relative``, ``norms``, ``decoder``); its tolerance table (:data:`TOLERANCES`) and comparison
(:func:`agree`, :func:`close`) are every checker's (``attention``, ``multi_head``, ``positional``,
``transformer``, ``windows``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ._base import NOT_IMPLEMENTED, TIMED_OUT, Mistake, call, expect_finite, expect_tensor

__all__ = ["Probe", "Wrong", "agree", "compare", "describe_args"]

# The checkers' one tolerance table: results are compared with the float64 reference at the
# (rtol, atol) of the *coarser* of the inputs' and the result's dtype: a float32 answer (to float32
# or float64 inputs) at float32's, a float64 answer to float64 inputs at float64's, which a
# float64 result carrying only float32 precision fails. Correct float32 implementations (loops,
# einsum, any masking constant) differ by ~1e-6, correct float64 ones by ~1e-15.
TOLERANCES = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (3e-2, 1e-2),
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-9, 1e-11),
}


def coarsest(*dtypes: torch.dtype) -> torch.dtype:
    """The least precise of the given floating dtypes (the one with the largest eps)."""
    return max(dtypes, key=lambda dtype: torch.finfo(dtype).eps)


def close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> bool:
    """Same shape and equal at ``dtype``'s tolerances (:data:`TOLERANCES`; float32's for any
    other dtype)."""
    rtol, atol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    return actual.shape == expected.shape and bool(
        torch.allclose(actual, expected, rtol=rtol, atol=atol)
    )


@dataclass(frozen=True)
class Probe:
    """One call of the student's function: ``args``/``kwargs`` and a title for messages."""

    title: str
    args: tuple
    kwargs: dict = field(default_factory=dict)

    def describe(self, names: Sequence[str] = ()) -> str:
        """The title and every argument's dtype and shape, named by ``names`` (the parameters)."""
        return f"{self.title} ({describe_args(self.args, self.kwargs, names)})"


@dataclass(frozen=True)
class Wrong:
    """A classic mistake: its code, the message naming it, and the wrong version itself."""

    code: str
    message: str
    function: Callable


def describe_args(args: Sequence, kwargs: dict | None = None, names: Sequence[str] = ()) -> str:
    """``q float32 (3, 4), k float32 (5, 6), mask=bool (3, 5)``: each argument with its name
    (``names``, in order; an argument past them is shown unnamed), dtype and shape."""
    def one(value) -> str:
        if isinstance(value, torch.Tensor):
            kind = str(value.dtype).replace("torch.", "")
            return f"{kind} {tuple(value.shape)}"
        if callable(value):
            return getattr(value, "__name__", type(value).__name__)
        return repr(value)

    labels = [*names[: len(args)], *[""] * max(0, len(args) - len(names))]
    parts = [(f"{label} " if label else "") + one(a) for label, a in zip(labels, args)]
    parts += [f"{k}={one(v)}" for k, v in (kwargs or {}).items()]
    return ", ".join(parts)


def _as_tuple(value) -> tuple:
    return value if isinstance(value, tuple) else (value,)


def agree(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The checkers' one comparison: same shape, integers equal, floats close at the tolerances
    of :data:`TOLERANCES` (float64's only when both are float64, else float32's), on the CPU."""
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    if not (a.is_floating_point() or b.is_floating_point()):
        return bool(torch.equal(a.cpu(), b.to(a.dtype).cpu()))
    dtype = torch.float64 if a.dtype == b.dtype == torch.float64 else torch.float32
    return close(a.double().cpu(), b.double().cpu(), dtype)


def _all_close(got: tuple, expected: tuple) -> bool:
    return len(got) == len(expected) and all(agree(g, e) for g, e in zip(got, expected))


def compare(
    student_fn: Callable,
    probes: Sequence[Probe],
    reference: Callable,
    catalogue: Callable[[Probe], list[Wrong]],
    names: Sequence[str],
    hint: str,
) -> None:
    """Raise :class:`Mistake` at the first probe where ``student_fn`` differs from ``reference``.

    ``names`` names the returned values (``("out", "weights")``; one name for a single tensor).
    ``reference(*args, **kwargs)`` returns the same number of tensors. ``hint`` closes the
    message of a difference the catalogue does not recognise.
    """
    parameters = _parameter_names(reference)
    for probe in probes:
        try:
            _compare_one(student_fn, probe, reference, catalogue, names, hint)
        except Mistake as mistake:
            if mistake.code in (NOT_IMPLEMENTED,):
                raise
            if mistake.code == TIMED_OUT:
                raise Mistake(mistake.code,
                              f"{mistake} Seen on {probe.describe(parameters)}.") from None
            raise Mistake(
                mistake.code, str(mistake).rstrip(".") + f". Seen on {probe.describe(parameters)}."
            ) from None


def _parameter_names(function: Callable) -> tuple[str, ...]:
    """The positional parameters of the reference (the names the exercise gives the arguments)."""
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return ()
    return tuple(p.name for p in parameters
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def _unpack(result, names: Sequence[str], expected: tuple) -> tuple:
    got = _as_tuple(result) if len(names) > 1 else (result,)
    if len(names) > 1 and (not isinstance(result, tuple | list) or len(got) != len(names)):
        raise Mistake(
            "wrong_return_type",
            f"return {len(names)} values, ({', '.join(names)}); your function returned "
            f"{type(result).__name__}" + (f" of length {len(got)}" if isinstance(result, tuple | list) else ""),
        )
    for name, value, reference in zip(names, got, expected):
        expect_tensor(value, name)
        if tuple(value.shape) != tuple(reference.shape):
            raise Mistake(
                "wrong_shape",
                f"{name} should have shape {tuple(reference.shape)}, got {tuple(value.shape)}",
            )
        if reference.dtype == torch.bool and value.dtype != torch.bool:
            raise Mistake(
                "wrong_dtype",
                f"{name} should be a torch.bool tensor (True = may attend), got {value.dtype}",
            )
        if reference.is_floating_point() and not value.is_floating_point():
            raise Mistake(
                "wrong_dtype", f"{name} should be floating-point, got {value.dtype}"
            )
        expect_finite(value, name)
    return tuple(got)


def _compare_one(student_fn, probe, reference, catalogue, names, hint) -> None:
    expected = _as_tuple(reference(*probe.args, **probe.kwargs))
    got = _unpack(call(student_fn, *probe.args, **probe.kwargs), names, expected)
    if _all_close(got, expected):
        return
    again = _as_tuple(call(student_fn, *probe.args, **probe.kwargs))
    if not _all_close(tuple(again)[: len(got)], got):
        raise Mistake(
            "nondeterministic",
            "two calls with the same inputs gave different results: your function is random. "
            "Dropout left on? (`F.dropout(x, p)` drops by default, `training=True`; an "
            "`nn.Dropout` module drops until `.eval()`.) The answer must not depend on chance",
        )
    for wrong in catalogue(probe):
        try:
            predicted = _as_tuple(wrong.function(*probe.args, **probe.kwargs))
        except Exception:  # a mistake that cannot even run on this probe is not the one
            continue
        if _all_close(got, predicted):
            raise Mistake(wrong.code, wrong.message)
    diffs = [
        f"{name}: max abs diff {float((g.double() - e.double()).abs().max()):.3g}"
        for name, g, e in zip(names, got, expected)
        if not agree(g, e)
    ]
    raise Mistake("wrong_values", f"differs from the reference ({'; '.join(diffs)}). {hint}")
