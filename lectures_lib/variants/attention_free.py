r"""Mixing tokens without :math:`q \cdot k` (section 07, parts 6 and 7): the content-blind
baseline and an attention-free layer, both attention factories.

* :class:`UniformAttention`: every query gets the *mean* of the values it may attend to, weights
  :math:`1/N` (under a key mask, :math:`1/\#\text{allowed}`). It is the content-blind baseline of
  the long-range comparison: a bag of tokens, the average that a fixed pattern can at best reweight.
* :class:`FourierMixing`: FNet (Lee-Thorp et al. 2022) replaces self-attention by a parameter-free
  2-D discrete Fourier transform, over the hidden dimension and over the positions, keeping the
  real part: :math:`y = \operatorname{Re}\,\mathcal{F}_{\text{seq}}(\mathcal{F}_{\text{hidden}}(x))`.
  No query, no key, no weights to learn: every output position is a fixed linear mixture of every
  input position (each position sees all others through the sequence DFT).

Both are used as ``EncoderTagger(..., attention=UniformAttention)`` or
``attention=FourierMixing``: the layer calls ``module(x, x, x, mask, need_weights)``. Derived in
``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch
from torch import nn

from .._validate.variants import shared as rules
from ..utils import (
    at_boundary,
    check_bool,
    check_positive_int,
    check_probability,
    check_tensor,
    validated,
)
from .base import AttentionVariant, split_mask

__all__ = ["UniformAttention", "FourierMixing", "fourier_mixing", "uniform_attention"]


def _check_uniform_attention(v, key_mask=None) -> None:
    """The door check of :func:`uniform_attention` (not taught: the rules, not the maths)."""
    check_tensor(v, "v", dtype="floating")
    if v.dim() < 2:
        raise ValueError(f"v must have at least 2 dimensions (..., n, d), got shape {tuple(v.shape)}")
    if key_mask is not None:
        rules.key_mask_shape(key_mask, v.shape[:-1])


def _check_fourier_mixing(x) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2:
        raise ValueError(f"x must have at least 2 dimensions (..., n, d), got shape {tuple(x.shape)}")


@validated(_check_uniform_attention)
def uniform_attention(v: torch.Tensor, key_mask: torch.Tensor | None = None) -> torch.Tensor:
    """The mean of ``v`` ``(..., n, d)`` over the allowed keys, for every query: ``(..., n, d)``.
    ``key_mask`` bool ``(..., n)`` (True = may attend), broadcasting to ``v.shape[:-1]``."""
    if key_mask is None:
        return v.mean(-2, keepdim=True).expand_as(v)  # (..., 1, d) -> (..., n, d)
    weights = key_mask.to(v.dtype)[..., None]  # (..., n, 1)
    total = (weights * v).sum(-2, keepdim=True)  # (..., 1, d)
    count = weights.sum(-2, keepdim=True).clamp_min(1)  # (..., 1, 1): all-masked rows give 0
    return (total / count).expand_as(v)


class UniformAttention(AttentionVariant):
    """Content-blind attention: weights :math:`1/N` on every allowed key (see the module doc).
    The projections stay (values and output), so it differs from full attention *only* in the
    weights. Masks: key padding only (the baseline is a bag: the same mixture for every query)."""

    masks = "keys"

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, *, bias: bool = True) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)  # the variants' one convention

    def attend(self, q, k, v, mask, need_weights):
        key_mask, _ = self.supported_mask(mask, q.shape[-2], k.shape[-2])  # (b|1, h|1, n_k)
        out = uniform_attention(v, key_mask)  # (batch, heads, n, d_head)
        if not need_weights:
            return out, None
        n = k.shape[-2]
        allowed = torch.ones(n, dtype=v.dtype) if key_mask is None else key_mask.to(v.dtype)
        weights = allowed / allowed.sum(-1, keepdim=True).clamp_min(1)  # (..., n)
        weights = weights[..., None, :].expand(v.shape[0], v.shape[1], q.shape[-2], n)
        return out, weights


@validated(_check_fourier_mixing)
def fourier_mixing(x: torch.Tensor) -> torch.Tensor:
    r"""FNet's token mixing: ``Re(fft(fft(x, dim=-1), dim=-2))`` for ``x`` ``(..., n, d)``."""
    return torch.fft.fft(torch.fft.fft(x.to(torch.complex64 if x.dtype != torch.float64
                                             else torch.complex128), dim=-1), dim=-2).real.to(x.dtype)


class FourierMixing(nn.Module):
    """FNet's attention-free sub-layer as an attention factory: ``FourierMixing(d_model,
    num_heads, dropout)`` (``num_heads`` and ``dropout`` are accepted for the factory signature
    and unused: there are no heads and no weights). ``forward(query, key, value, mask=None,
    need_weights=False)`` mixes ``query`` ``(batch, n, d_model)``; a key-padding mask zeroes the
    padded positions *before* mixing (so padding does not leak in); weights are never returned."""

    def __init__(self, d_model: int, num_heads: int = 1, dropout: float = 0.0) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.num_heads = check_positive_int(num_heads, "num_heads")  # read by EncoderTagger's mask check
        check_probability(dropout, "dropout")  # accepted for the factory signature; nothing to drop

    def forward(self, query, key=None, value=None, mask=None, need_weights=False):
        if at_boundary():
            check_tensor(query, "query", ndim=3, dtype="floating")
            if query.shape[-1] != self.d_model:
                raise ValueError(
                    f"query must have last dimension d_model={self.d_model}, got {tuple(query.shape)}"
                )
            check_bool(need_weights, "need_weights")
            if need_weights:
                raise ValueError("FourierMixing has no attention weights: need_weights must be False")
        key_mask, kind = split_mask(mask, query.shape[1], query.shape[1])
        if kind != "keys":
            raise ValueError(
                "FourierMixing mixes every position with every other: mask must be a key-padding "
                f"mask (n,) or (batch|1, heads|1, 1, n), got {tuple(mask.shape)}"
            )
        x = query
        if key_mask is not None:  # (batch | 1, heads | 1, n): keep the unpadded positions
            keep = key_mask[:, 0]  # (batch | 1, n)
            x = x * keep[..., None].to(x.dtype)
        return fourier_mixing(x), None
