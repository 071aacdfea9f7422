r"""What every sparse-pattern attention module of section 06 shares: a pattern it reports, an
efficient ``attend`` that never builds the :math:`N \times N` matrix, and the rule for masks.

A :class:`PatternAttention` is :class:`~lectures_lib.attention.MultiHeadAttention` with one step
changed, ``attend``. A subclass says two things:

* :meth:`PatternAttention.pattern` ``(q, k) -> bool mask``: the cells it may attend to, as a mask
  broadcasting to ``(batch, heads, n, n)`` (True = may attend). It builds ``n x n`` and exists for
  pictures and checks: the tests compare the module with dense attention under this mask;
* :meth:`PatternAttention.efficient_attend` ``(q, k, v, key_mask, need_weights, dropout_p)``: the
  same attention computed without the ``n x n`` matrix, with an optional key-padding mask
  ``key_mask`` ``(batch|1, heads|1, n)`` (True = this key may be attended to).

**Masks.** The mask ``forward`` receives is combined with the pattern by ``&``. A key-padding mask
(1-D ``(n,)``, or 4-D ``(batch|1, heads|1, 1, n)`` as ``EncoderTagger`` passes it) is folded into
the efficient path. A mask with a query dimension (2-D ``(n, n)``, 4-D ``(..., n, n)``) is itself
an ``n x n`` matrix, so nothing can be saved: the module then computes dense attention under
``pattern & mask`` (the same numbers, and it says so here rather than refusing the mask).
Derived in ``06_attention_variants.ipynb``.
"""

from __future__ import annotations

import torch

from ..attention import MultiHeadAttention, fused_attention, scaled_dot_product_attention
from ..utils import at_boundary, check_tensor

__all__ = ["PatternAttention", "check_key_mask", "as_key_mask"]


def check_key_mask(key_mask: object, leading_shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """A key-padding mask for the efficient functions: bool ``(..., n)`` whose dimensions
    (aligned from the right) equal those of ``leading_shape`` = ``q.shape[:-1]`` or are 1."""
    check_tensor(key_mask, "key_mask", dtype="bool")
    leading_shape = tuple(leading_shape)
    fits = 1 <= key_mask.dim() <= len(leading_shape) and key_mask.shape[-1] == leading_shape[-1]
    if fits:
        fits = all(
            size in (1, target)
            for size, target in zip(reversed(key_mask.shape), reversed(leading_shape), strict=False)
        )
    if not fits:
        raise ValueError(
            f"key_mask must have shape (..., n) broadcasting to {leading_shape} (the queries' "
            f"leading dimensions, n = {leading_shape[-1]} keys; each dimension equal or 1), got "
            f"{tuple(key_mask.shape)}"
        )
    return key_mask


def as_key_mask(mask: torch.Tensor | None) -> tuple[bool, torch.Tensor | None]:
    """``(is_key_mask, key_mask)``: whether a checked ``forward`` mask only masks keys, and then
    the key mask ``(n,)`` or ``(batch|1, heads|1, n)`` it amounts to."""
    if mask is None:
        return True, None
    if at_boundary():
        check_tensor(mask, "mask", dtype="bool")
        if mask.dim() not in (1, 2, 4):
            raise ValueError(
                "mask must have shape (n_k,), (n_q, n_k) or (batch|1, heads|1, n_q|1, n_k), got "
                f"{tuple(mask.shape)}"
            )
    if mask.dim() == 1:  # (n,)
        return True, mask
    if mask.shape[-2] == 1:  # (1, n) or (batch|1, heads|1, 1, n): one row for every query
        return True, mask[..., 0, :]  # (n,) or (batch|1, heads|1, n)
    return False, None


class PatternAttention(MultiHeadAttention):
    """Base of the section-06 modules that attend under a sparse pattern (see the module doc).

    Self-attention only: queries and keys come from sequences of the same length. Subclasses
    implement :meth:`pattern` and :meth:`efficient_attend`; ``attend`` picks the path.
    """

    def check_inputs(self, query, key, value, mask, need_weights) -> None:
        super().check_inputs(query, key, value, mask, need_weights)
        if query.shape[1] != key.shape[1]:
            raise ValueError(
                f"{type(self).__name__} is self-attention under a pattern over positions: query "
                f"and key must have the same length, got query {tuple(query.shape)} and key "
                f"{tuple(key.shape)}"
            )

    def pattern(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        """The cells this module may attend to, for per-head ``q``, ``k`` ``(batch, heads, n,
        d_head)``: a bool mask broadcasting to ``(batch, heads, n, n)``. Builds ``n x n``."""
        raise NotImplementedError

    def efficient_attend(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        key_mask: torch.Tensor | None,
        need_weights: bool,
        dropout_p: float,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``attend`` without the ``n x n`` matrix (weights ``n x n`` only if asked for)."""
        raise NotImplementedError

    def attend(self, q, k, v, mask, need_weights):
        dropout_p = self.dropout if self.training else 0.0
        only_keys, key_mask = as_key_mask(mask)
        if only_keys:
            return self.efficient_attend(q, k, v, key_mask, need_weights, dropout_p)
        # A full (n_q, n_k) mask is already n x n: dense attention under pattern & mask.
        combined = self.pattern(q, k) & mask.to(q.device)  # (batch|1, heads|1, n, n)
        if need_weights:
            return scaled_dot_product_attention(q, k, v, combined, dropout_p)
        return fused_attention(q, k, v, combined, dropout_p), None
