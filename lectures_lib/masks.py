r"""Attention masks: the course's convention, the two everyday masks, and the check of a mask.

Conventions (the course's contract):

* masks are boolean and **True means "may attend"**, as in
  :func:`torch.nn.functional.scaled_dot_product_attention`. ``nn.MultiheadAttention`` uses the
  *opposite* for its boolean ``attn_mask``/``key_padding_mask`` (True = "blocked");
* a mask broadcasts to the scores ``(batch, heads, n_queries, n_keys)``: it is 2-D
  ``(n_queries, n_keys)`` (one pattern for every example and head), 4-D, or 1-D ``(n_keys,)``,
  and each of its dimensions (aligned from the right) equals the score dimension it lines up with
  or is 1, so a mask never broadcasts by accident;
* a 3-D mask for 4-D scores is refused: ``(batch, n_q, n_k)`` and ``(heads, n_q, n_k)`` would be
  indistinguishable when ``batch == heads``. Say which you mean: ``mask[:, None]`` (per example)
  or ``mask[None]`` (per head);
* a 2-D mask is always read as ``(n_queries, n_keys)``, one pattern for every example and head.
  When ``batch == n_queries`` a ``(batch, n_keys)`` key-padding mask has the same shape and is
  read that way, silently meaning something else: build padding masks with
  :func:`key_padding_mask`, shape ``(batch, 1, 1, n_keys)``, never as 2-D.

``causal_mask`` is derived in ``05_transformer_decoder.ipynb`` (used from 01 on) and
``key_padding_mask`` in ``02_multi_head_attention.ipynb``. Everything here is also importable from
:mod:`lectures_lib.attention`.
"""

from __future__ import annotations

import torch

from .utils import check_device, check_non_negative_int, check_positive_int, check_tensor

__all__ = ["causal_mask", "key_padding_mask", "check_mask"]


def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True on and below the diagonal: position i may attend to j <= i.

    Derived in ``05_transformer_decoder.ipynb`` (masked self-attention); used from section 01 on.
    """
    n = check_positive_int(n, "n")
    device = check_device(device)
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


def key_padding_mask(
    lengths: torch.Tensor | list[int], max_len: int | None = None
) -> torch.Tensor:
    """Mask of shape ``(batch, 1, 1, max_len)``: True for the real (non-padding) keys.

    ``lengths[b]`` is the number of real tokens of sequence ``b`` (padding at the end). The two
    singleton dimensions let the mask broadcast over heads and queries.
    Derived in ``02_multi_head_attention.ipynb``.
    """
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)
    check_tensor(lengths, "lengths", ndim=1)
    if lengths.numel() == 0:
        raise ValueError("lengths is empty: give one length per sequence of the batch")
    check_tensor(lengths, "lengths", dtype="integer")
    if lengths.numel() and int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    longest = int(lengths.max()) if lengths.numel() else 0
    if max_len is None:
        max_len = longest
    max_len = check_non_negative_int(max_len, "max_len")
    if longest > max_len:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    valid = positions[None, :] < lengths[:, None]  # (batch, max_len)
    return valid[:, None, None, :]  # (batch, 1, 1, max_len)


def _padding_hint(scores_ndim: int) -> str:
    if scores_ndim == 4:  # (batch, heads, n_q, n_k)
        return "A key-padding mask (batch, n_keys) needs shape (batch, 1, 1, n_keys): key_padding_mask()."
    if scores_ndim == 3:  # (batch, n_q, n_k): single-head attention
        return "A key-padding mask (batch, n_keys) needs shape (batch, 1, n_keys): key_padding_mask(...)[:, 0]."
    return ""


def check_mask(mask: object, scores_shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """Validate a boolean attention mask against the shape of the scores it will mask.

    ``scores_shape`` is ``(..., n_queries, n_keys)``. The mask must be ``torch.bool`` (True = may
    attend), have at most as many dimensions as the scores (but not 3 for 4-D scores: that is
    ambiguous), and each of its dimensions (right-aligned) must equal the corresponding score
    dimension or be 1. A 2-D mask is ``(n_queries, n_keys)``.
    Returns the mask unchanged.
    """
    if not isinstance(scores_shape, (tuple, list, torch.Size)) or not all(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in scores_shape
    ):
        raise TypeError(
            "scores_shape must be a tuple of sizes (..., n_queries, n_keys), got "
            f"{scores_shape!r}"
        )
    scores_shape = tuple(scores_shape)
    if len(scores_shape) < 2:
        raise ValueError(
            f"scores_shape must have at least 2 sizes (..., n_queries, n_keys), got {scores_shape}"
        )
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}. "
            "An additive float mask (0 / -inf) is not accepted: convert it with `mask == 0`."
        )
    if len(scores_shape) == 4 and mask.dim() == 3:
        raise ValueError(
            f"mask with shape {tuple(mask.shape)} is 3-D, which is ambiguous for attention scores "
            f"of shape {scores_shape} (batch, heads, n_queries, n_keys): is its first dimension "
            "the batch or the heads? Use mask[:, None] for a per-example mask (batch, 1, n_q, n_k) "
            "or mask[None] for a per-head mask (1, heads, n_q, n_k)."
        )
    if mask.dim() > len(scores_shape) or mask.dim() == 0:
        raise ValueError(
            f"mask with shape {tuple(mask.shape)} cannot be matched to attention scores of shape "
            f"{scores_shape} (batch..., n_queries, n_keys)"
        )
    for mask_size, score_size in zip(reversed(mask.shape), reversed(scores_shape), strict=False):
        if mask_size not in (1, score_size):
            raise ValueError(
                f"mask with shape {tuple(mask.shape)} does not fit attention scores of shape "
                f"{scores_shape}: each mask dimension (aligned from the right) must equal the "
                "score dimension or be 1. " + _padding_hint(len(scores_shape))
            )
    return mask
