"""Which masks a variant that never builds the N x N matrix can honour (section 06, part 2).

Variants that sum over keys (linear attention, Performer), compress them (Linformer, compressed
attention) or sort them into blocks (Sinkhorn) cannot apply an arbitrary ``(n_q, n_k)`` mask: they
never have one score per (query, key) cell. What they can honour is a mask that is the same for
every query (key padding, ``(batch, 1, 1, n_k)``), and, for the running-sum variants, the causal
mask (with key padding on top, as the Transformer's decoder builds it). :func:`split_mask` tells
the two apart and raises a clear error for anything else. Derived in ``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch

__all__ = ["split_mask"]


def _as_4d(mask: torch.Tensor) -> torch.Tensor:
    if mask.dim() == 1:  # (n_k,)
        return mask[None, None, None, :]  # (1, 1, 1, n_k)
    if mask.dim() == 2:  # (n_q, n_k)
        return mask[None, None]  # (1, 1, n_q, n_k)
    return mask  # (batch | 1, heads | 1, n_q | 1, n_k)


def split_mask(
    mask: torch.Tensor | None, n_q: int, n_k: int, variant: str, *, allow_causal: bool
) -> tuple[torch.Tensor | None, bool]:
    """Split a mask (True = may attend) into ``(key_mask, causal)``.

    ``key_mask`` is ``(batch | 1, heads | 1, 1, n_k)`` (or None): which keys every query may see;
    ``causal`` says that on top of it query ``i`` sees only keys ``j <= i``. A mask that is neither
    (e.g. a local band, or a different padding per query) raises ``ValueError`` naming the variant.
    """
    if mask is None:
        return None, False
    mask = _as_4d(mask.to(torch.bool))
    if mask.shape[-2] == 1:
        return mask, False  # already one row for every query
    last_row = mask[..., -1:, :]  # (batch | 1, heads | 1, 1, n_k): the query that may see most
    if torch.equal(mask, last_row.expand_as(mask)):
        return last_row, False  # the same row for every query: key padding only
    if allow_causal and n_q == n_k:
        lower = torch.ones(n_q, n_k, dtype=torch.bool, device=mask.device).tril()  # (n, n)
        if torch.equal(mask, (last_row & lower).expand_as(mask)):
            return last_row, True
    supported = "key padding (the same keys for every query)" + (
        " and the causal mask, with or without key padding" if allow_causal else ""
    )
    raise ValueError(
        f"{variant} never builds the N x N matrix, so it can only honour {supported}; got a mask "
        f"of shape {tuple(mask.shape)} that differs from query to query in another way"
        + ("" if allow_causal else " (a causal mask is not supported by this variant)")
    )
