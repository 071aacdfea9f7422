"""Helpers shared by the tests of lectures_lib.layers and lectures_lib.models."""

from __future__ import annotations

import torch

D_MODEL, HEADS, D_FF = 12, 2, 20


def _padding(lengths: list[int], n: int) -> torch.Tensor:
    """PyTorch-style key padding mask: True at padding positions (end of each sequence)."""
    return torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]  # (batch, n)
