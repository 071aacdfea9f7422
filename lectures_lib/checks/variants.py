"""Checker for the exercise of section 06: the stride attention mask.

Used in ``06_attention_variants.ipynb``. The student writes ``my_stride_mask(n, stride)`` with the
signature of :func:`lectures_lib.variants.stride_mask` (without the optional ``device``).
"""

from __future__ import annotations

import torch

from ._base import Mistake, call, checker, expect_tensor

__all__ = ["check_stride_mask"]

# (n, stride) probed, the most telling first; stride 1 (full attention) and stride >= n (only
# the diagonal) are the edge cases.
_CASES = ((8, 3), (6, 2), (1, 1), (5, 1), (4, 6), (10, 4))


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
def check_stride_mask(student_fn) -> str:
    """Check ``student_fn(n, stride) -> bool (n, n)``, True where ``(i - j) % stride == 0``.

    Mistake codes: ``not_implemented``, ``raised``, ``wrong_return_type``, ``wrong_shape``,
    ``wrong_dtype``, ``inverted_polarity``, ``one_direction`` (causal), ``absolute_positions``
    (``j % stride``), ``diagonal_missing``, ``wrong_values``.
    """
    for n, stride in _CASES:
        mask = call(student_fn, n, stride)
        expect_tensor(mask, f"stride_mask({n}, {stride})", shape=(n, n))
        if mask.dtype != torch.bool:
            raise Mistake(
                "wrong_dtype",
                f"stride_mask({n}, {stride}) returned dtype {mask.dtype}; masks are torch.bool "
                "(True = may attend): compare with `== 0` instead of computing numbers.",
            )
        _name_mistake(mask.cpu(), n, stride)
    cases = ", ".join(f"({n}, {s})" for n, s in _CASES)
    return f"correct for (n, stride) = {cases}: (i - j) % stride == 0, both directions."
