"""Checkers for section 06's masks: the streaming (look-back, look-ahead) mask and the stride mask.

``check_streaming_mask`` grades exercise 1 of ``06_attention_variants.ipynb``: the student writes
``my_streaming_mask(n, past, future)``, True where ``i - past <= j <= i + future`` (query ``i``
sees ``past`` frames back and ``future`` ahead, as in streaming speech recognition); the lecture
derives only symmetric windows. ``check_stride_mask`` checks ``my_stride_mask(n, stride)``, the
mask the lecture derives (kept for instructors who set it as a warm-up).
"""

from __future__ import annotations

import torch

from ._base import Mistake, call, checker, expect_tensor, probe_generator, secret_fingerprint

__all__ = ["check_streaming_mask", "check_stride_mask"]

# (n, stride) probed, the most telling first; stride 1 (full attention) and stride >= n (only
# the diagonal) are the edge cases.
_CASES = ((8, 3), (6, 2), (1, 1), (5, 1), (4, 6), (10, 4))
# The hidden tests' extra cases, never shown: a stride equal to n, a prime stride, longer rows.
_HIDDEN_CASES = ((7, 7), (13, 5), (2, 3), (16, 4), (9, 2))


def _show(mask: torch.Tensor) -> str:
    return "\n".join(" ".join("1" if cell else "0" for cell in row) for row in mask.tolist())


def _expected(n: int, stride: int) -> torch.Tensor:
    offsets = torch.arange(n)[:, None] - torch.arange(n)[None, :]  # (n, n): i - j
    return offsets % stride == 0


def _name_mistake(mask: torch.Tensor, n: int, stride: int) -> None:
    expected = _expected(n, stride)
    if torch.equal(mask, expected):
        return
    shown = (f"For n = {n}, stride = {stride} you returned (row i = query, column j = key):\n"
             + _show(mask) + "\nexpected:\n" + _show(expected))
    if torch.equal(mask, ~expected):
        raise Mistake(
            "inverted_polarity",
            "your mask is True where attention is blocked; the course's masks are True = may "
            "attend. Negate it.\n" + shown,
        )
    offsets = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    if torch.equal(mask, (offsets % stride == 0) & (offsets >= 0)):
        raise Mistake(
            "one_direction",
            "only keys j <= i are allowed: that is the causal (decoder) form. Stride attention "
            "here looks both ways: every j with (i - j) a multiple of the stride.\n" + shown,
        )
    if torch.equal(mask, (torch.arange(n)[None, :] % stride == 0).expand(n, n)):
        raise Mistake(
            "absolute_positions",
            "your mask keeps the keys whose *position* is a multiple of the stride; the pattern "
            "is about the *distance*: (i - j) % stride == 0.\n" + shown,
        )
    if not bool(mask.diagonal().all()):
        raise Mistake(
            "diagonal_missing",
            "a position must attend to itself (distance 0 is a multiple of every stride).\n" + shown,
        )
    raise Mistake("wrong_values", "some cells differ from (i - j) % stride == 0.\n" + shown)


@checker("stride_mask")
def check_stride_mask(student_fn, hidden: bool = False) -> str:
    """Check ``student_fn(n, stride) -> bool (n, n)``, True where ``(i - j) % stride == 0``.

    ``hidden=True`` adds (n, stride) cases the student never saw.

    Mistake codes: ``not_implemented``, ``raised``, ``wrong_return_type``, ``wrong_shape``,
    ``wrong_dtype``, ``inverted_polarity``, ``one_direction`` (causal), ``absolute_positions``
    (``j % stride``), ``diagonal_missing``, ``wrong_values``.
    """
    cases = _CASES + (_HIDDEN_CASES if hidden else ())
    for n, stride in cases:
        mask = call(student_fn, n, stride)
        expect_tensor(mask, f"stride_mask({n}, {stride})", shape=(n, n))
        if mask.dtype != torch.bool:
            raise Mistake(
                "wrong_dtype",
                f"stride_mask({n}, {stride}) returned dtype {mask.dtype}; masks are torch.bool "
                "(True = may attend): compare with `== 0` instead of computing numbers.",
            )
        _name_mistake(mask.cpu(), n, stride)
    shown = ", ".join(f"({n}, {s})" for n, s in _CASES)
    extra = f" and {len(_HIDDEN_CASES)} hidden cases" if hidden else ""
    return f"correct for (n, stride) = {shown}{extra}: (i - j) % stride == 0, both directions."


# (n, past, future): a window in both directions, a causal window, the diagonal alone, a window
# wider than the sequence, look-ahead only, a single frame.
_STREAMING_CASES = ((6, 2, 1), (8, 3, 0), (5, 0, 0), (4, 10, 10), (7, 0, 2), (1, 0, 0))
_STREAMING_HIDDEN = ((12, 4, 2), (9, 1, 3), (3, 5, 0), (10, 0, 9), (16, 7, 7))


def _drawn_streaming_cases() -> tuple:
    """With the instructor's grading secret, three more hidden cases drawn from it; without
    one, none (the hidden cases are then the public ones above)."""
    if secret_fingerprint() is None:
        return ()
    generator = probe_generator(0, "streaming cases")
    cases = []
    for _ in range(3):
        n = int(torch.randint(2, 21, (1,), generator=generator))
        past, future = (int(v) for v in torch.randint(0, n + 2, (2,), generator=generator))
        cases.append((n, past, future))
    return tuple(cases)


def _streaming(n: int, past: int, future: int) -> torch.Tensor:
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # (n, n): j - i
    return (offsets >= -past) & (offsets <= future)


def _name_streaming_mistake(mask: torch.Tensor, n: int, past: int, future: int) -> None:
    expected = _streaming(n, past, future)
    if torch.equal(mask, expected):
        return
    shown = (f"For n = {n}, past = {past}, future = {future} you returned (row i = query, "
             "column j = key):\n" + _show(mask) + "\nexpected:\n" + _show(expected))
    offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # j - i
    if torch.equal(mask, ~expected):
        raise Mistake("inverted_polarity", "your mask is True where attention is blocked; the "
                      "course's masks are True = may attend. Negate it.\n" + shown)
    if torch.equal(mask, expected.T):
        raise Mistake("past_future_swapped", "your window looks `future` frames back and `past` "
                      "frames ahead: row i is the query, so the keys it may see are j from "
                      "i - past to i + future.\n" + shown)
    if future > 0 and torch.equal(mask, _streaming(n, past, 0)):
        raise Mistake("future_ignored", f"your window never looks ahead: with future = {future} "
                      f"query i also sees keys i + 1 ... i + {future}.\n" + shown)
    ends = (offsets == -past) | (offsets == future)  # the window's two ends
    if not torch.equal(mask, expected) and torch.equal(mask | ends, expected) and bool(
            mask.diagonal().all()):
        raise Mistake("boundary_excluded", "an end of the window is missing: query i may attend "
                      "to key i - past and to key i + future too (<=, not <).\n" + shown)
    if not bool(mask.diagonal().all()):
        raise Mistake("diagonal_missing", "a frame must attend to itself (distance 0 is inside "
                      "every window).\n" + shown)
    raise Mistake("wrong_values", "some cells differ from i - past <= j <= i + future.\n" + shown)


@checker("streaming_mask")
def check_streaming_mask(student_fn, hidden: bool = False) -> str:
    """Check ``student_fn(n, past, future) -> bool (n, n)``, True where ``i - past <= j <= i +
    future``; ``hidden=True`` adds cases the student never saw.

    Mistake codes: ``not_implemented``, ``raised``, ``wrong_return_type``, ``wrong_shape``,
    ``returned_none``, ``wrong_dtype``, ``inverted_polarity``, ``past_future_swapped`` (the
    transpose), ``boundary_excluded`` (``<`` for ``<=`` at one end or both), ``future_ignored``
    (a causal window), ``diagonal_missing``, ``wrong_values``.
    """
    hidden_cases = _STREAMING_HIDDEN + _drawn_streaming_cases() if hidden else ()
    for n, past, future in _STREAMING_CASES + hidden_cases:
        mask = call(student_fn, n, past, future)
        label = f"streaming_mask({n}, {past}, {future})"
        expect_tensor(mask, label, shape=(n, n))
        if mask.dtype != torch.bool:
            raise Mistake("wrong_dtype", f"{label} returned dtype {mask.dtype}; masks are "
                          "torch.bool (True = may attend): build them from comparisons.")
        _name_streaming_mistake(mask.cpu(), n, past, future)
    extra = f" and {len(hidden_cases)} hidden cases" if hidden else ""
    return (f"correct for {len(_STREAMING_CASES)} (n, past, future) cases{extra}, the causal "
            "window and the diagonal alone included.")
