"""Checker for the exercise of section 05: the causal mask of masked self-attention.

Used in ``05_transformer_decoder.ipynb``. The student writes ``my_causal_mask(n)`` with the
signature of :func:`lectures_lib.attention.causal_mask` (without the optional ``device``).
"""

from __future__ import annotations

import torch

from ._base import Mistake, call, checker, expect_tensor

__all__ = ["check_causal_mask"]

# Sizes probed, the most telling first (n = 4 shows every triangle clearly); n = 1 is the edge
# case where the only cell is the diagonal.
_SIZES = (4, 1, 2, 3, 7)


def _show(mask: torch.Tensor) -> str:
    """Small bool mask as rows of 1/0, for messages."""
    return "\n".join(" ".join("1" if cell else "0" for cell in row) for row in mask.tolist())


def _check_dtype(mask: torch.Tensor, n: int) -> None:
    if mask.dtype == torch.bool:
        return
    # An additive mask: 0 where allowed, -inf (or a large negative number) where blocked.
    if mask.is_floating_point() and (mask < 0).any() and ((mask == 0) | (mask < 0)).all():
        raise Mistake(
            "additive_float_mask",
            f"causal_mask({n}) returned a float mask of 0 and negative entries: that is an "
            "*additive* mask (0 where allowed, -inf where blocked), added to the scores before "
            "softmax. The "
            "course's masks are boolean, True = may attend (the convention of "
            "F.scaled_dot_product_attention). Return `float_mask == 0`, or build it with "
            "`torch.ones(n, n, dtype=torch.bool).tril()`.",
        )
    raise Mistake(
        "wrong_dtype",
        f"causal_mask({n}) returned dtype {mask.dtype}; the course's masks are torch.bool (True = "
        "may attend). A 0/1 number mask would be read as a float additive mask by PyTorch. "
        "Use dtype=torch.bool or convert with `.bool()`.",
    )


def _check_values(mask: torch.Tensor, n: int) -> None:
    expected = torch.ones(n, n, dtype=torch.bool).tril()  # (n, n): True on and below the diagonal
    if torch.equal(mask, expected):
        return
    future = torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)  # cells j > i (later keys)
    shown = f"For n = {n} you returned (row i = query, column j = key, 1 = may attend):\n" + _show(
        mask
    ) + "\nexpected:\n" + _show(expected)
    # Checked before the polarity: for n = 1 both mistakes give the same all-False mask.
    if torch.equal(mask, expected & ~torch.eye(n, dtype=torch.bool)):
        raise Mistake(
            "diagonal_missing",
            "the diagonal is False, so position i may not attend to itself (and the first "
            "position may attend to nothing at all). Causal means j <= i, not j < i: use "
            "`tril()` with the default diagonal=0.\n" + shown,
        )
    if torch.equal(mask, future):
        raise Mistake(
            "inverted_polarity",
            "your mask is True exactly where attention must be *blocked* (j > i): that is the "
            "convention of nn.MultiheadAttention's boolean attn_mask (True = blocked). The course "
            "uses the opposite, True = may attend: negate it (`~mask`), i.e. the lower triangle "
            "including the diagonal.\n" + shown,
        )
    if (mask & future).any():
        raise Mistake(
            "future_visible",
            "some query i may attend to a later key j > i (a cell above the diagonal is True), "
            "so the decoder could look at tokens it has not produced yet: the output at "
            "position i would change when a later input changes. Keep only the lower triangle "
            "(j <= i): `torch.ones(n, n, dtype=torch.bool).tril()`.\n" + shown,
        )
    raise Mistake(
        "wrong_values",
        "some allowed cell (j <= i) is False: every position must be able to attend to itself "
        "and to every earlier position.\n" + shown,
    )


@checker("causal_mask")
def check_causal_mask(student_fn) -> str:
    """Check ``student_fn(n) -> bool (n, n)`` is True on and below the diagonal (j <= i).

    Mistake codes: ``not_implemented``, ``raised``, ``wrong_return_type`` (not a tensor),
    ``wrong_shape``, ``additive_float_mask`` (0 / -inf floats), ``wrong_dtype`` (ints, 0/1
    floats), ``inverted_polarity`` (True = blocked, as in ``nn.MultiheadAttention``),
    ``diagonal_missing`` (strict lower triangle), ``future_visible`` (a cell above the diagonal
    allowed, e.g. all True or the upper triangle), ``wrong_values`` (anything else).
    """
    for n in _SIZES:
        mask = call(student_fn, n)
        expect_tensor(mask, f"causal_mask({n})")
        if tuple(mask.shape) != (n, n):
            raise Mistake(
                "wrong_shape",
                f"causal_mask({n}) should have shape ({n}, {n}) (queries x keys), got "
                f"{tuple(mask.shape)}. The batch and head dimensions are added by broadcasting, "
                "not by this function.",
            )
        _check_dtype(mask, n)
        _check_values(mask.cpu(), n)
    sizes = ", ".join(str(n) for n in _SIZES)
    return f"correct for n = {sizes}: position i may attend to every j <= i, never to j > i."
