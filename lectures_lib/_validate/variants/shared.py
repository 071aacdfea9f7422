"""Checks shared by the variants' efficient functions: the key mask, self-attention q/k/v,
positions of global tokens, lists of ints.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...utils import check_non_negative_int, check_positive_int, check_qkv, check_tensor
from ..settings import check_settings


def fits(shape: tuple[int, ...] | torch.Size, target: tuple[int, ...] | torch.Size) -> bool:
    """``shape`` broadcasts to ``target`` without growing it: no more dimensions, and each one
    (aligned from the right) equal to ``target``'s or 1."""
    return len(shape) <= len(target) and all(
        size in (1, goal) for size, goal in zip(reversed(shape), reversed(target), strict=False)
    )


def key_mask_shape(mask: object, leading_shape: tuple[int, ...] | torch.Size) -> None:
    """A key-padding mask for the efficient functions: bool ``(..., n)`` whose dimensions
    (aligned from the right) equal those of ``leading_shape`` = ``q.shape[:-1]`` or are 1."""
    check_tensor(mask, "key_mask", dtype="bool")
    leading_shape = tuple(leading_shape)
    if not (mask.dim() >= 1 and mask.shape[-1] == leading_shape[-1] and fits(mask.shape, leading_shape)):
        raise ValueError(
            f"key_mask must have shape (..., n) broadcasting to {leading_shape} (the queries' "
            f"leading dimensions, n = {leading_shape[-1]} keys; each dimension equal or 1), got "
            f"{tuple(mask.shape)}"
        )


def self_attention_qkv(q, k, v, *args, need_weights=False, key_mask=None, dropout_p=0.0,
                       name: str, why: str = "", setting_names: tuple[str, ...] = (), **named) -> None:
    """What every efficient self-attention function ``f(q, k, v, *settings, need_weights=False,
    key_mask=None, dropout_p=0.0)`` checks: q, k, v with as many queries as keys, the flags, the
    key mask, then its ``setting_names`` (by the settings' rules). With them named, it is a
    door: ``partial(self_attention_qkv, name="strided_attention", setting_names=("stride",))``."""
    check_qkv(q, k, v)
    if k.shape[-2] != q.shape[-2]:
        raise ValueError(
            f"{name} is self-attention over positions: it needs as many queries as keys{why}, "
            f"got q {tuple(q.shape)} and k {tuple(k.shape)}"
        )
    check_settings(need_weights=need_weights)
    if key_mask is not None:
        key_mask_shape(key_mask, q.shape[:-1])
    check_settings(dropout_p=dropout_p)
    given = dict(zip(setting_names, args))
    given.update((setting, named[setting]) for setting in setting_names if setting in named)
    check_settings(**given)


def global_token_positions(global_positions: object, name: str = "global_positions", *, n: int) -> None:
    """Positions of global tokens: a sequence of ints or a 1-D integer tensor, each in [0, n)."""
    if isinstance(global_positions, (str, bytes)) or not isinstance(
        global_positions, (torch.Tensor, Sequence)
    ):
        raise TypeError(
            f"{name} must be a list of positions or a 1-D integer tensor, e.g. [0], got "
            f"{type(global_positions).__name__} ({global_positions!r:.40})"
        )
    if not isinstance(global_positions, torch.Tensor):
        values = list(global_positions)  # no dtype forced: 1.5 must fail below, not become 1
        if any(isinstance(p, (str, bytes)) for p in values):
            raise TypeError(f"{name} must hold ints, got {values!r:.60}")
        global_positions = torch.as_tensor(values) if values else torch.zeros(0, dtype=torch.long)
    check_tensor(global_positions, name, ndim=1, dtype="integer")
    if n and global_positions.numel() and not (  # n = 0: an empty result, nothing to place
        0 <= int(global_positions.min()) and int(global_positions.max()) < n
    ):
        raise ValueError(
            f"{name} must lie in [0, {n - 1}] for a sequence of n={n} positions, got "
            f"{global_positions.tolist()}"
        )


def int_sequence(values: object, name: str, low: int) -> None:
    if isinstance(values, torch.Tensor):
        values = values.tolist()
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of ints, got {type(values).__name__}")
    check = check_positive_int if low == 1 else check_non_negative_int
    for value in values:
        check(value, f"{name}[...]")
