"""The rules of :mod:`lectures_lib.attention`: query/key/value and the mask, the heads, the
module's sizes and its inputs. ``mha_shape_check`` judges query, key, value, the masks and the
cache together, as PyTorch's ``_mha_shape_check``; ``mha_inputs`` is
``MultiHeadAttention.check_inputs`` (the door of ``forward``), ``mha_cached_inputs`` its
``check_cached_inputs`` (the door of ``forward_cached``).
"""

from __future__ import annotations

import torch
from torch import nn

from .._mask_check import check_mask, padding_shape
from ..cache import KeyValueCache, kv_cache_problem
from ..utils import check_positive_int, check_qkv, check_tensor
from .settings import check_settings, settings, tensor

stacked_heads = settings("x", x=tensor(ndim=4))


def scores_and_mask(scores: object, mask: object = None) -> None:
    check_tensor(scores, "scores", dtype="floating")
    if scores.dim() < 2:
        raise ValueError(
            f"scores must have shape (..., n_queries, n_keys), got {tuple(scores.shape)}"
        )
    if mask is not None:
        check_mask(mask, scores.shape)


def qkv_and_mask(
    q: object, k: object, v: object = None, mask: object = None, dropout_p: object = 0.0
) -> None:
    """Queries, keys (and values: without them, as attention_scores, the keys stand in), the
    dropout probability and the mask against the scores ``(..., n_q, n_k)``."""
    check_qkv(q, k, k if v is None else v)
    check_settings(dropout_p=dropout_p)
    if mask is not None:
        check_mask(mask, (*q.shape[:-1], k.shape[-2]))


def sequence(x: object, name: str, d_model: int) -> torch.Tensor:
    """``x`` must be a floating tensor ``(batch, seq, d_model)``."""
    check_tensor(x, name, ndim=3, dtype="floating")
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}: "
            "its last dimension does not match the layer's d_model"
        )
    return x


def self_attention_inputs(self: nn.Module, x: object, mask: object = None) -> None:
    check_tensor(x, "x", ndim=3, dtype="floating")
    if x.shape[-1] != self.d_model:
        raise ValueError(f"x must have shape (batch, seq, {self.d_model}), got {tuple(x.shape)}")
    if mask is not None:
        check_mask(mask, (x.shape[0], x.shape[1], x.shape[1]))


def heads_divide_features(x: object, num_heads: object) -> None:
    check_tensor(x, "x", ndim=3)
    num_heads = check_positive_int(num_heads, "num_heads")
    if x.shape[-1] % num_heads != 0:
        raise ValueError(
            f"d_model={x.shape[-1]} (last dimension of x, shape {tuple(x.shape)}) is not "
            f"divisible by num_heads={num_heads}"
        )


def mha_weights(
    x: object, w_q: object, w_k: object, w_v: object, w_o: object, num_heads: object,
    mask: object = None,
) -> None:
    check_tensor(x, "x", ndim=3, dtype="floating")
    d_model = x.shape[-1]
    for name, weight in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        check_tensor(weight, name, shape=(d_model, d_model), dtype=x.dtype)
    heads_divide_features(x, num_heads)
    if mask is not None:
        check_mask(mask, (x.shape[0], num_heads, x.shape[1], x.shape[1]))


def mha_sizes(
    d_model: object, num_heads: object, dropout: object, bias: object, kdim: object, vdim: object
) -> None:
    check_settings(d_model=d_model, num_heads=num_heads)
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: every head gets "
            "d_head = d_model / num_heads features"
        )
    check_settings(kdim=kdim, vdim=vdim, dropout=dropout, bias=bias)


def mha_shape_check(
    module: nn.Module, query: object, key: object, value: object, mask: object = None,
    key_padding_mask: object = None, *, cache: object = None, static: bool = False,
) -> None:
    """Query, key and value ``(batch, seq, d_model | kdim | vdim)`` in the module's dtype, the
    cache they extend, ``key_padding_mask`` ``(batch, n_keys)`` and ``mask`` against the scores
    ``(batch, num_heads, n_queries, n_keys)``: judged together, once, at the door."""
    for name, t, size in (
        ("query", query, module.d_model),
        ("key", key, module.kdim),
        ("value", value, module.vdim),
    ):
        check_tensor(t, name, ndim=3, dtype="floating")
        if t.shape[-1] != size:
            raise ValueError(f"{name} must have shape (batch, seq, {size}), got {tuple(t.shape)}")
    if not (query.shape[0] == key.shape[0] == value.shape[0]):
        raise ValueError(
            "query, key and value must have the same batch size, got "
            f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}"
        )
    if key.shape[1] != value.shape[1]:
        raise ValueError(
            f"key and value must have the same length, got {tuple(key.shape)} and "
            f"{tuple(value.shape)}"
        )
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype}, "
            f"{value.dtype}"
        )
    weight = module.q_proj.weight
    if query.dtype != weight.dtype:
        raise TypeError(
            f"query, key and value must have the module's dtype {weight.dtype}, got "
            f"{query.dtype} (convert the input with .to({weight.dtype}) or the module with "
            f".to({query.dtype}))"
        )
    batch, n_queries, n_keys = query.shape[0], query.shape[1], key.shape[1]
    if cache is not None:
        if len(cache) and cache.keys.shape[0] != batch:
            raise ValueError(
                f"query has batch size {batch}, but the cache holds {cache.keys.shape[0]} rows: "
                "a KeyValueCache belongs to one decoding run (start a new one, or reorder it)"
            )
        n_keys = len(cache) if static and len(cache) else len(cache) + n_keys
    if key_padding_mask is not None:
        padding_shape(key_padding_mask, "key_padding_mask", batch, n_keys)
    if mask is not None:
        check_mask(mask, (batch, module.num_heads, n_queries, n_keys))


def mha_inputs(
    module: nn.Module, query: object, key: object, value: object, mask: object = None,
    need_weights: object = True, *, key_padding_mask: object = None, positions: object = None,
) -> None:
    """``MultiHeadAttention.check_inputs``, the door of ``forward``: the shapes, the masks,
    ``need_weights``, the positions."""
    mha_shape_check(module, query, key, value, mask, key_padding_mask)
    check_settings(need_weights=need_weights)
    if positions is not None:
        token_positions(positions, query, key)


def position_values(positions: object, name: str = "positions") -> torch.Tensor:
    """Positions: an integer or floating tensor of finite values."""
    check_tensor(positions, name)
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"{name} must be integer or float, got {positions.dtype}")
    if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
        raise ValueError(f"{name} must be finite numbers, got NaN or inf")
    return positions


def token_positions(positions: object, query: object, key: object) -> None:
    """One position per token of a self-attention: ``(seq,)`` or ``(batch, seq)``."""
    check_tensor(positions, "positions", ndim=(1, 2))
    position_values(positions)
    batch, seq = query.shape[0], query.shape[1]
    if key.shape[1] != seq:
        raise ValueError(
            "positions=... gives one position per token of a self-attention: query and key "
            f"must have the same length, got {tuple(query.shape)} and {tuple(key.shape)}"
        )
    wrong_batch = positions.dim() == 2 and positions.shape[0] not in (1, batch)
    if positions.shape[-1] != seq or wrong_batch:
        raise ValueError(
            f"positions must have shape (seq,) or (batch, seq) = ({batch}, {seq}), "
            f"got {tuple(positions.shape)}"
        )


def mha_cached_inputs(
    module: nn.Module, query: object, key: object, value: object, cache: object,
    mask: object = None, *, static: object = False,
) -> None:
    """``MultiHeadAttention.check_cached_inputs``, the door of ``forward_cached``: as
    ``forward``, plus the cache."""
    check_settings(static=static)
    problem = kv_cache_problem(module)
    if problem:
        raise TypeError(problem)
    if static and kv_cache_problem(module, static=True):  # e.g. rotary: self-attention only
        raise ValueError(kv_cache_problem(module, static=True))
    if not isinstance(cache, KeyValueCache):
        raise TypeError(f"cache must be a KeyValueCache, got {type(cache).__name__}")
    mha_shape_check(module, query, key, value, mask, cache=cache, static=static)


def torch_mha(module: object) -> None:
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(f"expected nn.MultiheadAttention, got {type(module).__name__}")
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError("add_bias_kv / add_zero_attn are not supported by MultiHeadAttention")
    if (module.in_proj_bias is not None) != (module.out_proj.bias is not None):
        raise ValueError("in-projection and out-projection must both have biases or neither")
