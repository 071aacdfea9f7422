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
  :func:`key_padding_mask`, shape ``(batch, 1, 1, n_keys)``, never as 2-D, or hand the
  ``(batch, n_keys)`` form to ``MultiHeadAttention(...)(q, k, v, key_padding_mask=...)``, which
  keeps it apart from ``mask`` as PyTorch does.

``causal_mask`` is derived in ``05_transformer_decoder.ipynb`` (used from 01 on) and
``key_padding_mask`` in ``02_multi_head_attention.ipynb``. Everything here is also importable from
:mod:`lectures_lib.attention`.
"""

from __future__ import annotations

import torch

from . import _mask_check as rules  # the checks of this file, beside it
from ._mask_check import check_mask  # the contract's check: public, re-exported
from .utils import validated

__all__ = ["causal_mask", "key_padding_mask", "check_mask"]


@validated(rules.mask_size)
def causal_mask(n: int, device: torch.device | str | None = None) -> torch.Tensor:
    """Boolean ``(n, n)`` mask, True on and below the diagonal: position i may attend to j <= i.

    Derived in ``05_transformer_decoder.ipynb`` (masked self-attention); used from section 01 on.
    """
    return torch.ones(n, n, dtype=torch.bool, device=device).tril()


@validated(rules.sequence_lengths)
def key_padding_mask(
    lengths: torch.Tensor | list[int], max_len: int | None = None
) -> torch.Tensor:
    """Mask of shape ``(batch, 1, 1, max_len)``: True for the real (non-padding) keys.

    ``lengths[b]`` is the number of real tokens of sequence ``b`` (padding at the end). The two
    singleton dimensions let the mask broadcast over heads and queries. (``MultiHeadAttention``
    also takes the ``(batch, n_keys)`` form on its own, as ``forward(..., key_padding_mask=)``.)
    Derived in ``02_multi_head_attention.ipynb``.
    """
    lengths = torch.as_tensor(lengths)  # (batch,)
    max_len = int(lengths.max()) if max_len is None else max_len
    positions = torch.arange(max_len, device=lengths.device)  # (max_len,)
    valid = positions[None, :] < lengths[:, None]  # (batch, max_len)
    return valid[:, None, None, :]  # (batch, 1, 1, max_len)


def with_key_padding(mask: torch.Tensor | None, padding: torch.Tensor | None) -> torch.Tensor | None:
    """``mask`` AND a key-padding mask ``padding`` ``(batch, n_keys)`` (True = a real token),
    which becomes ``(batch, 1, 1, n_keys)``: the same for every head and every query. This is
    what ``MultiHeadAttention.forward(..., key_padding_mask=)`` does with PyTorch's separate
    argument, so a padding mask is never read as an ``(n_queries, n_keys)`` mask. Either may be
    None."""
    if padding is None:
        return mask
    padding = padding[:, None, None, :]  # (batch, 1, 1, n_keys)
    return padding if mask is None else mask & padding
