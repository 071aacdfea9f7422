r"""Checkers for the section-02 exercises: heads (多头) split and merged (the whole forward pass,
``multi_head_attention``, is checked in :mod:`lectures_lib.checks.multi_head`).

The three exercises of ``02_multi_head_attention.ipynb`` have the library's signatures:

* ``split_heads(x, num_heads)``: ``(batch, seq, d_model)`` -> ``(batch, heads, seq, d_head)``, head
  ``h`` holding features ``h * d_head ... (h + 1) * d_head - 1`` of every position
  (:func:`lectures_lib.attention.split_heads`);
* ``merge_heads(x)``: its inverse, ``(batch, heads, seq, d_head)`` -> ``(batch, seq, heads *
  d_head)``, the concatenation (拼接) ``[b^{i,1}; b^{i,2}; ...]`` of every position
  (:func:`lectures_lib.attention.merge_heads`);
* ``multi_head_attention(x, w_q, w_k, w_v, w_o, num_heads, mask=None) -> (out, weights)``:
  multi-head self-attention with weight matrices in the row convention ``y = x @ W`` and per-head
  weights ``(batch, heads, seq, seq)`` (:func:`lectures_lib.attention.multi_head_attention`).

How the checkers work. Each calls the student's function on fixed *probes* whose sizes all differ
(batch, seq, heads, d_head), so that every rearrangement of the entries shows, and compares the
answer with the reference. When an answer is wrong, it recomputes what each classic mistake would
have returned on that probe (the *diagnostic catalogue*) and names the one that matches.
``split_heads``/``merge_heads`` only move entries, so their probes hold distinct numbers and are
compared exactly. ``tests/test_checks_heads.py`` asserts that the catalogue's predictions differ
from each other and from the right answer on the probes where they are used.

Mistake codes (``result.mistake``) are listed in :data:`MISTAKE_CODES`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..attention import merge_heads as _merge_reference
from ..attention import split_heads as _split_reference
from ._base import Mistake, call, checker

__all__ = ["check_split_heads", "check_merge_heads"]

MISTAKE_CODES: dict[str, str] = {
    "not_implemented": "the function still raises NotImplementedError",
    "timed_out": "the function did not return within the time limit (a loop, a sleep)",
    "returned_none": "the function returned None (a forgotten `return`)",
    "not_callable": "something other than a function was passed to the checker",
    "raised": "the function crashed on one of the probes",
    "modified_input": "an input tensor was changed in place",
    "wrong_signature": "multi_head_attention does not accept the mask argument",
    "wrong_return_type": "not a tensor (split/merge) or not a pair (out, weights) of tensors",
    "wrong_shape": "a result of the wrong shape",
    "wrong_dtype": "split/merge changed the dtype, or multi_head_attention's result is not "
    "floating-point",
    "reshape_without_transpose": "heads and positions reshaped into each other without transpose",
    "transpose_before_reshape": "transposed (seq, d_model) first, then reshaped",
    "heads_mixing_channels": "head h took every num_heads-th feature instead of a contiguous block",
    "scaled_values": "split/merge multiplied the entries by a factor (e.g. 1/sqrt(d_head))",
    "scaled_by_d_model": "scores divided by sqrt(d_model) instead of sqrt(d_head)",
    "missing_scaling": "scores not divided by sqrt(d_head)",
    "missing_output_projection": "the concatenated heads not multiplied by W^O",
    "transposed_weights": "x @ W.T (nn.Linear's layout) instead of x @ W",
    "softmax_wrong_axis": "softmax over the queries instead of the keys",
    "weights_averaged": "weights averaged over the heads (nn.MultiheadAttention's default)",
    "mask_ignored": "the mask has no effect",
    "mask_inverted": "True treated as 'blocked' (PyTorch's nn.MultiheadAttention convention)",
    "wrong_values": "differs from the reference in a way the catalogue does not recognise",
}

_LAYOUT = {
    "reshape_without_transpose": (
        "you reshaped straight between (batch, seq, ...) and (batch, heads, ...) without "
        "transposing: the shape comes out right but positions and heads get mixed. Reshape "
        "(batch, seq, d_model) to (batch, seq, heads, d_head) first, then `.transpose(1, 2)`"
    ),
    "transpose_before_reshape": (
        "you transposed x to (batch, d_model, seq) and reshaped that: the entries of different "
        "features and positions get mixed. Reshape to (batch, seq, heads, d_head) first, then "
        "`.transpose(1, 2)`"
    ),
    "heads_mixing_channels": (
        "head h got features h, h + heads, h + 2·heads, ... (every heads-th feature) instead of "
        "the contiguous block h·d_head ... (h+1)·d_head − 1: the features dimension d_model splits "
        "as (heads, d_head), in that order, not (d_head, heads)"
    ),
}


_MERGE_LAYOUT = {
    "reshape_without_transpose": (
        "you reshaped (batch, heads, seq, d_head) straight to (batch, seq, d_model) without "
        "transposing: the shape comes out right but positions and heads get mixed. Transpose to "
        "(batch, seq, heads, d_head) first (`.transpose(1, 2)`), then reshape"
    ),
    "transpose_before_reshape": (
        "you reshaped to (batch, d_model, seq) and transposed that: the entries of different "
        "positions and features get mixed. Transpose heads and seq first, then reshape"
    ),
    "heads_mixing_channels": (
        "the heads are interleaved feature by feature (feature j of head h landed at h + j·heads) "
        "instead of concatenated: head h's d_head features must form the contiguous block "
        "h·d_head … (h+1)·d_head − 1, i.e. `.transpose(1, 2)` then reshape, not a permute that "
        "puts d_head before heads"
    ),
}


def _distinct(*shape: int) -> torch.Tensor:
    """A float tensor of ``shape`` whose entries are all different (0, 1, 2, ...)."""
    return torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape)


def _describe(shape: tuple[int, ...], names: str) -> str:
    return "(" + ", ".join(f"{n}={s}" for n, s in zip(names.split(), shape, strict=True)) + ")"


def _check_not_scaled(got: torch.Tensor, expected: torch.Tensor, probe: str, what: str) -> None:
    """Raise ``scaled_values`` when ``got`` is ``expected`` times a factor other than 1."""
    got, expected = got.double(), expected.double()
    factor = float((got * expected).sum() / (expected * expected).sum())
    if abs(factor - 1.0) > 1e-6 and torch.allclose(got, factor * expected, rtol=1e-6, atol=1e-6):
        raise Mistake(
            "scaled_values",
            f"for {probe} every entry is where it belongs but multiplied by {factor:.4g}: "
            f"{what} only rearranges entries, it must not scale them. The 1/√d_head scaling "
            "belongs to the attention scores Q Kᵀ, inside the attention itself.",
        )


def _expect_tensor_result(result: object, what: str) -> torch.Tensor:
    if not isinstance(result, torch.Tensor):
        raise Mistake(
            "wrong_return_type",
            f"{what} should return a torch.Tensor, got {type(result).__name__}",
        )
    return result


# ---------------------------------------------------------------------------------------------
# split_heads
# ---------------------------------------------------------------------------------------------

# (batch, seq, d_model), num_heads. The first probe has batch, seq, heads, d_head all different.
SPLIT_PROBES: tuple[tuple[tuple[int, int, int], int], ...] = (
    ((2, 5, 12), 3),
    ((1, 7, 8), 2),
    ((3, 4, 6), 1),
    ((2, 3, 6), 6),
)


def split_catalogue(x: torch.Tensor, num_heads: int) -> list[tuple[str, torch.Tensor]]:
    """``(code, prediction)`` of each classic ``split_heads`` mistake on ``x``."""
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads
    return [
        ("reshape_without_transpose", x.reshape(batch, num_heads, seq, d_head)),
        ("transpose_before_reshape", x.transpose(1, 2).reshape(batch, num_heads, seq, d_head)),
        ("heads_mixing_channels", x.reshape(batch, seq, d_head, num_heads).permute(0, 3, 1, 2)),
    ]


def _check_layout(got: torch.Tensor, x: torch.Tensor, expected: torch.Tensor, probe: str,
                  name: str, shape: str, hints: list[tuple[tuple, str]], verb: str,
                  catalogue: list[tuple[str, torch.Tensor]], layouts: dict[str, str],
                  where: str) -> None:
    """What ``split_heads`` and ``merge_heads`` are checked for on one probe: the shape (with a
    hint for each classic wrong shape), the dtype, then the entries, naming the layout mistake
    whose prediction the answer equals."""
    if got.shape != expected.shape:
        hint = next((text for wrong, text in hints if tuple(got.shape) == wrong), "")
        raise Mistake(
            "wrong_shape",
            f"for {probe} the result should have shape {shape}, got {tuple(got.shape)}.{hint}",
        )
    if got.dtype != x.dtype:
        raise Mistake(
            "wrong_dtype",
            f"for {probe} (dtype {x.dtype}) the result has dtype {got.dtype}: {verb} only moves "
            "entries, keep the dtype",
        )
    got = got.detach().cpu()
    if torch.equal(got, expected):
        return
    for code, prediction in catalogue:
        if not torch.equal(prediction, expected) and torch.equal(got, prediction):
            raise Mistake(code, f"for {probe}: {layouts[code]}.")
    _check_not_scaled(got, expected, probe, name)
    raise Mistake(
        "wrong_values",
        f"for {probe} the shape is right but the entries are not where they belong: {where}",
    )


@checker("split_heads")
def check_split_heads(student_fn: Callable) -> str:
    """Check ``split_heads(x, num_heads)``: ``(batch, seq, d_model)`` -> ``(batch, heads, seq,
    d_head)``. Never raises; returns a :class:`~lectures_lib.checks.CheckResult`."""
    for (batch, seq, d_model), num_heads in SPLIT_PROBES:
        d_head = d_model // num_heads
        x = _distinct(batch, seq, d_model)
        expected = _split_reference(x, num_heads)  # (batch, heads, seq, d_head)
        probe = f"x of shape {tuple(x.shape)} and num_heads={num_heads}"
        got = _expect_tensor_result(call(student_fn, x, num_heads), "split_heads")
        hints = [
            ((batch, seq, num_heads, d_head),
             " That is (batch, seq, heads, d_head): the features are cut into heads, but the "
             "heads dimension must then move in front of seq: `.transpose(1, 2)`."),
            ((batch, num_heads, d_head, seq),
             " That is (batch, heads, d_head, seq): the last two dimensions are swapped."),
        ]
        shape = ("(batch, heads, seq, d_head) = "
                 + _describe(tuple(expected.shape), "batch heads seq d_head"))
        _check_layout(got, x, expected, probe, "split_heads", shape, hints, "splitting",
                      split_catalogue(x, num_heads), _LAYOUT,
                      f"result[b, h, i] must be x[b, i, h·d_head:(h+1)·d_head] (here "
                      f"d_head={d_head}).")
    return (
        "split_heads(x, num_heads) gives (batch, heads, seq, d_head), head h holding features "
        "h·d_head … (h+1)·d_head − 1 of every position, on all "
        f"{len(SPLIT_PROBES)} probes."
    )


# ---------------------------------------------------------------------------------------------
# merge_heads
# ---------------------------------------------------------------------------------------------

# (batch, heads, seq, d_head). The first probe has all four sizes different.
MERGE_PROBES: tuple[tuple[int, int, int, int], ...] = (
    (2, 3, 5, 4),
    (1, 2, 7, 4),
    (3, 1, 4, 6),
    (2, 6, 3, 1),
)


def merge_catalogue(x: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """``(code, prediction)`` of each classic ``merge_heads`` mistake on ``x``."""
    batch, num_heads, seq, d_head = x.shape
    d_model = num_heads * d_head
    return [
        ("reshape_without_transpose", x.reshape(batch, seq, d_model)),
        ("transpose_before_reshape", x.reshape(batch, d_model, seq).transpose(1, 2)),
        ("heads_mixing_channels", x.permute(0, 2, 3, 1).reshape(batch, seq, d_model)),
    ]


@checker("merge_heads")
def check_merge_heads(student_fn: Callable) -> str:
    """Check ``merge_heads(x)``: ``(batch, heads, seq, d_head)`` -> ``(batch, seq, heads *
    d_head)``, the inverse of ``split_heads``. Never raises."""
    for batch, num_heads, seq, d_head in MERGE_PROBES:
        x = _distinct(batch, num_heads, seq, d_head)
        expected = _merge_reference(x)  # (batch, seq, d_model)
        probe = f"x of shape {tuple(x.shape)}"
        got = _expect_tensor_result(call(student_fn, x), "merge_heads")
        hints = [
            ((batch, seq, num_heads, d_head),
             " That is (batch, seq, heads, d_head): the last two dimensions still need to be "
             "joined with a reshape."),
            ((batch, num_heads, seq * d_head),
             " That is (batch, heads, seq·d_head): transpose heads and seq first."),
        ]
        shape = ("(batch, seq, heads·d_head) = "
                 + _describe(tuple(expected.shape), "batch seq d_model"))
        _check_layout(got, x, expected, probe, "merge_heads", shape, hints, "merging",
                      merge_catalogue(x), _MERGE_LAYOUT,
                      f"result[b, i, h·d_head:(h+1)·d_head] must be x[b, h, i] (here "
                      f"d_head={d_head}), i.e. merge_heads(split_heads(y, heads)) == y.")
    return (
        "merge_heads(x) gives (batch, seq, heads·d_head), the heads of each position "
        f"concatenated in order, on all {len(MERGE_PROBES)} probes."
    )
