r"""A learned pattern: the Sinkhorn sorting network (Tay et al. 2020, "Sparse Sinkhorn Attention").

In the lecture's words, which cells of the attention matrix are computed is itself learned
(哪些网格被计算，哪些网格被跳过，也是可以通过神经网络学习出来的): the sequence is cut into blocks, a
small network scores every (block, block) pair, Sinkhorn normalisation turns the scores into a
(soft) permutation of the blocks, and each block of queries attends to its own block and to the
block the permutation sorts next to it: :math:`2Nb` scores and an :math:`n_b \times n_b`
permutation (:math:`n_b = N/b`) instead of :math:`N^2` scores.

Derived in ``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .._validate.settings import check_settings
from .._validate.variants import sinkhorn as rules
from ..attention import attention_scores, masked_softmax
from ..utils import validated
from .base import AttentionVariant

__all__ = ["sinkhorn", "SinkhornAttention"]


@validated(rules.square_log_scores)
def sinkhorn(log_scores: torch.Tensor, n_iters: int = 8) -> torch.Tensor:
    r"""Sinkhorn normalisation: alternately normalise rows and columns of :math:`e^{S}`.

    .. math::
        S \leftarrow S - \log\sum_{j} e^{S_{:,j}} \;\text{(rows)}, \qquad
        S \leftarrow S - \log\sum_{i} e^{S_{i,:}} \;\text{(columns)}, \qquad \text{repeat}

    in log space (``logsumexp``, so large scores never overflow). As the number of iterations
    grows, :math:`e^{S}` converges to a doubly stochastic matrix (every row and every column sums
    to 1; Sinkhorn 1964), a soft permutation; at a low temperature (scores divided by a small
    :math:`\tau`) it approaches a hard one.

    Args:
        log_scores: ``(..., n, n)`` floating, square in the last two dimensions.
        n_iters: number of (row, column) rounds, >= 1.

    Returns:
        ``(..., n, n)`` non-negative; its columns sum to 1 exactly (the last step), its rows
        approximately (closer with every round). Derived in ``07_efficient_attention.ipynb``.
    """
    for _ in range(n_iters):
        log_scores = log_scores - torch.logsumexp(log_scores, dim=-1, keepdim=True)  # rows
        log_scores = log_scores - torch.logsumexp(log_scores, dim=-2, keepdim=True)  # columns
    return log_scores.exp()


class SinkhornAttention(AttentionVariant):
    r"""Sparse Sinkhorn attention (Tay et al. 2020): a learned pattern of blocks.

    Per head, with blocks of ``block_size`` = :math:`b` positions (:math:`n_b = \lceil N/b \rceil`):

    1. a summary of each block: the mean of its queries :math:`\bar q_i` and of its keys
       :math:`\bar k_j`;
    2. the sorting network scores every pair of blocks, :math:`R_{ij} = (W \bar q_i) \cdot
       \bar k_j / \sqrt{d}` (:math:`W` learned), and :math:`P = \operatorname{sinkhorn}(R/\tau)`
       is a soft permutation of the blocks;
    3. block :math:`i` of the keys and values is replaced by :math:`\sum_j P_{ij}\,K_j` (the block
       sorted to place :math:`i`), and each query of block :math:`i` attends to its own block and
       to that sorted block: :math:`2b` keys per query.

    Differences from the paper: the sorting network here is the bilinear score above (it works
    for any length, the paper's MLP needs a fixed number of blocks) and queries always see their
    local block too (the paper's "local + sorted" option). With one block (``block_size >= N``)
    :math:`P = [1]` and it is exactly full attention. The sequence is padded to a multiple of
    :math:`b` with masked positions.

    Args:
        d_model, num_heads, dropout, bias: as in ``MultiHeadAttention``.
        block_size: :math:`b` (default 16).
        n_iters: Sinkhorn rounds (default 8).
        temperature: :math:`\tau` (default 0.75, the paper's); lower is closer to a hard sort.

    Self-attention only (as many queries as keys). Masks: key padding only (a padded key never gets
    weight); a causal mask raises (the paper's causal Sinkhorn balancing is not implemented).
    ``need_weights=True`` returns ``None`` as weights (``returns_weights = False``): a query's
    keys are mixtures of blocks, not positions. Derived in ``07_efficient_attention.ipynb``.
    """

    masks = "keys"
    self_attention_only = True
    returns_weights = False

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        dropout: float = 0.0,
        *,
        bias: bool = True,
        block_size: int = 16,
        n_iters: int = 8,
        temperature: float = 0.75,
    ) -> None:
        super().__init__(d_model, num_heads, dropout=dropout, bias=bias)
        check_settings(block_size=block_size, n_iters=n_iters, temperature=temperature)
        self.block_size, self.n_iters = int(block_size), int(n_iters)
        self.temperature = float(temperature)
        self.sort_proj = nn.Linear(self.d_head, self.d_head, bias=False)  # W of the sorting net

    def _blocks(self, x: torch.Tensor, n_blocks: int) -> torch.Tensor:
        """``(batch, heads, n, d)`` -> ``(batch, heads, n_blocks, b, d)``, zero-padded at the end."""
        pad = n_blocks * self.block_size - x.shape[-2]
        x = F.pad(x, (0, 0, 0, pad))  # (batch, heads, n_blocks * b, d)
        return x.unflatten(-2, (n_blocks, self.block_size))  # (batch, heads, n_blocks, b, d)

    def sort_blocks(self, q_blocks: torch.Tensor, k_blocks: torch.Tensor) -> torch.Tensor:
        """The sorting network: block summaries -> scores ``(..., n_b, n_b)`` -> soft
        permutation :math:`P` (Sinkhorn). Row ``i`` of ``P`` says which blocks go to place ``i``."""
        q_summary = q_blocks.mean(dim=-2)  # (batch, heads, n_b, d)
        k_summary = k_blocks.mean(dim=-2)  # (batch, heads, n_b, d)
        scores = attention_scores(self.sort_proj(q_summary), k_summary)  # (batch, heads, n_b, n_b)
        return sinkhorn(scores / self.temperature, self.n_iters)

    def attend(self, q, k, v, mask, need_weights):
        key_mask, _ = self.supported_mask(mask, q.shape[-2], k.shape[-2])  # key padding only
        n = q.shape[-2]
        if n == 0:
            return v.clone(), None
        n_blocks = -(-n // self.block_size)  # ceil(n / b)
        valid = torch.ones(1, 1, n, dtype=torch.bool, device=q.device)  # (1, 1, n)
        if key_mask is not None:
            valid = valid & key_mask  # (batch | 1, heads | 1, n)
        keep = valid[..., None]  # (batch | 1, heads | 1, n, 1)
        # Padded positions are zeroed so that their content cannot reach the sorting or the keys.
        q_blocks = self._blocks(q, n_blocks)  # (batch, heads, n_b, b, d)
        k_blocks = self._blocks(torch.where(keep, k, torch.zeros_like(k)), n_blocks)
        v_blocks = self._blocks(torch.where(keep, v, torch.zeros_like(v)), n_blocks)
        valid_blocks = self._blocks(keep.to(q.dtype), n_blocks)[..., 0]  # (.., n_b, b): 1 = key

        masked_q_blocks = self._blocks(torch.where(keep, q, torch.zeros_like(q)), n_blocks)
        permutation = self.sort_blocks(masked_q_blocks, k_blocks)  # (batch, heads, n_b, n_b)
        sorted_k = torch.einsum("...ij,...jcd->...icd", permutation, k_blocks)  # (.., n_b, b, d)
        sorted_v = torch.einsum("...ij,...jcd->...icd", permutation, v_blocks)  # (.., n_b, b, d)
        sorted_valid = torch.einsum("...ij,...jc->...ic", permutation, valid_blocks)  # (.., n_b, b)

        keys = torch.cat([k_blocks, sorted_k], dim=-2)  # (batch, heads, n_b, 2b, d): own + sorted
        values = torch.cat([v_blocks, sorted_v], dim=-2)  # (batch, heads, n_b, 2b, d)
        valid_blocks = valid_blocks.expand_as(sorted_valid)  # (batch, heads, n_b, b)
        key_weight = torch.cat([valid_blocks, sorted_valid], dim=-1)[..., None, :]  # (.., 1, 2b)
        scores = attention_scores(q_blocks, keys)  # (batch, heads, n_b, b, 2b)
        # A sorted key that is a mixture of real and padded keys counts as much as its real part.
        scores = scores + torch.log(key_weight.clamp_min(torch.finfo(scores.dtype).tiny))
        weights = masked_softmax(scores, key_weight > 0)  # (batch, heads, n_b, b, 2b)
        if self.dropout_p > 0:
            weights = F.dropout(weights, p=self.dropout_p)
        out = weights @ values  # (batch, heads, n_b, b, d)
        return out.flatten(-3, -2)[..., :n, :], None  # (batch, heads, n, d)

    def extra_repr(self) -> str:
        return (
            f"{super().extra_repr()}, block_size={self.block_size}, n_iters={self.n_iters}, "
            f"temperature={self.temperature}"
        )
