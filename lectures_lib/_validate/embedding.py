"""The rules of :mod:`lectures_lib.embedding`: token ids in the vocabulary, the embedding's sizes,
positions within ``max_len``.
"""

from __future__ import annotations

import torch
from torch import nn

from ..utils import check_tensor
from .settings import check_settings


def token_ids(tokens: object, name: str, vocab_size: int) -> torch.Tensor:
    """``tokens`` must be an integer tensor ``(batch, seq)`` of ids in ``[0, vocab_size)``."""
    check_tensor(tokens, name, ndim=2, dtype="integer")
    if tokens.numel():
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"{name} holds token ids in [{low}, {high}], but the vocabulary has "
                f"{vocab_size} entries: ids must lie in [0, {vocab_size - 1}]"
            )
    return tokens


def embedding_sizes(vocab_size: object, d_model: object, max_len: object, dropout: object,
                    pad_id: object, positional_encoding: object) -> None:
    check_settings(vocab_size=vocab_size, d_model=d_model, max_len=max_len, pad_id=pad_id)
    if pad_id is not None and pad_id >= vocab_size:
        raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of {vocab_size}")
    check_settings(positional_encoding=positional_encoding, dropout=dropout)


def embedding_inputs(module: nn.Module, tokens: object, name: str = "tokens") -> None:
    """``tokens``: integer ids ``(batch, seq)`` in the vocabulary, at most ``max_len`` long."""
    token_ids(tokens, name, module.vocab_size)
    if tokens.shape[1] > module.max_len:
        raise ValueError(
            f"{name} has {tokens.shape[1]} positions (shape {tuple(tokens.shape)}), more "
            f"than max_len={module.max_len} of the positional encoding"
        )


def embedding_offset_inputs(self: nn.Module, tokens: object, offset: object = 0) -> None:
    self.check_inputs(tokens)
    check_settings(offset=offset)
    if offset + tokens.shape[1] > self.max_len:
        raise ValueError(
            f"positions {offset} ... {offset + tokens.shape[1] - 1} exceed max_len="
            f"{self.max_len} of the positional encoding"
        )
