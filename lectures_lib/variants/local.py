r"""Local (truncated) attention in :math:`O(N \cdot w)` memory: each query meets only its
:math:`2w + 1` neighbours, never the :math:`N \times N` matrix.

Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .._validate.settings import check_settings
from .._validate.variants import local as rules
from ..attention import masked_softmax
from ..utils import validated
from .base import PatternAttention
from .patterns import local_mask

__all__ = ["local_attention", "band_to_dense", "LocalAttention"]


@validated(rules.local_qkv)
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

    The same result as ``scaled_dot_product_attention(q, k, v, local_mask(n, window))``, computed
    in **blocks**: the queries are cut into blocks of :math:`b = \max(w, 1)`, and every key that
    block :math:`c` may see lies in key blocks :math:`c - 1, c, c + 1`. So each block computes one
    ``b x 3b`` score matrix against *views* of the keys (padded once by one block on each side):
    scores ``(..., N / b, b, 3b)``, about :math:`3 N w` numbers, and no per-query copies of the
    neighbours (sliding windows with ``unfold`` would copy the keys :math:`2w + 1` times inside
    the product). Memory :math:`O(N (w + d))` instead of :math:`O(N^2)`.
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
    n, d_k = q.shape[-2], q.shape[-1]
    lead = q.shape[:-2]
    if n == 0:  # an empty sequence: nothing to attend to, nothing to return
        empty_weights = q.new_zeros(*q.shape[:-1], 1)  # (..., 0, 1)
        return (v.clone(), empty_weights) if need_weights else v.clone()
    window = min(window, n - 1)  # a wider window adds only padding slots
    b = max(window, 1)  # block size: every key of query block c lies in key blocks c - 1, c, c + 1
    n_blocks = -(-n // b)
    pad = n_blocks * b - n
    queries = F.pad(q, (0, 0, 0, pad)).reshape(*lead, n_blocks, b, d_k)  # (..., nb, b, d_k)
    keys = F.pad(k, (0, 0, b, b + pad)).reshape(*lead, n_blocks + 2, b, d_k)  # one zero block each side
    values = F.pad(v, (0, 0, b, b + pad)).reshape(*lead, n_blocks + 2, b, v.shape[-1])
    near = [slice(s, s + n_blocks) for s in range(3)]  # padded blocks c, c + 1, c + 2: views
    scores = torch.cat(
        [queries @ keys[..., s, :, :].transpose(-2, -1) for s in near], dim=-1
    ) / math.sqrt(d_k)  # (..., nb, b, 3b)

    # Query i = c b + r meets key j = (c - 1) b + t: allowed when |r + b - t| <= w and 0 <= j < n.
    r = torch.arange(b, device=q.device)[:, None]  # (b, 1)
    t = torch.arange(3 * b, device=q.device)[None, :]  # (1, 3b)
    j = torch.arange(n_blocks, device=q.device)[:, None, None] * b - b + t  # (nb, 1, 3b)
    allowed = ((r + b - t).abs() <= window) & (j >= 0) & (j < n)  # (nb, b, 3b)
    if key_mask is not None:  # the same blocks of the key mask
        padded = F.pad(key_mask.to(q.device), (b, b + pad), value=False)  # (..., (nb + 2) b)
        blocks = padded.reshape(*padded.shape[:-1], n_blocks + 2, b)  # (..., nb + 2, b)
        seen = torch.cat([blocks[..., s, :] for s in near], dim=-1)  # (..., nb, 3b)
        allowed = allowed & seen[..., :, None, :]  # (..., nb, b, 3b)
    weights = masked_softmax(scores, allowed)  # (..., nb, b, 3b), rows sum to 1 (or 0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    out = sum(weights[..., i * b : (i + 1) * b] @ values[..., s, :, :] for i, s in enumerate(near))
    out = out.reshape(*lead, n_blocks * b, v.shape[-1])[..., :n, :]  # (..., n, d_v)
    if not need_weights:
        return out
    # Band slot o of row r is block column r + b - w + o.
    slots = r + b - window + torch.arange(2 * window + 1, device=q.device)  # (b, 2w + 1)
    band = weights.gather(-1, slots.expand(*weights.shape[:-1], 2 * window + 1))  # (.., nb, b, 2w+1)
    return out, band.reshape(*lead, n_blocks * b, 2 * window + 1)[..., :n, :]


@validated(rules.band_shape)
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
        check_settings(window=window)
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
