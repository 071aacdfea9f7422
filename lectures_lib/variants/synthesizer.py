r"""Synthesizer (Tay et al. 2021): "do we need q and k to compute attention?"
(Synthesizer认为：Attention矩阵不一定要通过q和k来产生，也可以直接作为神经网络的参数).

The attention matrix is *synthesised* without any query-key dot product:

* Dense Synthesizer: each token's row of weights comes from a small MLP of that token alone,
  :math:`B_i = W_2\,\operatorname{relu}(W_1 x_i)`, one score per key position;
* Random Synthesizer: the matrix is a parameter :math:`R`, the same for every input.

Both still build the :math:`N \times N` weights (that is the method: they remove the dot products,
not the matrix), so every mask, causal included, is honoured by ``masked_softmax``. Both need
``seq_len``: a score per key *position*. Derived in ``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validate.settings import check_settings
from ..attention import masked_softmax
from .base import AttentionVariant

__all__ = ["DenseSynthesizerAttention", "RandomSynthesizerAttention"]


class _SynthesizerBase(AttentionVariant):
    """Shared by both synthesizers: a fixed ``seq_len`` and ``weights @ values``."""

    seq_len_limits = ("query", "key")
    seq_len_reason = "one score per position"

    def __init__(self, d_model, num_heads, dropout=0.0, *, bias=True, seq_len, hidden=None,
                 fixed=False):
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        check_settings(seq_len=seq_len, hidden=hidden, fixed=fixed)
        self.seq_len = int(seq_len)

    def _weighted_values(self, scores, v, mask, need_weights):
        weights = masked_softmax(scores, mask)  # (batch | 1, heads, n_q, n_k)
        if self.dropout_p > 0:
            weights = F.dropout(weights, p=self.dropout_p)
        out = weights @ v  # (batch, heads, n_q, d_head)
        if need_weights:
            return out, weights.expand(v.shape[0], *weights.shape[1:])
        return out, None

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, seq_len={self.seq_len}"


class DenseSynthesizerAttention(_SynthesizerBase):
    r"""Dense Synthesizer: the weights of token :math:`i` come from token :math:`i` alone.

    .. math::
        B_{i,:} = W_2\, \operatorname{relu}(W_1\, q_i + b_1) + b_2 \in \mathbb{R}^{\text{seq\_len}},
        \qquad \text{head} = \operatorname{softmax}(B_{:, :N_k})\, V

    per head, where :math:`q_i` is the token's projection by ``q_proj`` (so ``q_proj`` and
    :math:`W_1` together are the paper's first layer); the keys are not used (``k_proj`` is
    kept for the shared ``project`` step and receives no gradient). A query cannot see the
    *content* of the keys: where a token must look depends on what is elsewhere, it cannot learn.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        seq_len: the longest key sequence (one output of the MLP per key position).
        hidden: width of the MLP (default ``d_model / num_heads``), shared by the heads.

    Every mask is honoured (causal too). Derived in ``07_efficient_attention.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        seq_len: int,
        hidden: int | None = None,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias, seq_len=seq_len, hidden=hidden)
        self.hidden = int(hidden) if hidden is not None else self.d_head
        self.synth_hidden = nn.Linear(self.d_head, self.hidden)  # W_1
        self.synth_out = nn.Linear(self.hidden, self.seq_len)  # W_2: one score per key position

    def attend(self, q, k, v, mask, need_weights):
        n_k = v.shape[-2]
        scores = self.synth_out(torch.relu(self.synth_hidden(q)))  # (batch, heads, n_q, seq_len)
        return self._weighted_values(scores[..., :n_k], v, mask, need_weights)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, hidden={self.hidden}"


class RandomSynthesizerAttention(_SynthesizerBase):
    r"""Random Synthesizer: the attention matrix is a learned parameter :math:`R`, one per head,
    the same for every input.

    .. math::
        \text{head} = \operatorname{softmax}(R_{:N_q, :N_k})\, V, \qquad
        R \in \mathbb{R}^{\text{heads} \times \text{seq\_len} \times \text{seq\_len}}

    Neither queries nor keys are used (``q_proj`` and ``k_proj`` receive no gradient). It can
    learn *where* to look (a fixed pattern, e.g. "the previous token"), never *what* to look for.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        seq_len: the longest sequence; :math:`R` is ``(num_heads, seq_len, seq_len)``.
        fixed: keep :math:`R` at its random initial value (the paper's "fixed random" variant).

    Every mask is honoured (causal too). Derived in ``07_efficient_attention.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        seq_len: int,
        fixed: bool = False,
    ) -> None:
        super().__init__(d_model, num_heads, dropout, bias=bias, seq_len=seq_len, fixed=fixed)
        self.fixed = fixed
        scores = torch.randn(self.num_heads, self.seq_len, self.seq_len) * 0.02
        self.random_scores = nn.Parameter(scores, requires_grad=not fixed)  # R

    def attend(self, q, k, v, mask, need_weights):
        n_q, n_k = q.shape[-2], v.shape[-2]
        scores = self.random_scores[:, :n_q, :n_k].to(v.dtype)  # (heads, n_q, n_k), no q, no k
        return self._weighted_values(scores[None], v, mask, need_weights)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, fixed={self.fixed}"
