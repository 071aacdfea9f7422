"""The rules of :mod:`lectures_lib.positional`: sizes, the frequency base, positions within a
table, rotary pairs.
"""

from __future__ import annotations

import torch
from torch import nn

from ..utils import check_tensor
from .attention import position_values
from .settings import check_settings, frequency_base, settings

sinusoidal_table_args = settings("n_positions", "d_model", "base", "dtype", "device")
rotary_angle_args = settings("positions", "d_head", "base", "dtype", positions=position_values)


_TOO_LONG = {  # why a table of max_len positions cannot take more
    "SinusoidalEncoding": "SinusoidalEncoding was built with max_len={max_len}: build it with a "
                          "larger max_len",
    "LearnedPositionalEmbedding": "LearnedPositionalEmbedding only has vectors for "
                                  "max_len={max_len} positions; a learned table cannot be extended "
                                  "to positions it never had",
}


def within_table(self: nn.Module, x: object) -> None:
    """A positional table's input: ``(batch, seq, d_model)`` floating, at most ``max_len``
    positions."""
    check_tensor(x, "x", ndim=3, dtype="floating")
    if x.shape[-1] != self.d_model:
        raise ValueError(
            f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}"
        )
    if x.shape[1] > self.max_len:
        table = next(c.__name__ for c in type(self).__mro__ if c.__name__ in _TOO_LONG)
        raise ValueError(f"x has {x.shape[1]} positions (shape {tuple(x.shape)}) but this "
                         + _TOO_LONG[table].format(max_len=self.max_len))


def rotatable_x(x: object, positions: object = None, base: object = 10000.0) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., seq, d_head), got {tuple(x.shape)}")
    if x.shape[-1] % 2:
        raise ValueError(
            f"rotary embedding rotates feature pairs: the last dimension of x must be even, "
            f"got shape {tuple(x.shape)}"
        )
    frequency_base(base)
    if positions is None:
        return
    position_values(positions)
    try:
        ok = torch.broadcast_shapes(positions.shape, x.shape[:-1]) == x.shape[:-1]
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(
            f"positions of shape {tuple(positions.shape)} must broadcast to "
            f"x.shape[:-1] = {tuple(x.shape[:-1])} (one position per vector of x)"
        )


def rotary_module_inputs(self: nn.Module, x: object, positions: object = None) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2 or x.shape[-1] != self.d_head:
        raise ValueError(
            f"x must have shape (..., seq, d_head={self.d_head}), got {tuple(x.shape)}"
        )
    if positions is not None:
        rotatable_x(x, positions, self.base)


def rotary_heads(module: nn.Module, max_len: object, base: object) -> None:
    if module.d_head % 2:
        raise ValueError(
            f"rotary attention needs an even d_head = d_model / num_heads, got "
            f"d_model={module.d_model}, num_heads={module.num_heads} (d_head={module.d_head})"
        )
    check_settings(max_len=max_len, base=base)


def self_attention_only(module: nn.Module, name: str) -> None:
    if module.kdim != module.d_model or module.vdim != module.d_model:
        raise ValueError(
            f"{name} is self-attention: kdim and vdim must equal embed_dim, got "
            f"embed_dim={module.d_model}, kdim={module.kdim}, vdim={module.vdim}"
        )
