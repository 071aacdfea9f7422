r"""Efficient Attention (Shen, Zhang, Zhao, Yi, Li, *Efficient Attention: Attention with Linear
Complexities*, WACV 2021): normalise :math:`Q` and :math:`K` separately, then multiply in the
cheap order (section 07, part 3).

.. math::
    E(Q, K, V) = \rho_q(Q)\,\bigl(\rho_k(K)^\top V\bigr),

where :math:`\rho_q` is a softmax over the *features* of each query (each row of :math:`Q` sums
to 1) and :math:`\rho_k` a softmax over the *positions* of each key feature (each column of
:math:`K` sums to 1). :math:`\rho_k(K)^\top V` is :math:`d \times d`: :math:`d` "global context
vectors", each a weighted average of the values with weights over the :math:`N` positions; each
query mixes them with weights that sum to 1. So every output is a convex combination of values,
as in softmax attention, and the :math:`N \times N` matrix
:math:`\rho_q(Q)\,\rho_k(K)^\top` (rows summing to 1) is never built: time :math:`O(N d^2)`,
memory :math:`O(N d + d^2)`. It is *not* softmax attention (a different model, like linear
attention), and it has no causal form here (a causal mask raises). Derived in
``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch

from .._validate.variants import shared as rules
from ..utils import check_qkv, validated
from .base import AttentionVariant

__all__ = ["EfficientAttention", "efficient_attention"]


def _check_efficient_attention(q, k, v, key_mask=None) -> None:
    """The door check of :func:`efficient_attention` (not taught: the rules, not the maths)."""
    check_qkv(q, k, v)
    if key_mask is not None:
        rules.key_mask_shape(key_mask, k.shape[:-1])


@validated(_check_efficient_attention)
def efficient_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, key_mask: torch.Tensor | None = None
) -> torch.Tensor:
    r"""``softmax_features(q) @ (softmax_positions(k)^T @ v)``: ``q`` ``(..., n_q, d)``, ``k``
    ``(..., n_k, d)``, ``v`` ``(..., n_k, d_v)`` -> ``(..., n_q, d_v)``. ``key_mask`` bool
    ``(..., n_k)`` (True = may attend) removes keys from the softmax over positions."""
    scaled_k = k
    if key_mask is not None:
        scaled_k = k.masked_fill(~key_mask[..., None], float("-inf"))  # (..., n_k, d)
    rho_q = q.softmax(dim=-1)  # (..., n_q, d): each query's features sum to 1
    rho_k = scaled_k.softmax(dim=-2)  # (..., n_k, d): each feature's weights over positions sum to 1
    context = rho_k.transpose(-2, -1) @ v  # (..., d, d_v): d global context vectors
    return rho_q @ context  # (..., n_q, d_v)


class EfficientAttention(AttentionVariant):
    """:func:`efficient_attention` per head, as an attention factory (a key-padding mask is
    honoured; a mask with a query dimension, e.g. causal, raises; ``need_weights=True`` builds
    the ``N x N`` matrix :math:`\\rho_q(Q)\\rho_k(K)^T` for pictures only)."""

    masks = "keys"  # the keys are normalised over all positions at once: no causal form

    def __init__(self, d_model: int, num_heads: int, dropout: float = 0.0, *, bias: bool = True) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)  # the variants' one convention

    def attend(self, q, k, v, mask, need_weights):
        key_mask, _ = self.supported_mask(mask, q.shape[-2], k.shape[-2])  # (b|1, h|1, n_k)
        out = efficient_attention(q, k, v, key_mask)  # (batch, heads, n, d_head)
        if not need_weights:
            return out, None
        masked_k = k if key_mask is None else k.masked_fill(~key_mask[..., None], float("-inf"))
        weights = q.softmax(-1) @ masked_k.softmax(-2).transpose(-2, -1)  # (batch, heads, n, n)
        return out, weights
