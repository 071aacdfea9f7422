"""The checks of :mod:`lectures_lib.masks`, beside it: the mask contract's ``check_mask``
(public: ``masks.py`` re-exports it; every attention of the course checks its mask with it), the
key-padding form given on its own (``key_padding_mask=``: ``padding_shape``), and the door rules
of the two builders. Imports only :mod:`lectures_lib.utils`: ``masks.py`` imports nothing from
the validators, which import ``masks.py`` and this file.
"""

from __future__ import annotations

import torch

from .utils import check_device, check_non_negative_int, check_positive_int, check_tensor


def _padding_hint(scores_ndim: int) -> str:
    if scores_ndim == 4:  # (batch, heads, n_q, n_k)
        return (
            "A key-padding mask (batch, n_keys) needs shape (batch, 1, 1, n_keys): "
            "key_padding_mask(), or pass it as key_padding_mask=."
        )
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


def padding_shape(padding: object, name: str, batch: int, n_keys: int) -> None:
    """A key-padding mask given on its own (``key_padding_mask=``): bool ``(batch, n_keys)``,
    True = a real token (the course's convention; PyTorch's is the opposite)."""
    check_tensor(padding, name, dtype="bool")
    if tuple(padding.shape) != (batch, n_keys):
        raise ValueError(
            f"{name} must have shape (batch, n_keys) = ({batch}, {n_keys}), True = a real token "
            f"(PyTorch's key_padding_mask is True at padding: pass ~theirs), got "
            f"{tuple(padding.shape)}"
        )


def mask_size(n: object, device: object = None) -> None:
    check_positive_int(n, "n")
    check_device(device)


def sequence_lengths(lengths: object, max_len: object = None) -> None:
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)
    check_tensor(lengths, "lengths", ndim=1)
    if lengths.numel() == 0:
        raise ValueError("lengths is empty: give one length per sequence of the batch")
    check_tensor(lengths, "lengths", dtype="integer")
    if int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    longest = int(lengths.max())
    if max_len is None:
        return
    max_len = check_non_negative_int(max_len, "max_len")
    if longest > max_len:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")
