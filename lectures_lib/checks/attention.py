r"""Checker for the section-01 exercise: scaled dot-product attention (缩放点积注意力).

The student writes ``scaled_dot_product_attention(q, k, v, mask=None) -> (out, weights)`` with the
library's contract (:func:`lectures_lib.attention.scaled_dot_product_attention`):

.. math::
    \text{weights} = \operatorname{softmax}_{\text{keys}}\!\Big(\frac{Q K^\top}{\sqrt{d_k}}\Big),
    \qquad \text{out} = \text{weights}\, V

for ``q (..., n_q, d_k)``, ``k (..., n_k, d_k)``, ``v (..., n_k, d_v)`` and an optional boolean
``mask`` (True = may attend) that broadcasts to ``(..., n_q, n_k)``. Rows of ``weights`` sum to 1,
masked cells get exactly 0, and large scores must not overflow.

How the checker works. It calls the student's function on a fixed list of *probes* (unbatched,
batched, two broadcasting masks, float64, large scores) and compares each answer with the library's
reference computed in float64. When an answer is wrong it recomputes what each classic mistake
would have returned on that probe (the *diagnostic catalogue*: missing scaling, softmax over the
queries, mask inverted, ...) and names the mistake whose prediction matches. The probes are chosen
so that no two predictions coincide: ``n_q``, ``n_k``, ``d_k`` and ``d_v`` all differ (so a
transposed result has the wrong shape and every wrong divisor gives a different answer), and each
mask row has keys both allowed and blocked (so no row is fully masked, and ignoring or inverting
the mask always shows). ``tests/test_checks_attention.py`` asserts that these predictions are
pairwise far apart on every probe.

Mistake codes (``result.mistake``) are listed in :data:`MISTAKE_CODES`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..attention import scaled_dot_product_attention as _reference
from ._base import NOT_IMPLEMENTED, Mistake, call, checker

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

# Results are compared with the float64 reference at the tolerances of the *coarser* of the
# inputs' and the result's dtype: a float32 answer (to float32 or float64 inputs) at float32's, a
# float64 answer to float64 inputs at float64's. Correct float32 implementations (loops, einsum,
# any masking constant) differ by ~1e-6. Any floating result dtype is accepted: computing in
# float64 (and returning float64) is as right as filling default-dtype float32 buffers.
_TOLERANCES = {
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (3e-2, 1e-2),
    torch.float32: (1e-4, 1e-5),
    torch.float64: (1e-9, 1e-11),
}

_FIX_MAX = (
    "Subtract each row's maximum before `exp` (softmax(x) = softmax(x - max x)), or use "
    "`torch.softmax(scores, dim=-1)`, which does it for you."
)


# ---------------------------------------------------------------------------------------------
# Probes
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Candidate:
    """What one classic mistake would return on a probe (float64)."""

    code: str
    message: str
    weights: torch.Tensor
    out: torch.Tensor | None = None  # when given, ``out`` must match too


@dataclass(frozen=True)
class _Probe:
    title: str
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    mask: torch.Tensor | None = None
    large_scores: bool = False
    diagnose: bool = True  # use the diagnostic catalogue (only where predictions are distinct)

    @property
    def n_q(self) -> int:
        return self.q.shape[-2]

    @property
    def n_k(self) -> int:
        return self.k.shape[-2]

    def args(self) -> tuple[torch.Tensor, ...]:
        qkv = (self.q, self.k, self.v)
        return qkv if self.mask is None else (*qkv, self.mask)

    def describe(self) -> str:
        named = {"q": self.q, "k": self.k, "v": self.v}
        shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in named.items())
        if self.mask is not None:
            shapes += f", mask {tuple(self.mask.shape)}"
        return f"{self.title} ({shapes}, {str(self.q.dtype).replace('torch.', '')})"

    def reference(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The library's answer, in float64."""
        q, k, v = (t.double() for t in (self.q, self.k, self.v))
        return _reference(q, k, v, self.mask)

    def scores(self) -> torch.Tensor:
        """The scaled scores q kᵀ / √d_k, in float64."""
        q, k = self.q.double(), self.k.double()
        return q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)


def _mask_with_both(n_q: int, n_k: int, generator: torch.Generator) -> torch.Tensor:
    """A random ``(n_q, n_k)`` bool mask whose every row has an allowed and a blocked key."""
    mask = torch.rand(n_q, n_k, generator=generator) < 0.5
    rows = torch.arange(n_q)
    mask[rows, rows % n_k] = True
    mask[rows, (rows + 1) % n_k] = False
    return mask


def _probes() -> list[_Probe]:
    """The fixed probes, in the order they are tried (simplest first)."""
    gen = torch.Generator().manual_seed(2021)

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    probes = [
        # n_q, n_k, d_k, d_v all different and > 1: every wrong divisor and transposition shows.
        _Probe("unbatched inputs", randn(3, 6), randn(5, 6), randn(5, 2)),
        _Probe("batched inputs", randn(2, 3, 4, 5), randn(2, 3, 7, 5), randn(2, 3, 7, 3)),
    ]
    q, k, v = randn(2, 3, 4, 5), randn(2, 3, 7, 5), randn(2, 3, 7, 3)
    probes.append(
        _Probe("a (n_q, n_k) mask shared by the whole batch", q, k, v, _mask_with_both(4, 7, gen))
    )
    lengths = torch.tensor([5, 2])  # key-padding: sequence b has lengths[b] real keys
    padding = (torch.arange(7)[None, :] < lengths[:, None])[:, None, None, :]  # (2, 1, 1, 7)
    probes.append(_Probe("a key-padding mask of shape (batch, 1, 1, n_k)", q, k, v, padding))
    mask64 = torch.stack([_mask_with_both(4, 6, gen), _mask_with_both(4, 6, gen)])  # (2, 4, 6)
    probes.append(
        _Probe(
            "float64 inputs",
            randn(2, 4, 3, dtype=torch.float64),
            randn(2, 6, 3, dtype=torch.float64),
            randn(2, 6, 5, dtype=torch.float64),
            mask64,
            diagnose=False,
        )
    )
    # Large scores: integer entries times powers of 2 and d_k = 4 (sqrt = 2), so every correct
    # implementation computes exactly the same scores. Query i meets key i with a score >= 96,
    # beyond exp's float32 range (exp(88.7) = 3.4e38), and no score exceeds 480.
    signs = torch.randint(0, 2, (2, 5, 4), generator=gen) * 2 - 1
    q_large = (signs * torch.randint(1, 6, (2, 5, 4), generator=gen) * 4).float()  # |q| in 4..20
    k_large = (torch.randint(-5, 6, (2, 6, 4), generator=gen) * 2).float()  # |k| <= 10
    k_large[:, :5] = signs * 12.0  # key i points the way query i does
    v_large = randn(2, 6, 3)
    for mask in (None, _mask_with_both(5, 6, gen)):
        if mask is not None:
            mask[torch.arange(5), torch.arange(5)] = True  # keep the huge scores visible
        title = "large scores" + ("" if mask is None else " with a mask")
        probes.append(
            _Probe(title, q_large, k_large, v_large, mask, large_scores=True, diagnose=False)
        )
    return probes


# ---------------------------------------------------------------------------------------------
# The diagnostic catalogue
# ---------------------------------------------------------------------------------------------


def _catalogue(probe: _Probe) -> list[_Candidate]:
    """What each classic mistake would return on ``probe``, in the order they are tried."""
    if not probe.diagnose:
        return []
    return _unmasked_candidates(probe) if probe.mask is None else _mask_candidates(probe)


def _unmasked_candidates(probe: _Probe) -> list[_Candidate]:
    q, k, v = (t.double() for t in (probe.q, probe.k, probe.v))
    d_k, d_v = q.shape[-1], v.shape[-1]
    products = q @ k.transpose(-2, -1)  # (..., n_q, n_k), not yet scaled
    scores = products / math.sqrt(d_k)
    ref_out, _ = probe.reference()
    found = []

    def add(code: str, message: str, weights: torch.Tensor, out: torch.Tensor | None = None):
        found.append(_Candidate(code, message, weights, out))

    add(
        "missing_scaling",
        "the scores are not scaled: divide q·k by √d_k before the softmax (without it, large "
        "d_k makes the softmax saturate and its gradients vanish).",
        torch.softmax(products, dim=-1),
    )
    divisors = {
        d_k: "divided by d_k instead of √d_k",
        d_k / 2: "divided by d_k / 2: `d_k ** 1/2` means `(d_k ** 1) / 2`; write `d_k ** 0.5`",
        2 * d_k: "divided by 2·d_k: `scores / d_k ** 1/2` means `(scores / d_k) / 2`; write "
        "`scores / d_k ** 0.5`",
        1 / math.sqrt(d_k): "multiplied by √d_k instead of divided by it",
        math.sqrt(probe.n_k): "divided by √(number of keys n_k) instead of √d_k (d_k = "
        "q.shape[-1])",
        math.sqrt(probe.n_q): "divided by √(number of queries n_q) instead of √d_k (d_k = "
        "q.shape[-1])",
        math.sqrt(d_v): "divided by √d_v (v.shape[-1]) instead of √d_k (q.shape[-1])",
    }
    for divisor, how in divisors.items():
        add("wrong_scaling", f"the scores are scaled {how}.", torch.softmax(products / divisor, -1))
    add(
        "wrong_scaling",
        "the weights were divided by √d_k *after* the softmax, so rows no longer sum to 1: scale "
        "the scores q·k before the softmax.",
        torch.softmax(products, dim=-1) / math.sqrt(d_k),
    )
    for dim in range(q.dim() - 1):
        if dim == q.dim() - 2:
            where = "over the queries (dim=-2): each *column* sums to 1"
        else:
            where = (
                f"over batch dimension {dim} (did you call softmax without `dim=` or with "
                f"dim={dim}?)"
            )
        add(
            "softmax_wrong_axis",
            f"the softmax normalises {where}. Each query's weights over the keys (a row) must "
            "sum to 1: use softmax over the last dimension, `dim=-1`.",
            torch.softmax(scores, dim=dim),
        )
    add(
        "returned_scores",
        "out is right, but the weights you returned are the scaled scores before the softmax: "
        "return the softmax weights.",
        scores,
        ref_out,
    )
    add(
        "missing_softmax",
        "the scaled scores are used as weights without a softmax: normalise each row with "
        "softmax over the keys.",
        scores,
    )
    add(
        "relu_instead_of_softmax",
        "the weights are ReLU(scores): the lecture mentions ReLU as an alternative, but this "
        "exercise asks for the softmax over the keys (rows sum to 1).",
        torch.relu(scores),
    )
    return found


def _mask_candidates(probe: _Probe) -> list[_Candidate]:
    q, k, v = (t.double() for t in (probe.q, probe.k, probe.v))
    mask = probe.mask
    scores = probe.scores()  # (..., n_q, n_k)
    return [
        _Candidate(
            "mask_ignored",
            "the mask has no effect: blocked keys (mask False) still get weight. Fill their "
            "scores with -inf (or torch.finfo(dtype).min) before the softmax.",
            _reference(q, k, v)[1],
        ),
        _Candidate(
            "mask_inverted",
            "the mask is inverted: in this course True means 'may attend' (as in "
            "F.scaled_dot_product_attention), so fill the scores where the mask is *False*: "
            "`scores.masked_fill(~mask, float('-inf'))`.",
            _reference(q, k, v, ~mask)[1],
        ),
        _Candidate(
            "mask_after_softmax",
            "the masked cells are zeroed after the softmax, so the rows no longer sum to 1: mask "
            "the scores *before* the softmax (or renormalise the rows afterwards).",
            torch.softmax(scores, dim=-1).masked_fill(~mask, 0.0),
        ),
        _Candidate(
            "mask_filled_with_zero",
            "masked scores were set to 0 (or multiplied by the mask) before the softmax, but "
            "exp(0) = 1 still gives them weight: fill them with -inf (or torch.finfo(dtype).min).",
            torch.softmax(scores.masked_fill(~mask, 0.0), dim=-1),
        ),
    ]


# ---------------------------------------------------------------------------------------------
# Checking one answer
# ---------------------------------------------------------------------------------------------


def _close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype) -> bool:
    rtol, atol = _TOLERANCES.get(dtype, _TOLERANCES[torch.float32])
    return actual.shape == expected.shape and bool(
        torch.allclose(actual, expected, rtol=rtol, atol=atol)
    )


def _max_diff(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return float((actual - expected).abs().max()) if actual.numel() else 0.0


def _coarsest(*dtypes: torch.dtype) -> torch.dtype:
    """The least precise of the given floating dtypes (the one with the largest eps)."""
    return max(dtypes, key=lambda dtype: torch.finfo(dtype).eps)


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
