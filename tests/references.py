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


def loop_attention(q, k, v, mask=None):
    """Python loops over one unbatched (n_q, d) problem, float64 with math.exp."""
    n_q, n_k = q.shape[0], k.shape[0]
    weights = torch.zeros(n_q, n_k, dtype=torch.float64)
    for i in range(n_q):
        scores = [
            float(q[i].double() @ k[j].double()) / math.sqrt(q.shape[1])
            if mask is None or bool(mask[i, j])
            else None
            for j in range(n_k)
        ]
        top = max(s for s in scores if s is not None)
        exps = [0.0 if s is None else math.exp(s - top) for s in scores]
        for j in range(n_k):
            weights[i, j] = exps[j] / sum(exps)
    return weights @ v.double(), weights
