r"""Positional encodings (section 03).

Placeholder API, to be completed in ``03_positional_encoding.ipynb``:
``sinusoidal_encoding(n_positions, d_model)`` and the module ``SinusoidalEncoding``.
"""

from __future__ import annotations

import torch
from torch import nn

from .utils import check_positive_int, check_tensor

__all__ = ["sinusoidal_encoding", "SinusoidalEncoding"]


def sinusoidal_encoding(n_positions: int, d_model: int) -> torch.Tensor:
    r"""``(n_positions, d_model)`` table: :math:`PE_{pos, 2i} = \sin(pos / 10000^{2i/d})`,
    :math:`PE_{pos, 2i+1} = \cos(pos / 10000^{2i/d})`, positions from 0."""
    n_positions = check_positive_int(n_positions, "n_positions")
    d_model = check_positive_int(d_model, "d_model")
    positions = torch.arange(n_positions, dtype=torch.float32)[:, None]  # (n_positions, 1)
    even = torch.arange(0, d_model, 2, dtype=torch.float32)  # 2i
    angles = positions / 10000 ** (even / d_model)  # (n_positions, ceil(d/2))
    table = torch.zeros(n_positions, d_model)
    table[:, 0::2] = torch.sin(angles)
    table[:, 1::2] = torch.cos(angles[:, : d_model // 2])
    return table


class SinusoidalEncoding(nn.Module):
    """Adds the sinusoidal table to ``x`` ``(batch, seq, d_model)``; a non-persistent buffer."""

    def __init__(self, d_model: int, max_len: int = 512) -> None:
        super().__init__()
        self.d_model = d_model
        self.register_buffer("table", sinusoidal_encoding(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor(x, "x", ndim=3, dtype="floating")
        if x.shape[1] > self.table.shape[0] or x.shape[2] != self.d_model:
            raise ValueError(
                f"x must have shape (batch, seq <= {self.table.shape[0]}, {self.d_model}), "
                f"got {tuple(x.shape)}"
            )
        return x + self.table[: x.shape[1]].to(x.dtype)
