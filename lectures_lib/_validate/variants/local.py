"""The rules of :mod:`lectures_lib.variants.local`.
"""

from __future__ import annotations

from functools import partial

from ...utils import check_tensor
from .shared import self_attention_qkv

local_qkv = partial(self_attention_qkv, name="local attention", setting_names=("window",),
                    why=" (query i looks at keys i - window ... i + window)")


def band_shape(band_weights):
    check_tensor(band_weights, "band_weights", dtype="floating")
    if band_weights.dim() < 2 or band_weights.shape[-1] % 2 == 0:
        raise ValueError(
            "band_weights must have shape (..., n, 2 * window + 1) (an odd last dimension), "
            f"got {tuple(band_weights.shape)}"
        )
