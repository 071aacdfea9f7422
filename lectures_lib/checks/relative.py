r"""Checker for section 03's exercise: attention with a learned relative position bias.

Instead of adding a vector per *absolute* position to the input (section 03), add a learned scalar
per head and per *offset* $j - i$ to the attention scores (Shaw et al. 2018; T5, Raffel et al.
2020), offsets clipped to $\pm D$:

.. math::
    s^h_{ij} = \frac{q^h_i \cdot k^h_j}{\sqrt{d_{head}}} + b^h_{\operatorname{clip}(j - i, -D, D)}

The student writes ``relative_position_attention(q, k, v, bias, max_distance) -> (out, weights)``
with ``q, k, v (batch, heads, n, d_head)`` and ``bias (heads, 2 * max_distance + 1)`` where column
``offset + max_distance`` holds the bias of ``offset = j - i``. Used in
``03_positional_encoding.ipynb``.
"""

from __future__ import annotations

import math

import torch

from ._base import checker, probe_generator
from ._compare import Probe, Wrong, compare

__all__ = ["check_relative_position_attention", "relative_position_attention_reference"]


def _bias(bias, n, max_distance, sign=1, clip=True):
    positions = torch.arange(n)
    offsets = sign * (positions[None, :] - positions[:, None])  # (n, n): j - i
    if clip:
        offsets = offsets.clamp(-max_distance, max_distance)
    return bias[:, offsets + max_distance]  # (heads, n, n)


def _attention(q, k, v, table, scale=True):
    scores = q @ k.transpose(-2, -1)
    if scale:
        scores = scores / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores + table, dim=-1)  # (batch, heads, n, n)
    return weights @ v, weights


def relative_position_attention_reference(q, k, v, bias, max_distance):
    """The reference answer: ``(out (batch, heads, n, d_v), weights (batch, heads, n, n))``."""
    return _attention(q, k, v, _bias(bias, q.shape[-2], max_distance))


def _probes(hidden: bool) -> list[Probe]:
    gen = probe_generator(5 if hidden else 2018)

    def probe(title, batch, heads, n, d, max_distance, dtype=torch.float32):
        def randn(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

        return Probe(title, (randn(batch, heads, n, d), randn(batch, heads, n, d),
                             randn(batch, heads, n, d + 1), 2 * randn(heads, 2 * max_distance + 1),
                             max_distance))

    probes = [
        probe("offsets within the range", 2, 3, 5, 4, 4),
        probe("offsets clipped at max_distance = 2", 1, 2, 7, 3, 2),
        probe("float64", 2, 2, 6, 2, 3, torch.float64),
    ]
    if hidden:
        probes += [
            probe("max_distance = 0", 1, 3, 4, 5, 0),
            probe("one position", 3, 1, 1, 2, 2),
            probe("long sequence, float64", 1, 4, 12, 3, 5, torch.float64),
        ]
    return probes


def _catalogue(probe: Probe) -> list[Wrong]:
    return [
        Wrong("offset_sign", "you used the offset i - j instead of j - i (key minus query): "
              "column max_distance + 1 is the bias for the key one position *after* the query",
              lambda q, k, v, b, D: _attention(q, k, v, _bias(b, q.shape[-2], D, sign=-1))),
        Wrong("bias_missing", "the bias is not added: the scores are plain dot products",
              lambda q, k, v, b, D: _attention(q, k, v, torch.zeros(()))),
        Wrong("missing_scaling", "the dot products are not divided by sqrt(d_head)",
              lambda q, k, v, b, D: _attention(q, k, v, _bias(b, q.shape[-2], D), scale=False)),
        Wrong("bias_after_softmax", "the bias must be added to the scores *before* the softmax",
              lambda q, k, v, b, D: (lambda w: (w @ v, w))(
                  torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), -1)
                  + _bias(b, q.shape[-2], D))),
        Wrong("wrong_head", "every head used head 0's bias row: each head h has its own row "
              "bias[h]",
              lambda q, k, v, b, D: _attention(q, k, v, _bias(b[:1].expand_as(b), q.shape[-2], D))),
    ]


@checker("relative_position_attention")
def check_relative_position_attention(student_fn, hidden: bool = False) -> str:
    """Check ``relative_position_attention(q, k, v, bias, max_distance) -> (out, weights)``.

    Mistakes named: offset sign (i - j), bias missing or added after the softmax, no scaling, one
    bias row for all heads, clipping forgotten (an index error or a wrong value), NaN, randomness;
    ``hidden=True`` adds ``max_distance = 0``, a single position and a long float64 sequence.
    """
    probes = _probes(hidden)
    compare(student_fn, probes, relative_position_attention_reference, _catalogue,
            ("out", "weights"),
            "Build the (n, n) offsets j - i, clamp them to [-max_distance, max_distance], add "
            "max_distance to get columns, gather bias[:, columns] -> (heads, n, n) and add it to "
            "the scaled scores before the softmax.")
    return f"all {len(probes)} probes agree: each head adds its bias of the clipped offset " \
        "j - i to the scaled scores."
