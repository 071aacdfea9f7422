r"""The section-01 checker's probes and its diagnostic catalogue (:mod:`.attention` checks).

*Probes* are the fixed inputs the student's ``scaled_dot_product_attention`` is called with
(unbatched, batched, two broadcasting masks, float64, large scores); the *catalogue* is what each
classic mistake (missing scaling, softmax over the queries, mask inverted, ...) would return on a
probe, in float64. The probes are chosen so that no two predictions coincide: ``n_q``, ``n_k``,
``d_k`` and ``d_v`` all differ (a transposed result has the wrong shape and every wrong divisor
gives a different answer), and each mask row has keys both allowed and blocked (no row is fully
masked, and ignoring or inverting the mask always shows). ``tests/checks/test_attention.py``
asserts that these predictions are pairwise far apart on every probe. The grader's sandbox keeps
none of this file (:mod:`course_tools.grading.sandbox._student_view`): the probes are the grader's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..attention import scaled_dot_product_attention as _reference

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
