"""Helpers shared by the tests of lectures_lib.layers and lectures_lib.models."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F

D_MODEL, HEADS, D_FF = 12, 2, 20
# Every combination the contract names: norm order x activation x bias x batch_first.
SETTINGS = list(itertools.product([False, True], ["relu", F.gelu], [True, False], [True, False]))


def _padding(lengths: list[int], n: int) -> torch.Tensor:
    """PyTorch-style key padding mask: True at padding positions (end of each sequence)."""
    return torch.arange(n)[None, :] >= torch.tensor(lengths)[:, None]  # (batch, n)


def _to_torch_layout(x: torch.Tensor, batch_first: bool) -> torch.Tensor:
    return x if batch_first else x.transpose(0, 1)
