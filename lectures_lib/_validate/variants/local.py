"""The rules of :mod:`lectures_lib.variants.local`.
"""

from __future__ import annotations

from ...utils import check_tensor
from ..settings import check_settings
from .shared import self_attention_qkv


def local_qkv(q, k, v, window, *, need_weights=False, key_mask=None, dropout_p=0.0):
    self_attention_qkv(q, k, v, need_weights, key_mask, dropout_p, "local attention",
                       " (query i looks at keys i - window ... i + window)")
    check_settings(window=window)


def band_shape(band_weights):
    check_tensor(band_weights, "band_weights", dtype="floating")
    if band_weights.dim() < 2 or band_weights.shape[-1] % 2 == 0:
        raise ValueError(
            "band_weights must have shape (..., n, 2 * window + 1) (an odd last dimension), "
            f"got {tuple(band_weights.shape)}"
        )
