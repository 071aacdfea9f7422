r"""Representative keys (代表性的key): Linformer (Wang et al. 2020) and compressed attention
(Liu et al. 2018).

Attention matrices are close to low rank, so the :math:`N` keys (and values) can be replaced by
:math:`k \ll N` representative ones: a learned :math:`k \times N` matrix :math:`E` mixes them
(Linformer, :math:`\tilde K = E K`), or a strided convolution summarises each run of positions
(compressed attention; the lecture: 可以采取卷积提取). The queries are not reduced: every input
position still needs its own output. Scores are :math:`N \times k`, not :math:`N \times N`.

Derived in ``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validate.settings import check_settings
from ..attention import scaled_dot_product_attention
from .base import AttentionVariant, zero_masked_keys

__all__ = ["LinformerAttention", "CompressedAttention"]


class LinformerAttention(AttentionVariant):
    r"""Linformer: keys and values projected along the sequence to ``k`` representative rows.

    .. math::
        \text{head} = \operatorname{softmax}\!\Big(\frac{Q\,(E K)^\top}{\sqrt{d}}\Big)\,(F V),
        \qquad E, F \in \mathbb{R}^{k \times N}

    Scores are ``(N, k)``: time and memory :math:`O(N k)`. :math:`E` and :math:`F` are learned,
    shared by the heads (the paper's "headwise sharing"); with ``k = N`` and :math:`E = F = I`
    it is exactly full attention. A sequence shorter than ``seq_len`` uses the first columns of
    :math:`E` and :math:`F` (the same as padding it with zero keys).

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        seq_len: :math:`N`, the longest key sequence (the projections have one column per
            position).
        k: number of representative keys (default 64; a ``k >= seq_len`` saves nothing).
        share_kv: use one matrix for keys and values (:math:`E = F`).

    Masks: key padding (padded keys are zeroed before the projection, so they do not enter the
    mixtures; the ``k`` mixtures themselves are always attended to). A causal mask raises: every
    representative key mixes all positions, future ones included.
    ``need_weights=True`` returns ``None`` (``returns_weights = False``: the weights are
    ``(N, k)`` over mixtures of keys, not ``(N, N)``). Derived in ``07_efficient_attention.ipynb``.
    """

    masks = "keys"
    returns_weights = False
    seq_len_limits = ("key",)
    seq_len_reason = "its projections have one column per position"

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        seq_len: int,
        k: int = 64,
        share_kv: bool = False,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        check_settings(seq_len=seq_len, k=k, share_kv=share_kv)
        self.seq_len, self.k = int(seq_len), int(k)
        self.key_projection = nn.Parameter(torch.empty(self.k, self.seq_len))  # E: (k, N)
        nn.init.xavier_normal_(self.key_projection)
        if share_kv:
            self.value_projection = self.key_projection  # F = E
        else:
            self.value_projection = nn.Parameter(torch.empty(self.k, self.seq_len))  # F: (k, N)
            nn.init.xavier_normal_(self.value_projection)
        self.share_kv = share_kv

    def attend(self, q, k, v, mask, need_weights):
        key_mask, _ = self.supported_mask(mask, q.shape[-2], k.shape[-2])  # key padding only
        k, v = zero_masked_keys(key_mask, k, v)
        n_k = k.shape[-2]
        e = self.key_projection[:, :n_k].to(k.dtype)  # (k, n_k)
        f = self.value_projection[:, :n_k].to(v.dtype)  # (k, n_k)
        representative_keys = e @ k  # (batch, heads, k, d_head): E K
        representative_values = f @ v  # (batch, heads, k, d_head): F V
        out, _ = scaled_dot_product_attention(
            q, representative_keys, representative_values, None, self.dropout_p
        )  # (batch, heads, n_q, d_head); the weights are (n_q, k)
        return out, None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, seq_len={self.seq_len}, k={self.k}, share_kv={self.share_kv}"


class CompressedAttention(AttentionVariant):
    r"""Memory-compressed attention (Liu et al. 2018): keys and values summarised by a strided
    convolution, one representative per ``stride`` positions.

    .. math::
        \tilde K = \operatorname{Conv1d}_{\text{kernel}=s,\ \text{stride}=s}(K), \qquad
        \text{head} = \operatorname{softmax}\!\Big(\frac{Q \tilde K^\top}{\sqrt{d}}\Big)\,\tilde V

    Scores are ``(N, N/s)``. Unlike Linformer it needs no ``seq_len`` (the convolution slides).
    The convolutions (one for keys, one for values) are shared by the heads. With ``stride=1`` and
    identity convolutions it is exactly full attention. The keys are zero-padded to a multiple of
    ``s``.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        stride: :math:`s`, positions per representative key (default 4).

    Masks: key padding (padded keys are zeroed first; a representative whose window holds no real
    key is masked). A causal mask raises: a window mixes a position with later ones.
    ``need_weights=True`` returns ``None`` (``returns_weights = False``: one weight per
    representative, not per key). Derived in ``07_efficient_attention.ipynb``.
    """

    masks = "keys"
    returns_weights = False

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        stride: int = 4,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        check_settings(stride=stride)
        self.stride = int(stride)
        self.key_conv = nn.Conv1d(self.d_head, self.d_head, kernel_size=stride, stride=stride)
        self.value_conv = nn.Conv1d(self.d_head, self.d_head, kernel_size=stride, stride=stride)

    def _compress(self, conv: nn.Conv1d, x: torch.Tensor) -> torch.Tensor:
        """``(batch, heads, n, d)`` -> ``(batch, heads, ceil(n / s), d)``."""
        batch, heads, n, d = x.shape
        pad = -n % self.stride
        n_c = (n + pad) // self.stride
        x = F.pad(x, (0, 0, 0, pad))  # (batch, heads, n + pad, d)
        x = x.reshape(batch * heads, n + pad, d).transpose(1, 2)  # (batch * heads, d, n + pad)
        x = conv(x)  # (batch * heads, d, n_c)
        return x.transpose(1, 2).reshape(batch, heads, n_c, d)  # (batch, heads, n_c, d)

    def attend(self, q, k, v, mask, need_weights):
        key_mask, _ = self.supported_mask(mask, q.shape[-2], k.shape[-2])  # key padding only
        n_k = k.shape[-2]
        if n_k == 0:
            return q.new_zeros(*q.shape[:-1], v.shape[-1]), None
        k, v = zero_masked_keys(key_mask, k, v)
        compressed_keys = self._compress(self.key_conv, k)  # (batch, heads, n_c, d)
        compressed_values = self._compress(self.value_conv, v)  # (batch, heads, n_c, d)
        compressed_mask = None
        if key_mask is not None:
            pad = -n_k % self.stride
            windows = F.pad(key_mask, (0, pad)).unflatten(-1, (-1, self.stride))  # (.., n_c, s)
            compressed_mask = windows.any(dim=-1)[..., None, :]  # (batch | 1, heads | 1, 1, n_c)
        out, _ = scaled_dot_product_attention(
            q, compressed_keys, compressed_values, compressed_mask, self.dropout_p
        )  # (batch, heads, n_q, d_head)
        return out, None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, stride={self.stride}"
