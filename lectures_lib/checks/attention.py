r"""Checker for the section-01 exercise: scaled dot-product attention (缩放点积注意力).

The student writes ``scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)`` with the
library's contract (:func:`lectures_lib.attention.scaled_dot_product_attention`):

.. math::
    \text{weights} = \operatorname{softmax}_{\text{keys}}\!\Big(\frac{Q K^\top}{\sqrt{d_k}}\Big),
    \qquad \text{out} = \text{weights}\, V

for ``q (..., n_q, d_k)``, ``k (..., n_k, d_k)``, ``v (..., n_k, d_v)`` and an optional boolean
``mask`` (True = may attend) that broadcasts to ``(..., n_q, n_k)``. Rows of ``weights`` sum to 1,
masked cells get exactly 0, and large scores must not overflow.

How the checker works. It calls the student's function on a fixed list of *probes* and compares
each answer with the library's reference computed in float64. When an answer is wrong it
recomputes what each classic mistake would have returned on that probe (the *diagnostic
catalogue*) and names the mistake whose prediction matches. The probes and the catalogue are in
:mod:`._attention_probes` (chosen so that no two predictions coincide); this module reads the
answer (its shapes, dtypes, finiteness) and names what is wrong.

Mistake codes (``result.mistake``) are listed in :data:`MISTAKE_CODES`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ._attention_probes import _catalogue, _Probe, _probes
from ._base import NOT_IMPLEMENTED, Mistake, call, checker
from ._compare import close as _close  # the checkers' one tolerance table
from ._compare import coarsest as _coarsest

__all__ = ["check_scaled_dot_product_attention"]

MISTAKE_CODES: dict[str, str] = {
    "not_implemented": "the function still raises NotImplementedError",
    "timed_out": "the function did not return within the time limit (a loop, a sleep)",
    "returned_none": "the function returned None (a forgotten `return`)",
    "not_callable": "something other than a function was passed to the checker",
    "raised": "the function crashed on one of the probes",
    "modified_input": "an input tensor was changed in place",
    "wrong_return_type": "not a pair (out, weights) of tensors",
    "outputs_swapped": "returned (weights, out) instead of (out, weights)",
    "weights_transposed": "weights of shape (..., n_k, n_q) instead of (..., n_q, n_k)",
    "wrong_shape": "out or weights of another wrong shape",
    "wrong_dtype": "out or weights not floating-point (an integer, bool or complex tensor)",
    "missing_scaling": "scores not divided by sqrt(d_k)",
    "wrong_scaling": "scores divided by something else than sqrt(d_k)",
    "softmax_wrong_axis": "softmax normalised over another axis than the keys (last) axis",
    "missing_softmax": "raw scores used as weights",
    "relu_instead_of_softmax": "ReLU of the scores used as weights",
    "returned_scores": "out is right but the returned weights are the scores before softmax",
    "wrong_output": "weights are right but out is not weights @ v",
    "mask_ignored": "the mask has no effect",
    "mask_inverted": "True treated as 'blocked' instead of 'may attend'",
    "mask_after_softmax": "masked cells zeroed after the softmax, rows not renormalised",
    "mask_filled_with_zero": "masked scores set to 0 (or multiplied by the mask) before softmax",
    "masked_weights_not_zero": "masked cells get a small nonzero weight (fill not negative enough)",
    "overflow": "NaN or inf for large scores (exp without subtracting the row maximum)",
    "non_finite": "NaN or inf on ordinary inputs",
    "low_precision": "a float64 result that carries only float32 precision",
    "wrong_values": "differs from the reference in a way the catalogue does not recognise",
}

_FIX_MAX = (
    "Subtract each row's maximum before `exp` (softmax(x) = softmax(x - max x)), or use "
    "`torch.softmax(scores, dim=-1)`, which does it for you."
)


# ---------------------------------------------------------------------------------------------
# Checking one answer
# ---------------------------------------------------------------------------------------------


def _max_diff(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual - expected).abs().max()) if actual.numel() else 0.0


def _unpack(
    result: object, probe: _Probe
) -> tuple[torch.Tensor, torch.Tensor, torch.dtype]:
    """Check the result is ``(out, weights)`` of the right shapes, floating; return both (float64)
    and the dtype whose precision they are compared at."""
    batch = tuple(probe.q.shape[:-2])
    out_shape = (*batch, probe.n_q, probe.v.shape[-1])
    weights_shape = (*batch, probe.n_q, probe.n_k)
    if isinstance(result, torch.Tensor):
        raise Mistake(
            "wrong_return_type",
            "your function returned one tensor; return both: `return out, weights`",
        )
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = type(result).__name__
        if isinstance(result, (tuple, list)):
            got += f" of length {len(result)}"
        raise Mistake(
            "wrong_return_type",
            f"your function should return a pair `(out, weights)`, got {got}",
        )
    for position, value in zip(("first (out)", "second (weights)"), result, strict=True):
        if not isinstance(value, torch.Tensor):
            raise Mistake(
                "wrong_return_type",
                f"the {position} value returned should be a torch.Tensor, got "
                f"{type(value).__name__}",
            )
    out, weights = result
    if tuple(out.shape) == weights_shape and tuple(weights.shape) == out_shape:
        raise Mistake(
            "outputs_swapped",
            f"you returned (weights, out): return `out` {out_shape} first and `weights` "
            f"{weights_shape} second",
        )
    if tuple(weights.shape) == (*batch, probe.n_k, probe.n_q):
        raise Mistake(
            "weights_transposed",
            f"weights have shape {tuple(weights.shape)} = (..., n_k, n_q), expected "
            f"{weights_shape} = (..., n_q, n_k): one row per query, one column per key (the "
            "transpose of the lecture's column-per-query A')",
        )
    if tuple(weights.shape) != weights_shape:
        raise Mistake(
            "wrong_shape",
            f"weights should have shape (..., n_q, n_k) = {weights_shape}, got "
            f"{tuple(weights.shape)}",
        )
    if tuple(out.shape) != out_shape:
        hint = ""
        if tuple(out.shape) == (*batch, probe.n_q, probe.q.shape[-1]):
            hint = " It looks like the weights multiplied the keys k instead of the values v."
        elif tuple(out.shape) == (*batch, probe.n_k, probe.v.shape[-1]):
            hint = " It looks like the transposed weights multiplied v."
        raise Mistake(
            "wrong_shape",
            f"out should have shape (..., n_q, d_v) = {out_shape}, got {tuple(out.shape)}."
            + hint,
        )
    for name, value in (("out", out), ("weights", weights)):
        if not value.is_floating_point():
            raise Mistake(
                "wrong_dtype",
                f"{name} has dtype {value.dtype} but should be floating-point like the inputs "
                f"({probe.q.dtype}): weights are fractions between 0 and 1 (no `.long()`, "
                "`.int()` or `.bool()`, and no integer buffers to fill in)",
            )
    dtype = _coarsest(probe.q.dtype, out.dtype, weights.dtype)
    return out.detach().cpu().double(), weights.detach().cpu().double(), dtype


def _masked_weight(weights: torch.Tensor, mask: torch.Tensor | None) -> float:
    """Largest weight on a masked cell (0.0 when there is no mask)."""
    if mask is None:
        return 0.0
    blocked = ~mask.expand(weights.shape)
    return float(weights[blocked].abs().max()) if bool(blocked.any()) else 0.0


def _renormalised(weights: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``weights`` with the masked cells set to 0 and each row rescaled to sum to 1."""
    kept = weights.masked_fill(~mask, 0.0)
    return kept / kept.sum(dim=-1, keepdim=True)


def _diagnose(
    probe: _Probe, out: torch.Tensor, weights: torch.Tensor, dtype: torch.dtype
) -> None:
    """Raise :class:`Mistake` naming what is wrong with ``(out, weights)`` on ``probe``, compared
    at the precision of ``dtype``."""
    ref_out, ref_weights = probe.reference()
    weights_ok, out_ok = _close(weights, ref_weights, dtype), _close(out, ref_out, dtype)
    masked_weight = _masked_weight(weights, probe.mask)
    if weights_ok and out_ok:
        if masked_weight > 0.0:
            raise Mistake(
                "masked_weights_not_zero",
                f"masked cells get weight up to {masked_weight:.2g} instead of exactly 0: fill "
                "the masked scores with -inf or torch.finfo(dtype).min (a constant like -100 is "
                "not negative enough)",
            )
        return
    if not (bool(torch.isfinite(out).all()) and bool(torch.isfinite(weights).all())):
        if probe.large_scores:
            largest = float(probe.scores().abs().max())
            raise Mistake(
                "overflow",
                f"your result contains NaN or inf when scores are large (up to {largest:.0f} "
                "here): exp of a score above 88.7 overflows float32. " + _FIX_MAX,
            )
        raise Mistake(
            "non_finite",
            "your result contains NaN or inf on ordinary inputs: look for a division by zero, "
            "log(0) or (-inf) - (-inf)",
        )
    for candidate in _catalogue(probe):
        if _close(weights, candidate.weights, dtype) and (
            candidate.out is None or _close(out, candidate.out, dtype)
        ):
            raise Mistake(candidate.code, candidate.message)
    if weights_ok:
        raise Mistake(
            "wrong_output",
            "your weights are right but out is not: out = weights @ v (output i is the weighted "
            f"sum of the value rows; max abs diff {_max_diff(out, ref_out):.2g})",
        )
    if masked_weight > 0.0 and _close(_renormalised(weights, probe.mask), ref_weights, dtype):
        raise Mistake(
            "masked_weights_not_zero",
            f"masked cells get weight up to {masked_weight:.2g} instead of exactly 0: fill the "
            "masked scores with -inf or torch.finfo(dtype).min (a constant like -100 is not "
            "negative enough)",
        )
    diff_w, diff_o = _max_diff(weights, ref_weights), _max_diff(out, ref_out)
    if dtype == torch.float64 and max(diff_w, diff_o) < 1e-5:
        raise Mistake(
            "low_precision",
            f"on float64 inputs your float64 result matches only to float32 precision (max abs "
            f"diff {max(diff_w, diff_o):.1g}): somewhere it went through float32 (`.float()`, a "
            "float32 constant tensor) and back. Compute in the inputs' dtype throughout",
        )
    sums = weights.sum(dim=-1)
    hints = []
    if not _close(sums, torch.ones_like(sums), dtype):
        hints.append(
            f" The rows of your weights sum to values from {float(sums.min()):.3g} to "
            f"{float(sums.max()):.3g}, not 1."
        )
    if masked_weight > 0.0:
        hints.append(f" Masked cells get weight up to {masked_weight:.2g}, not 0.")
    if probe.large_scores:
        hints.append(" Large scores need a numerically stable softmax. " + _FIX_MAX)
    raise Mistake(
        "wrong_values",
        f"your output differs from the reference: max abs diff {diff_w:.2g} in weights and "
        f"{diff_o:.2g} in out" + "".join(hints),
    )


# ---------------------------------------------------------------------------------------------
# The checker
# ---------------------------------------------------------------------------------------------


def _run_probe(student_fn: Callable, probe: _Probe) -> None:
    """Call the student's function on one probe; raise :class:`Mistake` naming the probe."""
    try:
        out, weights, dtype = _unpack(call(student_fn, *probe.args()), probe)
        _diagnose(probe, out, weights, dtype)
    except Mistake as mistake:
        if mistake.code == NOT_IMPLEMENTED:
            raise
        message = str(mistake).rstrip(".") + f". Seen on {probe.describe()}."
        if mistake.code == "raised":
            message += _raised_hint(str(mistake), probe)
        raise Mistake(mistake.code, message) from None


def _raised_hint(error: str, probe: _Probe) -> str:
    """A hint for a crash that fits the error, not one that blames transposes for everything."""
    shape_error = any(word in error for word in ("size", "shape", "dimension", "Dimension",
                                                  "mat1", "broadcast"))
    if not shape_error:
        return ""  # a NameError, TypeError, ...: the error itself says what to fix
    if probe.mask is not None and "mask" in error.lower() or probe.mask is not None and (
        "index" in error.lower()
    ):
        return (" The mask broadcasts to (..., n_q, n_k): use `scores.masked_fill(~mask, ...)` "
                "or `torch.where`, not boolean indexing.")
    if probe.q.dim() > 2:
        return (" This probe has leading batch dimensions (q is (..., n_q, d_k)): transpose "
                "only the last two dimensions, `k.transpose(-2, -1)` (`.T` or `.t()` reverse "
                "them all), or use einsum with '...'.")
    return (" Shapes here: q (n_q, d_k) and k (n_k, d_k) give scores q @ k^T of shape (n_q, "
            "n_k); v (n_k, d_v).")


@checker("scaled_dot_product_attention")
def check_scaled_dot_product_attention(student_fn: Callable) -> str:
    r"""Check ``student_fn(q, k, v, mask=None) -> (out, weights)`` against the library.

    ``weights = softmax(q kᵀ / √d_k)`` over the keys, with masked cells (mask False) at exactly
    0, and ``out = weights @ v``. Probes: unbatched and batched inputs with ``n_q ≠ n_k`` and
    ``d_k ≠ d_v``, a mask broadcast over the batch, a key-padding mask, float64 inputs and large
    scores. Returns a :class:`~lectures_lib.checks.CheckResult`; ``result.mistake`` names the
    likely mistake (see :data:`MISTAKE_CODES`). Exercise of ``01_self_attention.ipynb``.
    """
    probes = _probes()
    for probe in probes:
        _run_probe(student_fn, probe)
    return (
        f"all {len(probes)} probes agree with the reference: "
        + "; ".join(probe.title for probe in probes)
        + "."
    )
