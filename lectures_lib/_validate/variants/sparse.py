"""The rules of :mod:`lectures_lib.variants.sparse`.
"""

from __future__ import annotations

from functools import partial

from ...utils import check_tensor
from ..settings import check_settings, optional, settings
from .shared import fits, global_token_positions, int_sequence, self_attention_qkv

strided_qkv = partial(self_attention_qkv, name="strided_attention", setting_names=("stride",))


def key_slots(index: object, name: str = "key_index", *, n: int,
              lead: tuple[int, ...] | None = None) -> None:
    """``key_index``: integer ``(..., n, slots)`` with entries in ``[-1, n)`` (-1 = an empty
    slot); with ``lead`` (the queries' ``(..., n)``) its leading dimensions must broadcast to it."""
    check_tensor(index, "key_index", dtype="integer")
    if not (index.dim() >= 2 and index.shape[-2] == n
            and (lead is None or fits(index.shape[:-1], lead))):
        target = f" broadcasting to {tuple(lead)} + (slots,)" if lead is not None else ""
        raise ValueError(
            f"key_index must have shape (..., n={n}, slots){target}, got {tuple(index.shape)}"
        )
    if index.numel() and not (-1 <= int(index.min()) and int(index.max()) < n):
        raise ValueError(
            f"key_index entries must lie in [-1, {n - 1}] (-1 = empty slot), got values from "
            f"{int(index.min())} to {int(index.max())}"
        )


key_index_pattern = settings("n", "key_index", "global_positions", key_index=key_slots,
                             global_positions=optional(global_token_positions))


def sparse_qkv(q, k, v, key_index, global_positions=None, *, need_weights=False,
               key_mask=None, dropout_p=0.0):
    self_attention_qkv(q, k, v, need_weights=need_weights, key_mask=key_mask, dropout_p=dropout_p,
                       name="sparse_attention")
    key_slots(key_index, n=q.shape[-2], lead=q.shape[:-1])
    if global_positions is not None:
        global_token_positions(global_positions, n=q.shape[-2])


def global_qkv(q, k, v, global_positions, *, need_weights=False, key_mask=None,
               dropout_p=0.0):
    self_attention_qkv(q, k, v, need_weights=need_weights, key_mask=key_mask, dropout_p=dropout_p,
                       name="global_attention")
    if global_positions is None:
        raise TypeError(
            "global_positions must be a list of positions or a 1-D integer tensor, e.g. [0], got "
            "None (global attention without global tokens attends to nothing)"
        )
    global_token_positions(global_positions, n=q.shape[-2])


def longformer_settings(module, window, dilations, global_positions):
    check_settings(window=window)
    int_sequence(dilations, "dilations", low=1)
    if len(dilations) != module.num_heads:
        raise ValueError(
            f"dilations must give one dilation per head (num_heads={module.num_heads}), got "
            f"{len(dilations)}: {list(dilations)}"
        )
    int_sequence(global_positions, "global_positions", low=0)


big_bird_settings = settings("window", "num_random", "global_positions", "seed",
                             global_positions=partial(int_sequence, low=0))
