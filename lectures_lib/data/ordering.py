r"""Section 03's toy task, where order is everything: "did the bit flip here?".

Each sequence is a random arrangement of (almost) equally many 0s and 1s, padded with
``FLIP_PAD_ID``. Every token from the second one on is labelled **1 if it differs from its left
neighbour** (the bit flips here) and **0 if it equals it**. The first token has no left
neighbour and is not labelled (``FLIP_IGNORE_INDEX``, like padding).

Why this task: a model without positional information sees each token and the *bag* of tokens
around it, never their order. Because every sequence of a given length holds the same bag (half
0s, half 1s, shuffled), the bag says almost nothing about a token's neighbour: the best such a
model can do is the small edge of :func:`best_order_blind_accuracy` (about 0.55, chance being
0.5). With positions, a single attention head can look one step to the left and solve it. The task
is *local* (only the offset -1 matters), so it also shows which encodings carry over to sequences
longer than any seen in training. Used in ``03_positional_encoding.ipynb``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from ..utils import check_positive_int, check_tensor

__all__ = [
    "FLIP_PAD_ID",
    "FLIP_IGNORE_INDEX",
    "FlipTask",
    "make_flip_task",
    "best_order_blind_accuracy",
]

FLIP_PAD_ID = 2  # token id of padding (the bits are 0 and 1)
# label of the first token and of padding (PyTorch's cross-entropy default)
FLIP_IGNORE_INDEX = -100


class FlipTask(NamedTuple):
    """A batch of the flip task; a tuple ``(tokens, labels)`` that :func:`fit` accepts as is.

    ``tokens``: ``(n_sequences, max_len)`` int64, bits 0/1 then ``FLIP_PAD_ID``.
    ``labels``: ``(n_sequences, max_len)`` int64, 1 = differs from the left neighbour, 0 = equal,
    ``FLIP_IGNORE_INDEX`` on the first token and on padding.
    """

    tokens: torch.Tensor
    labels: torch.Tensor


def make_flip_task(
    n_sequences: int, min_len: int, max_len: int, *, seed: int = 0
) -> FlipTask:
    """``n_sequences`` sequences with lengths drawn uniformly from ``min_len ... max_len``.

    A sequence of length ``n`` holds ``n // 2`` of one bit and ``n - n // 2`` of the other (which
    bit gets the extra one for odd ``n`` is random), in a uniformly random order. Labels as in
    the module docstring. The same arguments always give the same tensors.
    """
    n_sequences = check_positive_int(n_sequences, "n_sequences")
    min_len = check_positive_int(min_len, "min_len")
    max_len = check_positive_int(max_len, "max_len")
    if min_len < 2:
        raise ValueError(f"min_len must be >= 2 (a label needs a left neighbour), got {min_len}")
    if min_len > max_len:
        raise ValueError(f"min_len must be <= max_len, got min_len={min_len}, max_len={max_len}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__}")
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (n_sequences,), generator=generator)  # (n,)
    extra_one = torch.randint(0, 2, (n_sequences,), generator=generator)  # odd n: who gets +1
    n_ones = lengths // 2 + (lengths % 2) * extra_one  # (n,)
    slots = torch.arange(max_len)  # (max_len,)
    real = slots[None, :] < lengths[:, None]  # (n, max_len): True on the real tokens
    sorted_bits = (slots[None, :] < n_ones[:, None]).long()  # (n, max_len): the ones first
    # A uniformly random order of each sequence's real slots: sort random keys, padding last.
    keys = torch.rand(n_sequences, max_len, generator=generator).masked_fill(~real, 2.0)
    order = keys.argsort(dim=1)  # (n, max_len): slot j of the output takes sorted slot order[j]
    bits = sorted_bits.gather(1, order)  # (n, max_len), real tokens shuffled, padding at the end
    tokens = bits.masked_fill(~real, FLIP_PAD_ID)
    labels = torch.full_like(tokens, FLIP_IGNORE_INDEX)
    flips = (tokens[:, 1:] != tokens[:, :-1]).long()  # (n, max_len - 1): differs from the left
    labels[:, 1:] = flips.masked_fill(~real[:, 1:], FLIP_IGNORE_INDEX)
    return FlipTask(tokens, labels)


def best_order_blind_accuracy(tokens: torch.Tensor, labels: torch.Tensor) -> float:
    r"""Expected accuracy of the best predictor that sees each token and the bag, not the order.

    A self-attention model without positional encoding is such a predictor (its output at a
    token depends only on that token and the multiset of all tokens). For a labelled token of
    value :math:`v` in a sequence of length :math:`n` with :math:`n_{\bar v}` tokens of the
    other value, its left neighbour is a uniformly random one of the other :math:`n-1` tokens,
    so :math:`P(\text{flip}) = p = n_{\bar v} / (n - 1)` and the best guess is right with
    probability :math:`\max(p, 1 - p)`. Returns the mean of that over the labelled tokens.
    """
    check_tensor(tokens, "tokens", ndim=2, dtype="integer")
    check_tensor(labels, "labels", ndim=2, dtype="integer", shape=tuple(tokens.shape))
    real = tokens != FLIP_PAD_ID  # (n, max_len)
    lengths = real.sum(dim=1, keepdim=True)  # (n, 1)
    n_ones = (tokens == 1).sum(dim=1, keepdim=True)  # (n, 1)
    n_other = torch.where(tokens == 1, lengths - n_ones, n_ones)  # (n, max_len)
    p_flip = n_other / (lengths - 1).clamp(min=1)  # (n, max_len)
    labelled = labels != FLIP_IGNORE_INDEX
    if not bool(labelled.any()):
        raise ValueError("labels has no labelled token")
    return torch.maximum(p_flip, 1 - p_flip)[labelled].double().mean().item()
