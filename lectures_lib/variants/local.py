r"""Local (truncated) attention in :math:`O(N \cdot w)` memory: each query meets only its
:math:`2w + 1` neighbours, never the :math:`N \times N` matrix.

Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..attention import masked_softmax
from ..utils import validated
from . import _validate
from .base import PatternAttention
from .patterns import local_mask

__all__ = ["local_attention", "band_to_dense", "LocalAttention"]


def _neighbours(x: torch.Tensor, window: int) -> torch.Tensor:
    """``(..., n, d)`` -> ``(..., n, d, 2 * window + 1)``: slot o of row i holds x[i - window + o]
    (zeros where that position falls outside the sequence)."""
    padded = F.pad(x, (0, 0, window, window))  # (..., n + 2w, d): w zero rows on each side
    return padded.unfold(-2, 2 * window + 1, 1)  # (..., n, d, 2w + 1): a sliding view, no copy


@validated(_validate.local_attention)
def local_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    *,
    need_weights: bool = False,
    key_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Local (truncated) self-attention: query :math:`i` attends only to keys :math:`|i - j| \le w`.

    .. math::
        \text{out}_i = \sum_{j = i - w}^{i + w} \alpha'_{i,j}\, v_j, \qquad
        \alpha'_{i,\cdot} = \operatorname{softmax}_{|i - j| \le w}
        \Big(\frac{q_i \cdot k_j}{\sqrt{d_k}}\Big)

    The same result as ``scaled_dot_product_attention(q, k, v, local_mask(n, window))``, but each
    query only ever meets its :math:`2w + 1` neighbours: the keys and values are padded by
    :math:`w` on both sides and cut into sliding windows, so the scores have shape
    ``(..., n, 2w + 1)`` and memory is :math:`O(N \cdot w \cdot d)` instead of :math:`O(N^2)`.
    A ``window >= n - 1`` is treated as ``n - 1`` (that already covers every key).

    Args:
        q, k, v: ``(..., n, d_k)``, ``(..., n, d_k)``, ``(..., n, d_v)``; self-attention, so the
            number of queries equals the number of keys.
        window: :math:`w \ge 0`, how many neighbours on *each* side a query sees.
        need_weights: also return the banded attention weights.
        key_mask: optional bool ``(..., n)`` broadcasting to ``q.shape[:-1]``, True for the keys
            that may be attended to (a key-padding mask): equal to dense attention under
            ``local_mask(n, window) & key_mask[..., None, :]``. A query with no allowed key in its
            window gets a zero output (the course's convention).
        dropout_p: dropout on the banded weights (pass 0 outside training).

    Returns:
        ``out`` of shape ``(..., n, d_v)``; with ``need_weights=True`` the pair
        ``(out, band_weights)`` where ``band_weights[..., i, o]`` is the weight of key
        ``j = i - w + o`` (0 where ``j`` is outside the sequence), shape ``(..., n, 2w + 1)`` with
        the effective :math:`w = \min(\text{window}, n - 1)`. Each row sums to 1 (or 0).
        :func:`band_to_dense` turns it into the ``(..., n, n)`` matrix (for small ``n`` only).

    Derived in ``06_attention_variants.ipynb``.
    """
    n = q.shape[-2]
    if n == 0:  # an empty sequence: nothing to attend to, nothing to return
        empty_weights = q.new_zeros(*q.shape[:-1], 1)  # (..., 0, 1)
        return (v.clone(), empty_weights) if need_weights else v.clone()
    window = min(window, n - 1)  # a wider window adds only padding slots
    d_k = q.shape[-1]

    keys = _neighbours(k, window)  # (..., n, d_k, 2w + 1)
    values = _neighbours(v, window)  # (..., n, d_v, 2w + 1)
    queries = (q / math.sqrt(d_k)).unsqueeze(-2)  # (..., n, 1, d_k)
    scores = (queries @ keys).squeeze(-2)  # (..., n, 2w + 1): q_i . k_{i-w+o} / sqrt(d_k)

    # Slot o of query i is key j = i - w + o; slots with j < 0 or j >= n are padding.
    key_index = torch.arange(n, device=q.device)[:, None] + torch.arange(
        -window, window + 1, device=q.device
    )  # (n, 2w + 1)
    allowed = (key_index >= 0) & (key_index < n)  # (n, 2w + 1)
    if key_mask is not None:
        # The same sliding view of the key mask: slot o of row i says whether key i - w + o counts.
        padded = F.pad(key_mask.to(q.device), (window, window), value=False)  # (..., n + 2w)
        allowed = allowed & padded.unfold(-1, 2 * window + 1, 1)  # (..., n, 2w + 1)
    band_weights = masked_softmax(scores, allowed)  # (..., n, 2w + 1), rows sum to 1 (or 0)
    if dropout_p > 0.0:
        band_weights = F.dropout(band_weights, p=dropout_p)

    out = (values @ band_weights.unsqueeze(-1)).squeeze(-1)  # (..., n, d_v): sum_o w_o v_{i-w+o}
    return (out, band_weights) if need_weights else out


@validated(_validate.band_to_dense)
def band_to_dense(band_weights: torch.Tensor) -> torch.Tensor:
    """Scatter banded weights ``(..., n, 2w + 1)`` (from :func:`local_attention`) into the dense
    ``(..., n, n)`` matrix, zero outside the band. Builds the N x N matrix: for pictures and checks
    on small ``n`` only. Derived in ``06_attention_variants.ipynb``.
    """
    n, width = band_weights.shape[-2:]
    window = (width - 1) // 2
    # Row i of a matrix with w extra columns on each side: slot o lands in column i + o.
    columns = torch.arange(n, device=band_weights.device)[:, None] + torch.arange(
        width, device=band_weights.device
    )  # (n, 2w + 1)
    padded = band_weights.new_zeros(*band_weights.shape[:-1], n + 2 * window)  # (..., n, n + 2w)
    padded.scatter_(-1, columns.expand(band_weights.shape), band_weights)
    return padded[..., window : window + n]  # (..., n, n): drop the padding columns


class LocalAttention(PatternAttention):
    r"""Multi-head local (truncated) attention, 局部注意力: every head attends only to the
    :math:`2w + 1` neighbours :math:`|i - j| \le w` of each query, computed by
    :func:`local_attention` without ever building the :math:`N \times N` matrix.

    The same parameters and ``forward`` as :class:`~lectures_lib.attention.MultiHeadAttention`;
    it overrides one step, ``attend``. An attention factory:
    ``EncoderTagger(..., attention=partial(LocalAttention, window=8))``.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        window: neighbours on each side (default 8).

    :meth:`pattern` reports the mask, ``local_mask(n, window)``; ``forward`` equals
    ``MultiHeadAttention`` under ``pattern & mask``. Derived in ``06_attention_variants.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        window: int = 8,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias)
        _validate.local_module(self, window)
        self.window = int(window)

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The cells this module may attend to: ``local_mask(n, window)`` ``(n, n)``."""
        return local_mask(q.shape[-2], self.window, device=q.device)

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        out_and_band = local_attention(
            q, k, v, self.window, need_weights=need_weights, key_mask=key_mask,
            dropout_p=dropout_p,
        )
        if not need_weights:
            return out_and_band, None
        out, band = out_and_band
        return out, band_to_dense(band)  # (batch, heads, n, n): only because they were asked for

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, window={self.window}"
