r"""Checker for section 01's exercise: additive attention (加性注意力, Bahdanau et al. 2015).

Section 01 derives *dot-product* attention; the exercise asks for the other classic score, a small
network per pair (query, key):

.. math::
    s_{ij} = w^\top \tanh(q_i W_q + k_j W_k), \qquad
    \text{weights} = \operatorname{softmax}_j(s), \qquad \text{out} = \text{weights}\, V

The student writes ``additive_attention(q, k, v, w_q, w_k, w_score, mask=None) -> (out, weights)``
with ``q (..., n_q, d_q)``, ``k (..., n_k, d_k)``, ``v (..., n_k, d_v)``, ``w_q (d_q, d_att)``,
``w_k (d_k, d_att)``, ``w_score (d_att,)`` and a boolean ``mask`` (True = may attend) that
broadcasts to ``(..., n_q, n_k)``. Used in ``01_self_attention.ipynb``.
"""

from __future__ import annotations

import math

import torch

from ._base import checker, probe_generator
from ._compare import Probe, Wrong, compare

__all__ = ["check_additive_attention", "additive_attention_reference"]


def _scores(q, k, w_q, w_k, w_score, activation=torch.tanh):
    hidden = (q @ w_q)[..., :, None, :] + (k @ w_k)[..., None, :, :]  # (..., n_q, n_k, d_att)
    return activation(hidden) @ w_score  # (..., n_q, n_k)


def _finish(scores, v, mask, dim=-1, invert=False):
    if mask is not None:
        allowed = ~mask if invert else mask
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=dim)
    return weights @ v, weights


def additive_attention_reference(q, k, v, w_q, w_k, w_score, mask=None):
    """The reference answer: ``(out (..., n_q, d_v), weights (..., n_q, n_k))``."""
    return _finish(_scores(q, k, w_q, w_k, w_score), v, mask)


def _probes(hidden: bool) -> list[Probe]:
    gen = probe_generator(7 if hidden else 2015)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

    def weights(d_q, d_k, d_att, dtype=torch.float32):
        return randn(d_q, d_att, dtype=dtype), randn(d_k, d_att, dtype=dtype), randn(d_att, dtype=dtype)

    def both(n_q, n_k):  # every row has an allowed and a blocked key
        mask = torch.rand(n_q, n_k, generator=gen) < 0.5
        rows = torch.arange(n_q)
        mask[rows, rows % n_k], mask[rows, (rows + 1) % n_k] = True, False
        return mask

    # n_q, n_k, d_q, d_k, d_v, d_att all differ: a swapped role shows as a shape error.
    probes = [
        Probe("unbatched", (randn(3, 4), randn(5, 6), randn(5, 2), *weights(4, 6, 7))),
        Probe("batched", (randn(2, 3, 4), randn(2, 5, 6), randn(2, 5, 2), *weights(4, 6, 7))),
        Probe("a (n_q, n_k) mask", (randn(2, 3, 4), randn(2, 5, 6), randn(2, 5, 2),
                                    *weights(4, 6, 7)), {"mask": both(3, 5)}),
    ]
    lengths = torch.tensor([5, 2])
    padding = (torch.arange(5)[None, :] < lengths[:, None])[:, None, :]  # (batch, 1, n_k)
    probes.append(Probe("a key-padding mask (batch, 1, n_k)", (randn(2, 3, 4), randn(2, 5, 6),
                        randn(2, 5, 2), *weights(4, 6, 7)), {"mask": padding}))
    probes.append(Probe("float64", (randn(4, 3, dtype=torch.float64), randn(6, 5, dtype=torch.float64),
                        randn(6, 3, dtype=torch.float64), *weights(3, 5, 2, torch.float64))))
    if hidden:  # shapes, dtypes and masks the student never saw
        probes += [
            Probe("two leading dimensions", (randn(2, 3, 1, 5), randn(2, 3, 7, 2), randn(2, 3, 7, 4),
                  *weights(5, 2, 3)), {"mask": both(1, 7)}),
            Probe("one key", (randn(4, 2), randn(1, 3), randn(1, 5), *weights(2, 3, 6))),
            Probe("float64 with a mask", (randn(3, 6, 4, dtype=torch.float64),
                  randn(3, 5, 2, dtype=torch.float64), randn(3, 5, 3, dtype=torch.float64),
                  *weights(4, 2, 8, torch.float64)), {"mask": both(6, 5)}),
        ]
    return probes


def _scaled(name: str, d: int) -> Wrong:
    """The scores divided by sqrt(d), as section 01's dot-product attention divides them."""
    return Wrong("scaled_like_dot_product", f"you divided the scores by sqrt({name}) = "
                 f"{math.sqrt(d):.3g}, as §4's dot-product attention does: remove it, the "
                 "additive score w·tanh(q_i W_q + k_j W_k) has no scaling",
                 lambda q, k, v, wq, wk, w, mask=None: _finish(
                     _scores(q, k, wq, wk, w) / math.sqrt(d), v, mask))


def _catalogue(probe: Probe) -> list[Wrong]:
    q, k, w_score = probe.args[0], probe.args[1], probe.args[5]
    sizes = {"d_att": w_score.shape[0], "d_k": k.shape[-1], "d_q": q.shape[-1]}
    # one wrong version per distinct size (the probes make d_q, d_k and d_att differ)
    scaled = {d: _scaled(name, d) for name, d in reversed(sizes.items()) if d > 1}
    return [
        Wrong("missing_tanh", "the scores skip the tanh: s_ij = w·tanh(q_i W_q + k_j W_k); "
              "without it the score is linear and splits into a query part plus a key part "
              "(and the query part cancels in the softmax)",
              lambda q, k, v, wq, wk, w, mask=None: _finish(_scores(q, k, wq, wk, w, lambda h: h), v, mask)),
        Wrong("relu_instead_of_tanh", "you used ReLU where the additive score uses tanh",
              lambda q, k, v, wq, wk, w, mask=None: _finish(_scores(q, k, wq, wk, w, torch.relu), v, mask)),
        *scaled.values(),
        Wrong("softmax_wrong_axis", "the softmax runs over the queries (dim=-2): each query's "
              "weights over the keys must sum to 1, softmax(dim=-1)",
              lambda q, k, v, wq, wk, w, mask=None: _finish(_scores(q, k, wq, wk, w), v, mask, dim=-2)),
        Wrong("mask_inverted", "the mask is inverted: True means *may attend* (keep the score), "
              "False means blocked (score -inf)",
              lambda q, k, v, wq, wk, w, mask=None: _finish(_scores(q, k, wq, wk, w), v, mask, invert=True)),
        Wrong("mask_ignored", "the mask has no effect: fill the blocked scores with -inf "
              "(`scores.masked_fill(~mask, float('-inf'))`) before the softmax",
              lambda q, k, v, wq, wk, w, mask=None: _finish(_scores(q, k, wq, wk, w), v, None)),
    ]


@checker("additive_attention")
def check_additive_attention(student_fn, hidden: bool = False) -> str:
    """Check ``additive_attention(q, k, v, w_q, w_k, w_score, mask=None) -> (out, weights)``.

    Probes: unbatched and batched inputs with every size different, a shared mask, a key-padding
    mask, float64 (``hidden=True`` adds two leading dimensions, a single key and another seed).
    Mistakes named: missing tanh, ReLU, dot-product scaling, softmax axis, mask inverted or
    ignored, NaN, randomness, a forgotten ``return``.
    """
    probes = _probes(hidden)
    compare(student_fn, probes, additive_attention_reference, _catalogue, ("out", "weights"),
            "s_ij = w_score · tanh(q_i W_q + k_j W_k) for every pair: broadcast (q @ w_q) as "
            "(..., n_q, 1, d_att) against (k @ w_k) as (..., 1, n_k, d_att).")
    return f"all {len(probes)} probes agree with the reference: " + "; ".join(
        p.title for p in probes) + "."
