r"""Checker for section 02's exercise: multi-head self-attention on a padded batch.

The student writes ``padded_self_attention(x, lengths, w_q, w_k, w_v, w_o, num_heads) ->
(out, weights)`` for ``x (batch, seq, d_model)`` where sequence ``b`` has ``lengths[b]`` real
tokens followed by padding; ``w_*`` are ``(d_model, d_model)`` in the row convention (``Q = x
W_q``), no biases. Per head, softmax over the **real keys only**; ``out = merge(heads) W_o`` with
the rows of padded positions set to exactly 0; ``weights (batch, heads, seq, seq)``. Used in
``02_multi_head_attention.ipynb``.
"""

from __future__ import annotations

import math

import torch

from ._base import checker, probe_generator
from ._compare import Probe, Wrong, compare

__all__ = ["check_padded_self_attention", "padded_self_attention_reference"]


def _attend(x, w_q, w_k, w_v, w_o, num_heads, key_mask, zero_rows):
    batch, seq, d_model = x.shape
    d_head = d_model // num_heads

    def split(t):  # (batch, seq, d_model) -> (batch, heads, seq, d_head)
        return t.reshape(batch, seq, num_heads, d_head).transpose(1, 2)

    q, k, v = split(x @ w_q), split(x @ w_k), split(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)  # (batch, heads, seq, seq)
    if key_mask is not None:
        scores = scores.masked_fill(~key_mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    out = (weights @ v).transpose(1, 2).reshape(batch, seq, d_model) @ w_o
    if zero_rows is not None:
        out = out * zero_rows[:, :, None]
    return out, weights


def _real(lengths, seq, shift=0):
    return torch.arange(seq)[None, :] < (lengths[:, None] + shift)  # (batch, seq)


def padded_self_attention_reference(x, lengths, w_q, w_k, w_v, w_o, num_heads):
    """The reference answer: ``(out (batch, seq, d_model), weights (batch, heads, seq, seq))``."""
    real = _real(lengths, x.shape[1])
    return _attend(x, w_q, w_k, w_v, w_o, num_heads, real[:, None, None, :], real.to(x.dtype))


def _probes(hidden: bool) -> list[Probe]:
    gen = probe_generator(11 if hidden else 2017)

    def probe(title, batch, seq, d_model, heads, lengths, dtype=torch.float32):
        def randn(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float64).to(dtype)

        scale = 1 / math.sqrt(d_model)
        ws = [randn(d_model, d_model) * scale for _ in range(4)]
        return Probe(title, (randn(batch, seq, d_model), torch.tensor(lengths), *ws, heads))

    probes = [
        probe("three lengths, 2 heads", 3, 5, 8, 2, [5, 3, 2]),
        probe("one full sequence, 4 heads", 2, 6, 12, 4, [6, 1]),
        probe("float64, 3 heads", 2, 4, 6, 3, [2, 4], torch.float64),
    ]
    if hidden:
        probes += [
            probe("one head, batch of 4", 4, 7, 5, 1, [7, 1, 4, 6]),
            probe("every sequence padded, 6 heads", 2, 9, 12, 6, [3, 8], torch.float64),
        ]
    return probes


def _catalogue(probe: Probe) -> list[Wrong]:
    x = probe.args[0]
    seq = x.shape[1]

    def variant(key_shift=0, keys=True, zero=True, zero_shift=0):
        def wrong(x, lengths, w_q, w_k, w_v, w_o, num_heads):
            real = _real(lengths, seq, key_shift)
            rows = _real(lengths, seq, zero_shift).to(x.dtype) if zero else None
            return _attend(x, w_q, w_k, w_v, w_o, num_heads,
                           real[:, None, None, :] if keys else None, rows)
        return wrong

    return [
        Wrong("padding_keys_visible", "the padded *keys* still get weight: mask them in every "
              "head with a (batch, 1, 1, seq) mask, True where `position < length`",
              variant(keys=False)),
        Wrong("padding_keys_visible", "the padded keys get weight and the padded rows are not "
              "zeroed: no padding mask at all", variant(keys=False, zero=False)),
        Wrong("padded_rows_not_zeroed", "the keys are masked, but the outputs at padded "
              "positions are not set to 0: multiply `out` by the (batch, seq, 1) real-token mask",
              variant(zero=False)),
        Wrong("off_by_one", "your mask is one position too long: position i is real when "
              "i < length (positions count from 0), not i <= length", variant(1, zero_shift=1)),
        Wrong("off_by_one", "your mask is one position too short: position i is real when "
              "i < length, not i < length - 1", variant(-1, zero_shift=-1)),
    ]


@checker("padded_self_attention")
def check_padded_self_attention(student_fn, hidden: bool = False) -> str:
    """Check ``padded_self_attention(x, lengths, w_q, w_k, w_v, w_o, num_heads)``.

    Mistakes named: padded keys visible, padded rows not zeroed, an off-by-one mask, NaN (a fully
    masked row), randomness, a forgotten ``return``; ``hidden=True`` adds one head, a batch of 4
    and float64 with every sequence padded.
    """
    probes = _probes(hidden)
    compare(student_fn, probes, padded_self_attention_reference, _catalogue,
            ("out", "weights"),
            "Per head: softmax(Q_h K_h^T / sqrt(d_head)) with the padded keys masked, weights @ "
            "V_h, merge the heads, @ w_o, then zero the rows of padded positions.")
    return f"all {len(probes)} probes agree: padded keys get weight 0 in every head and padded " \
        "positions output 0."
