r"""Local (truncated) attention in :math:`O(N \cdot w)` memory: each query meets only its
:math:`2w + 1` neighbours, never the :math:`N \times N` matrix.

Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..utils import at_boundary, check_bool, check_non_negative_int, check_qkv, check_tensor

__all__ = ["local_attention", "band_to_dense"]


def _neighbours(x: torch.Tensor, window: int) -> torch.Tensor:
    """``(..., n, d)`` -> ``(..., n, d, 2 * window + 1)``: slot o of row i holds x[i - window + o]
    (zeros where that position falls outside the sequence)."""
    padded = F.pad(x, (0, 0, window, window))  # (..., n + 2w, d): w zero rows on each side
    return padded.unfold(-2, 2 * window + 1, 1)  # (..., n, d, 2w + 1): a sliding view, no copy


def local_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int,
    *,
    need_weights: bool = False,
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

    Returns:
        ``out`` of shape ``(..., n, d_v)``; with ``need_weights=True`` the pair
        ``(out, band_weights)`` where ``band_weights[..., i, o]`` is the weight of key
        ``j = i - w + o`` (0 where ``j`` is outside the sequence), shape ``(..., n, 2w + 1)`` with
        the effective :math:`w = \min(\text{window}, n - 1)`. Each row sums to 1.
        :func:`band_to_dense` turns it into the ``(..., n, n)`` matrix (for small ``n`` only).

    Derived in ``06_attention_variants.ipynb``.
    """
    if at_boundary():
        check_qkv(q, k, v)
    window = check_non_negative_int(window, "window")
    n = q.shape[-2]
    if k.shape[-2] != n:
        raise ValueError(
            "local attention is self-attention: it needs as many queries as keys (query i looks "
            f"at keys i - window ... i + window), got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    check_bool(need_weights, "need_weights")
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
    in_sequence = (key_index >= 0) & (key_index < n)  # (n, 2w + 1)
    # Same masking constant as the dense path: padding slots get exactly 0 weight. Slot w (the
    # query itself) is always in the sequence, so no row is fully masked.
    scores = scores.masked_fill(~in_sequence, torch.finfo(scores.dtype).min)
    band_weights = torch.softmax(scores, dim=-1)  # (..., n, 2w + 1), rows sum to 1

    out = (values @ band_weights.unsqueeze(-1)).squeeze(-1)  # (..., n, d_v): sum_o w_o v_{i-w+o}
    return (out, band_weights) if need_weights else out


def band_to_dense(band_weights: torch.Tensor) -> torch.Tensor:
    """Scatter banded weights ``(..., n, 2w + 1)`` (from :func:`local_attention`) into the dense
    ``(..., n, n)`` matrix, zero outside the band. Builds the N x N matrix: for pictures and checks
    on small ``n`` only. Derived in ``06_attention_variants.ipynb``.
    """
    check_tensor(band_weights, "band_weights", dtype="floating")
    if band_weights.dim() < 2 or band_weights.shape[-1] % 2 == 0:
        raise ValueError(
            "band_weights must have shape (..., n, 2 * window + 1) (an odd last dimension), "
            f"got {tuple(band_weights.shape)}"
        )
    n, width = band_weights.shape[-2:]
    window = (width - 1) // 2
    # Row i of a matrix with w extra columns on each side: slot o lands in column i + o.
    columns = torch.arange(n, device=band_weights.device)[:, None] + torch.arange(
        width, device=band_weights.device
    )  # (n, 2w + 1)
    padded = band_weights.new_zeros(*band_weights.shape[:-1], n + 2 * window)  # (..., n, n + 2w)
    padded.scatter_(-1, columns.expand(band_weights.shape), band_weights)
    return padded[..., window : window + n]  # (..., n, n): drop the padding columns
