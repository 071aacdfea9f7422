"""References written independently of the library, shared by the tests (one copy each)."""

from __future__ import annotations

import math

import torch


def sinusoid_formula(n_positions: int, d_model: int) -> torch.Tensor:
    """The paper's sinusoid table, one entry at a time in Python floats (float64): sin on even
    features, cos on odd ones, wavelength 10000^(2i/d_model), positions from 0."""
    table = torch.empty(n_positions, d_model, dtype=torch.float64)
    for pos in range(n_positions):
        for feature in range(d_model):
            i = feature // 2
            angle = pos / 10000 ** (2 * i / d_model)
            table[pos, feature] = math.sin(angle) if feature % 2 == 0 else math.cos(angle)
    return table
