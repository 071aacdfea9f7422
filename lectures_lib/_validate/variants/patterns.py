"""The rules of :mod:`lectures_lib.variants.patterns`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...utils import check_non_negative_int, check_tensor
from ..settings import settings
from .shared import global_token_positions

size_and_window = settings("n", "window", "device")
size_and_stride = settings("n", "stride", "device")
dilated_window = settings("n", "window", "dilation", "device")
random_key_count = settings("n", "num_random", "seed")
random_mask_args = settings("n", "num_random", "seed", "device")


size_and_globals = settings("n", "global_positions", "device",
                            global_positions=global_token_positions)


def one_mask_per_head(patterns):
    if isinstance(patterns, torch.Tensor) or not isinstance(patterns, Sequence) or not patterns:
        raise TypeError(
            "patterns must be a non-empty list of (n, n) bool masks, one per head, got "
            f"{type(patterns).__name__}"
        )
    first = check_tensor(patterns[0], "patterns[0]", ndim=2, dtype="bool")
    for index, pattern in enumerate(patterns):
        check_tensor(pattern, f"patterns[{index}]", shape=first.shape, dtype="bool")


def square_mask_and_layers(mask, num_layers):
    check_tensor(mask, "mask", ndim=(2, 3, 4), dtype="bool")
    check_non_negative_int(num_layers, "num_layers")
    if mask.shape[-1] != mask.shape[-2]:
        raise ValueError(f"mask must be square (..., n, n), got {tuple(mask.shape)}")
