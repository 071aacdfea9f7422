"""The rules of :mod:`lectures_lib.variants.sinkhorn`.
"""

from __future__ import annotations

from ...utils import check_tensor
from ..settings import check_settings


def square_log_scores(log_scores, n_iters=8):
    check_tensor(log_scores, "log_scores", dtype="floating")
    if log_scores.dim() < 2 or log_scores.shape[-1] != log_scores.shape[-2]:
        raise ValueError(
            "log_scores must have shape (..., n, n) (a square matrix per block pair), got "
            f"{tuple(log_scores.shape)}"
        )
    check_settings(n_iters=n_iters)
