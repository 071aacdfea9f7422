"""The door checks of the taught modules (private): one named validator per public entry point.

A taught function or ``forward`` holds the maths; its arguments are checked here, once, where it
is called from outside the library, as PyTorch keeps ``_mha_shape_check`` and ``_canonical_mask``
apart from ``multi_head_attention_forward``. The link is one decorator line,
``@validated(_validate.split_heads)`` (see :func:`lectures_lib.utils.validated`); a validator takes
the same arguments as the function it guards (``self`` included) and raises a learner-readable
error naming the argument, what was expected and what it got. Constructors call their validator
on their first line (always: a module built inside another one is still checked, since the
factories that build it may come from the learner).

Nothing here is taught: read the modules for the ideas, this file for the rules of their inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from .utils import (
    check_bool,
    check_device,
    check_non_negative_int,
    check_positive_float,
    check_positive_int,
    check_probability,
    check_qkv,
    check_tensor,
)

# =============================================================================================
# masks.py
# =============================================================================================


def _padding_hint(scores_ndim: int) -> str:
    if scores_ndim == 4:  # (batch, heads, n_q, n_k)
        return (
            "A key-padding mask (batch, n_keys) needs shape (batch, 1, 1, n_keys): "
            "key_padding_mask(), or pass it as key_padding_mask=."
        )
    if scores_ndim == 3:  # (batch, n_q, n_k): single-head attention
        return "A key-padding mask (batch, n_keys) needs shape (batch, 1, n_keys): key_padding_mask(...)[:, 0]."
    return ""


def check_mask(mask: object, scores_shape: tuple[int, ...] | torch.Size) -> torch.Tensor:
    """Validate a boolean attention mask against the shape of the scores it will mask.

    ``scores_shape`` is ``(..., n_queries, n_keys)``. The mask must be ``torch.bool`` (True = may
    attend), have at most as many dimensions as the scores (but not 3 for 4-D scores: that is
    ambiguous), and each of its dimensions (right-aligned) must equal the corresponding score
    dimension or be 1. A 2-D mask is ``(n_queries, n_keys)``.
    Returns the mask unchanged.
    """
    if not isinstance(scores_shape, (tuple, list, torch.Size)) or not all(
        isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in scores_shape
    ):
        raise TypeError(
            "scores_shape must be a tuple of sizes (..., n_queries, n_keys), got "
            f"{scores_shape!r}"
        )
    scores_shape = tuple(scores_shape)
    if len(scores_shape) < 2:
        raise ValueError(
            f"scores_shape must have at least 2 sizes (..., n_queries, n_keys), got {scores_shape}"
        )
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"mask must be a torch.Tensor of dtype torch.bool, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise TypeError(
            f"mask must have dtype torch.bool (True = may attend), got {mask.dtype}. "
            "An additive float mask (0 / -inf) is not accepted: convert it with `mask == 0`."
        )
    if len(scores_shape) == 4 and mask.dim() == 3:
        raise ValueError(
            f"mask with shape {tuple(mask.shape)} is 3-D, which is ambiguous for attention scores "
            f"of shape {scores_shape} (batch, heads, n_queries, n_keys): is its first dimension "
            "the batch or the heads? Use mask[:, None] for a per-example mask (batch, 1, n_q, n_k) "
            "or mask[None] for a per-head mask (1, heads, n_q, n_k)."
        )
    if mask.dim() > len(scores_shape) or mask.dim() == 0:
        raise ValueError(
            f"mask with shape {tuple(mask.shape)} cannot be matched to attention scores of shape "
            f"{scores_shape} (batch..., n_queries, n_keys)"
        )
    for mask_size, score_size in zip(reversed(mask.shape), reversed(scores_shape), strict=False):
        if mask_size not in (1, score_size):
            raise ValueError(
                f"mask with shape {tuple(mask.shape)} does not fit attention scores of shape "
                f"{scores_shape}: each mask dimension (aligned from the right) must equal the "
                "score dimension or be 1. " + _padding_hint(len(scores_shape))
            )
    return mask


def causal_mask(n: object, device: object = None) -> None:
    check_positive_int(n, "n")
    check_device(device)


def key_padding_mask(lengths: object, max_len: object = None) -> None:
    if not isinstance(lengths, torch.Tensor):
        lengths = torch.as_tensor(lengths)
    check_tensor(lengths, "lengths", ndim=1)
    if lengths.numel() == 0:
        raise ValueError("lengths is empty: give one length per sequence of the batch")
    check_tensor(lengths, "lengths", dtype="integer")
    if int(lengths.min()) < 0:
        raise ValueError(f"lengths must be >= 0, got {lengths.tolist()}")
    longest = int(lengths.max())
    if max_len is None:
        return
    max_len = check_non_negative_int(max_len, "max_len")
    if longest > max_len:
        raise ValueError(f"max_len={max_len} is shorter than the longest sequence ({longest})")


def padding_mask(padding: object, name: str, batch: int, n_keys: int) -> None:
    """A key-padding mask given on its own (``key_padding_mask=``): bool ``(batch, n_keys)``,
    True = a real token (the course's convention; PyTorch's is the opposite)."""
    check_tensor(padding, name, dtype="bool")
    if tuple(padding.shape) != (batch, n_keys):
        raise ValueError(
            f"{name} must have shape (batch, n_keys) = ({batch}, {n_keys}), True = a real token "
            f"(PyTorch's key_padding_mask is True at padding: pass ~theirs), got "
            f"{tuple(padding.shape)}"
        )


# =============================================================================================
# attention.py
# =============================================================================================


def attention_scores(q: object, k: object) -> None:
    check_qkv(q, k, k)


def masked_softmax(scores: object, mask: object = None) -> None:
    check_tensor(scores, "scores", dtype="floating")
    if scores.dim() < 2:
        raise ValueError(
            f"scores must have shape (..., n_queries, n_keys), got {tuple(scores.shape)}"
        )
    if mask is not None:
        check_mask(mask, scores.shape)


def scaled_dot_product_attention(
    q: object, k: object, v: object, mask: object = None, dropout_p: object = 0.0
) -> None:
    check_qkv(q, k, v)
    check_probability(dropout_p, "dropout_p")
    if mask is not None:
        check_mask(mask, (*q.shape[:-1], k.shape[-2]))


fused_attention = scaled_dot_product_attention


def self_attention_init(d_model: object, d_k: object, d_v: object, bias: object) -> None:
    check_positive_int(d_model, "d_model")
    check_positive_int(d_k if d_k is not None else d_model, "d_k")
    check_positive_int(d_v if d_v is not None else d_model, "d_v")
    check_bool(bias, "bias")


def sequence(x: object, name: str, d_model: int) -> torch.Tensor:
    """``x`` must be a floating tensor ``(batch, seq, d_model)``."""
    check_tensor(x, name, ndim=3, dtype="floating")
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}: "
            "its last dimension does not match the layer's d_model"
        )
    return x


def self_attention_forward(self: nn.Module, x: object, mask: object = None) -> None:
    check_tensor(x, "x", ndim=3, dtype="floating")
    if x.shape[-1] != self.d_model:
        raise ValueError(f"x must have shape (batch, seq, {self.d_model}), got {tuple(x.shape)}")
    if mask is not None:
        check_mask(mask, (x.shape[0], x.shape[1], x.shape[1]))


def split_heads(x: object, num_heads: object) -> None:
    check_tensor(x, "x", ndim=3)
    num_heads = check_positive_int(num_heads, "num_heads")
    if x.shape[-1] % num_heads != 0:
        raise ValueError(
            f"d_model={x.shape[-1]} (last dimension of x, shape {tuple(x.shape)}) is not "
            f"divisible by num_heads={num_heads}"
        )


def merge_heads(x: object) -> None:
    check_tensor(x, "x", ndim=4)


def multi_head_attention(
    x: object, w_q: object, w_k: object, w_v: object, w_o: object, num_heads: object,
    mask: object = None,
) -> None:
    check_tensor(x, "x", ndim=3, dtype="floating")
    d_model = x.shape[-1]
    for name, weight in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v), ("w_o", w_o)):
        check_tensor(weight, name, shape=(d_model, d_model), dtype=x.dtype)
    split_heads(x, num_heads)
    if mask is not None:
        check_mask(mask, (x.shape[0], num_heads, x.shape[1], x.shape[1]))


def multi_head_init(
    d_model: object, num_heads: object, dropout: object, bias: object, kdim: object, vdim: object
) -> None:
    d_model = check_positive_int(d_model, "d_model")
    num_heads = check_positive_int(num_heads, "num_heads")
    if d_model % num_heads != 0:
        raise ValueError(
            f"d_model={d_model} is not divisible by num_heads={num_heads}: every head gets "
            "d_head = d_model / num_heads features"
        )
    check_positive_int(kdim if kdim is not None else d_model, "kdim")
    check_positive_int(vdim if vdim is not None else d_model, "vdim")
    check_probability(dropout, "dropout")
    check_bool(bias, "bias")


def _query_key_value(module: nn.Module, query: object, key: object, value: object) -> None:
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


def multi_head_inputs(
    module: nn.Module, query: object, key: object, value: object, mask: object, need_weights: object
) -> None:
    """``MultiHeadAttention.check_inputs``: shapes, dtypes, the mask, ``need_weights``."""
    _query_key_value(module, query, key, value)
    if mask is not None:
        check_mask(mask, (query.shape[0], module.num_heads, query.shape[1], key.shape[1]))
    check_bool(need_weights, "need_weights")


def positions(positions: object, query: object, key: object) -> None:
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


def multi_head_forward(
    self: nn.Module,
    query: object,
    key: object,
    value: object,
    mask: object = None,
    need_weights: object = True,
    *,
    key_padding_mask: object = None,
    positions: object = None,
) -> None:
    """``MultiHeadAttention.forward``: the overridable ``check_inputs`` hook sees the mask the
    steps will see (``mask`` AND ``key_padding_mask``)."""
    _query_key_value(self, query, key, value)
    if key_padding_mask is not None:
        padding_mask(key_padding_mask, "key_padding_mask", query.shape[0], key.shape[1])
        if mask is not None:
            check_mask(mask, (query.shape[0], self.num_heads, query.shape[1], key.shape[1]))
    from .masks import with_key_padding

    self.check_inputs(query, key, value, with_key_padding(mask, key_padding_mask), need_weights)
    if positions is not None:
        globals()["positions"](positions, query, key)


def cached_inputs(
    module: nn.Module, query: object, key: object, value: object, cache: object, mask: object,
    static: object,
) -> None:
    """``MultiHeadAttention.check_cached_inputs``: as ``forward``, plus the cache."""
    from .cache import KeyValueCache, kv_cache_problem

    check_bool(static, "static")
    problem = kv_cache_problem(module)
    if problem:
        raise TypeError(problem)
    if static and kv_cache_problem(module, static=True):  # e.g. rotary: self-attention only
        raise ValueError(kv_cache_problem(module, static=True))
    if not isinstance(cache, KeyValueCache):
        raise TypeError(f"cache must be a KeyValueCache, got {type(cache).__name__}")
    _query_key_value(module, query, key, value)
    batch, n_new = query.shape[0], query.shape[1]
    if len(cache) and cache.keys.shape[0] != batch:
        raise ValueError(
            f"query has batch size {batch}, but the cache holds {cache.keys.shape[0]} rows: a "
            "KeyValueCache belongs to one decoding run (start a new one, or reorder it)"
        )
    n_keys = len(cache) if static and len(cache) else len(cache) + key.shape[1]
    if mask is not None:
        check_mask(mask, (batch, module.num_heads, n_new, n_keys))


def multi_head_forward_cached(
    self: nn.Module, query: object, key: object, value: object, cache: object, mask: object = None,
    *, static: object = False,
) -> None:
    self.check_cached_inputs(query, key, value, cache, mask, static)


# =============================================================================================
# positional.py
# =============================================================================================


def base(base: object) -> float:
    if isinstance(base, bool) or not isinstance(base, (int, float)):
        raise TypeError(f"base must be a number, got {type(base).__name__} ({base!r})")
    if not (math.isfinite(base) and base > 1):
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    return float(base)


def floating_dtype(dtype: object) -> None:
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise TypeError(f"dtype must be a floating torch.dtype, got {dtype!r}")


def position_values(positions: object) -> torch.Tensor:
    """Positions: an integer or floating tensor of finite values."""
    check_tensor(positions, "positions")
    if positions.is_complex() or positions.dtype == torch.bool:
        raise TypeError(f"positions must be integer or float, got {positions.dtype}")
    if positions.is_floating_point() and not bool(torch.isfinite(positions).all()):
        raise ValueError("positions must be finite numbers, got NaN or inf")
    return positions


def sinusoidal_encoding(
    n_positions: object, d_model: object, *, base: object = 10000.0,
    dtype: object = torch.float32, device: object = None,
) -> None:
    check_positive_int(n_positions, "n_positions")
    check_positive_int(d_model, "d_model")
    globals()["base"](base)
    floating_dtype(dtype)
    check_device(device)


def sinusoidal_init(d_model: object, max_len: object) -> None:
    check_positive_int(d_model, "d_model")
    check_positive_int(max_len, "max_len")


def _positions_input(self: nn.Module, x: object, too_long: str) -> None:
    """``x`` is ``(batch, seq, d_model)`` floating with at most ``max_len`` positions."""
    check_tensor(x, "x", ndim=3, dtype="floating")
    if x.shape[-1] != self.d_model:
        raise ValueError(
            f"x must have shape (batch, seq, d_model={self.d_model}), got {tuple(x.shape)}"
        )
    if x.shape[1] > self.max_len:
        raise ValueError(f"x has {x.shape[1]} positions (shape {tuple(x.shape)}) but this "
                         + too_long.format(max_len=self.max_len))


def sinusoidal_forward(self: nn.Module, x: object) -> None:
    _positions_input(self, x, "SinusoidalEncoding was built with max_len={max_len}: build it "
                              "with a larger max_len")


def learned_init(max_len: object, d_model: object, init_std: object) -> None:
    check_positive_int(max_len, "max_len")
    check_positive_int(d_model, "d_model")
    check_positive_float(init_std, "init_std")


def learned_forward(self: nn.Module, x: object) -> None:
    _positions_input(self, x, "LearnedPositionalEmbedding only has vectors for max_len={max_len} "
                              "positions; a learned table cannot be extended to positions it "
                              "never had")


def _even_d_head(d_head: object) -> None:
    d_head = check_positive_int(d_head, "d_head")
    if d_head % 2:
        raise ValueError(f"rotary embedding rotates feature pairs: d_head must be even, got {d_head}")


def rotary_angles(
    positions: object, d_head: object, base: object = 10000.0, dtype: object = torch.float32
) -> None:
    _even_d_head(d_head)
    globals()["base"](base)
    position_values(positions)
    floating_dtype(dtype)


def apply_rotary(x: object, positions: object = None, base: object = 10000.0) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2:
        raise ValueError(f"x must have shape (..., seq, d_head), got {tuple(x.shape)}")
    if x.shape[-1] % 2:
        raise ValueError(
            f"rotary embedding rotates feature pairs: the last dimension of x must be even, "
            f"got shape {tuple(x.shape)}"
        )
    globals()["base"](base)
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


def rotary_embedding_init(d_head: object, max_len: object, base: object) -> None:
    _even_d_head(d_head)
    check_positive_int(max_len, "max_len")
    globals()["base"](base)


def rotary_embedding_forward(self: nn.Module, x: object, positions: object = None) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() < 2 or x.shape[-1] != self.d_head:
        raise ValueError(
            f"x must have shape (..., seq, d_head={self.d_head}), got {tuple(x.shape)}"
        )
    if positions is not None:
        apply_rotary(x, positions, self.base)


def rotary_attention_init(module: nn.Module, name: str, max_len: object, base: object) -> None:
    if module.d_head % 2:
        raise ValueError(
            f"rotary attention needs an even d_head = d_model / num_heads, got "
            f"d_model={module.d_model}, num_heads={module.num_heads} (d_head={module.d_head})"
        )
    check_positive_int(max_len, "max_len")
    globals()["base"](base)


def self_attention_only(module: nn.Module, name: str) -> None:
    if module.kdim != module.d_model or module.vdim != module.d_model:
        raise ValueError(
            f"{name} is self-attention: kdim and vdim must equal embed_dim, got "
            f"embed_dim={module.d_model}, kdim={module.kdim}, vdim={module.vdim}"
        )


# =============================================================================================
# layers.py
# =============================================================================================

_ACTIVATION_NAMES = ("relu", "gelu")


def activation_name(activation: object) -> str:
    """Map ``"relu"``/``"gelu"``, ``F.relu``/``F.gelu`` or ``nn.ReLU()``/``nn.GELU()`` to a name."""
    import torch.nn.functional as F

    if isinstance(activation, str) and activation in _ACTIVATION_NAMES:
        return activation
    if activation is F.relu or activation is torch.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    raise ValueError(
        "activation must be 'relu' or 'gelu' (or F.relu / torch.relu / F.gelu / nn.ReLU() / "
        f"nn.GELU()), got {activation!r}"
    )


def eps(eps: object, name: str) -> float:
    """A LayerNorm epsilon: a finite real number > 0."""
    if isinstance(eps, bool) or not isinstance(eps, (int, float)):
        raise TypeError(f"{name} must be a float > 0, got {type(eps).__name__} ({eps!r})")
    if not (math.isfinite(eps) and eps > 0):
        raise ValueError(f"{name} must be a finite number > 0, got {eps!r}")
    return float(eps)


def factory(factory: object, name: str) -> None:
    if factory is None:
        return
    if isinstance(factory, nn.Module) or not callable(factory):
        raise TypeError(
            f"{name} must be None or a factory: a callable factory(d_model, num_heads, dropout) "
            "-> module, e.g. a class or functools.partial(LocalAttention, window=4); got "
            f"{type(factory).__name__} (pass the class, not an instance: every layer builds its own)"
        )


def called_with_bias(factory: Callable, name: str, d_model: int, num_heads: int,
                     dropout: float) -> nn.Module:
    """``factory(d_model, num_heads, dropout, bias=False)``, refused clearly when the factory
    takes no ``bias`` (the layer's ``bias=False`` would otherwise be lost)."""
    import inspect

    try:
        parameters = inspect.signature(factory).parameters
    except (TypeError, ValueError):  # no signature to read: let the call say
        parameters = {"bias": None}
    takes_bias = "bias" in parameters or any(
        p.kind is p.VAR_KEYWORD for p in parameters.values() if p is not None
    )
    if not takes_bias:
        raise TypeError(
            f"bias=False cannot reach the {name} factory {getattr(factory, '__name__', factory)!r}: "
            "it takes no bias argument. Build the layer with bias=True, or make the factory "
            "take bias= (e.g. a class with MultiHeadAttention's arguments)"
        )
    return factory(d_model, num_heads, dropout, bias=False)


def built_attention(module: object, name: str) -> None:
    """What an attention factory returned: an ``nn.Module`` with the attention ``forward``."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"the {name} factory must return an nn.Module, got {type(module).__name__}")
    import inspect

    try:
        parameters = inspect.signature(module.forward).parameters
    except (TypeError, ValueError):  # a builtin forward: nothing to inspect
        return
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    if "need_weights" not in parameters and not takes_kwargs:
        raise TypeError(
            f"the {name} factory must return an attention module whose forward is "
            "forward(query, key, value, mask=None, need_weights=True) -> (out, weights), got "
            f"{type(module).__name__} (forward{inspect.signature(module.forward)})"
        )


def layer_norm(x: object, gamma: object, beta: object, eps: object = 1e-5) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension (..., d), got a scalar")
    d = x.shape[-1]
    check_tensor(gamma, "gamma", shape=(d,))
    check_tensor(beta, "beta", shape=(d,))
    globals()["eps"](eps, "eps")


def sublayer_connection(x: object, sublayer: object, norm: object, norm_first: object = False) -> None:
    check_tensor(x, "x", dtype="floating")
    for name, function in (("sublayer", sublayer), ("norm", norm)):
        if not callable(function):
            raise TypeError(
                f"{name} must be a callable taking and returning a tensor (a module or a "
                f"function), got {type(function).__name__}"
            )
    check_bool(norm_first, "norm_first")


def feed_forward_init(d_model: object, d_ff: object, dropout: object, activation: object,
                      bias: object) -> None:
    check_positive_int(d_model, "d_model")
    check_positive_int(d_ff, "d_ff")
    check_bool(bias, "bias")
    activation_name(activation)
    check_probability(dropout, "dropout")


def feed_forward(self: nn.Module, x: object) -> None:
    sequence(x, "x", self.d_model)


def layer_init(d_model: object, num_heads: object, dropout: object, norm_first: object,
               layer_norm_eps: object, bias: object, **factories: object) -> None:
    check_probability(dropout, "dropout")
    check_positive_int(d_model, "d_model")
    check_positive_int(num_heads, "num_heads")
    check_bool(norm_first, "norm_first")
    eps(layer_norm_eps, "layer_norm_eps")
    check_bool(bias, "bias")
    for name, value in factories.items():
        factory(value, name)


def encoder_layer_inputs(module: nn.Module, x: object, mask: object, need_weights: object) -> None:
    sequence(x, "x", module.d_model)
    if mask is not None:
        check_mask(mask, (x.shape[0], module.num_heads, x.shape[1], x.shape[1]))
    check_bool(need_weights, "need_weights")


def encoder_layer_forward(self: nn.Module, x: object, mask: object = None,
                          need_weights: object = False) -> None:
    self.check_inputs(x, mask, need_weights)


def decoder_layer_inputs(module: nn.Module, x: object, memory: object, tgt_mask: object,
                         memory_mask: object, need_weights: object) -> None:
    sequence(x, "x", module.d_model)
    sequence(memory, "memory", module.d_model)
    if memory.shape[0] != x.shape[0]:
        raise ValueError(
            "x and memory must have the same batch size, got x "
            f"{tuple(x.shape)} and memory {tuple(memory.shape)}"
        )
    batch, n_tgt, n_src = x.shape[0], x.shape[1], memory.shape[1]
    if tgt_mask is not None:
        check_mask(tgt_mask, (batch, module.num_heads, n_tgt, n_tgt))
    if memory_mask is not None:
        check_mask(memory_mask, (batch, module.num_heads, n_tgt, n_src))
    check_bool(need_weights, "need_weights")


def decoder_layer_forward(self: nn.Module, x: object, memory: object, tgt_mask: object = None,
                          memory_mask: object = None, need_weights: object = False) -> None:
    self.check_inputs(x, memory, tgt_mask, memory_mask, need_weights)


def decoder_layer_cache(cache: object) -> None:
    from .cache import KeyValueCache

    if not (isinstance(cache, tuple) and len(cache) == 2
            and all(isinstance(c, KeyValueCache) for c in cache)):
        raise TypeError(
            "cache must be a tuple (self_cache, cross_cache) of two KeyValueCache, got "
            f"{type(cache).__name__}"
        )


def decoder_layer_forward_cached(self: nn.Module, x: object, memory: object, cache: object,
                                 tgt_mask: object = None, memory_mask: object = None) -> None:
    from .cache import kv_cache_problem

    sequence(x, "x", self.d_model)
    sequence(memory, "memory", self.d_model)
    decoder_layer_cache(cache)
    for name in ("self_attn", "cross_attn"):
        problem = kv_cache_problem(getattr(self, name), static=name == "cross_attn")
        if problem:
            raise TypeError(f"{name}: {problem}")
    self_cache, cross_cache = cache
    self.self_attn.check_cached_inputs(x, x, x, self_cache, tgt_mask, False)
    self.cross_attn.check_cached_inputs(x, memory, memory, cross_cache, memory_mask, True)


def from_torch(module: object, expected: type) -> None:
    if not isinstance(module, expected):
        raise TypeError(f"expected nn.{expected.__name__}, got {type(module).__name__}")


def no_weights(weights: object, *, stacked: bool = False) -> None:
    """An attention map was asked of an attention that returned none."""
    if weights is None:
        if stacked:
            raise RuntimeError(
                "no attention weights: an attention variant that never builds the N x N matrix "
                "returns None as weights and cannot draw an attention map"
            )
        raise RuntimeError(
            "this attention returned no weights (need_weights=True gave None): an attention "
            "variant that never builds the N x N matrix cannot draw an attention map"
        )


def torch_layer(layer: nn.Module, norms: list[nn.LayerNorm], has_bias: bool) -> None:
    """Settings of a PyTorch layer that the course's layers reproduce."""
    eps_values = {norm.eps for norm in norms}
    if len(eps_values) != 1:
        raise ValueError(f"all LayerNorms of the layer must share one eps, got {sorted(eps_values)}")
    if any((norm.bias is not None) != has_bias for norm in norms) or (
        (layer.self_attn.in_proj_bias is not None) != has_bias
    ):
        raise ValueError("mixed bias settings are not supported: all biases on, or all off")
    if any(not norm.elementwise_affine for norm in norms):
        raise ValueError("LayerNorms without elementwise_affine are not supported")


def torch_attention(module: object) -> None:
    if not isinstance(module, nn.MultiheadAttention):
        raise TypeError(f"expected nn.MultiheadAttention, got {type(module).__name__}")
    if module.bias_k is not None or module.add_zero_attn:
        raise ValueError("add_bias_kv / add_zero_attn are not supported by MultiHeadAttention")
    if (module.in_proj_bias is not None) != (module.out_proj.bias is not None):
        raise ValueError("in-projection and out-projection must both have biases or neither")


# =============================================================================================
# models.py
# =============================================================================================


def token_ids(tokens: object, name: str, vocab_size: int) -> torch.Tensor:
    """``tokens`` must be an integer tensor ``(batch, seq)`` of ids in ``[0, vocab_size)``."""
    check_tensor(tokens, name, ndim=2, dtype="integer")
    if tokens.numel():
        low, high = int(tokens.min()), int(tokens.max())
        if low < 0 or high >= vocab_size:
            raise ValueError(
                f"{name} holds token ids in [{low}, {high}], but the vocabulary has "
                f"{vocab_size} entries: ids must lie in [0, {vocab_size - 1}]"
            )
    return tokens


def stack_init(layer: object, num_layers: object, final_norm: object, kind: type) -> None:
    check_positive_int(num_layers, "num_layers")
    if final_norm is not None:
        check_bool(final_norm, "final_norm")
    if isinstance(layer, nn.Module):
        if not isinstance(layer, kind):
            raise TypeError(f"expected a {kind.__name__} as template, got {type(layer).__name__}")
    elif not callable(layer):
        raise TypeError(
            f"layer must be a {kind.__name__} (template) or a callable returning one, "
            f"got {type(layer).__name__}"
        )


def built_layers(layers: list[object], kind: type) -> None:
    for each in layers:
        if not isinstance(each, kind):
            raise TypeError(
                f"the layer factory must return a {kind.__name__}, got {type(each).__name__}"
            )
    if len({id(each) for each in layers}) != len(layers):
        raise ValueError("the layer factory returned the same layer twice: layers would share")


def encoder_forward(self: nn.Module, x: object, mask: object = None,
                    need_weights: object = False) -> None:
    self.layers[0].check_inputs(x, mask, need_weights)


def decoder_forward(self: nn.Module, x: object, memory: object, tgt_mask: object = None,
                    memory_mask: object = None, need_weights: object = False) -> None:
    self.layers[0].check_inputs(x, memory, tgt_mask, memory_mask, need_weights)


def decoder_forward_cached(self: nn.Module, x: object, memory: object, caches: object,
                           tgt_mask: object = None, memory_mask: object = None) -> None:
    if not isinstance(caches, (list, tuple)) or len(caches) != len(self.layers):
        raise TypeError(
            f"caches must be a list of {len(self.layers)} (self_cache, cross_cache) pairs, one "
            f"per layer, got {type(caches).__name__}"
        )
    for layer, cache in zip(self.layers, caches, strict=True):
        decoder_layer_forward_cached(layer, x, memory, cache, tgt_mask, memory_mask)


def src_tokens(src: object, pad_id: object, name: str = "src") -> None:
    check_tensor(src, name, ndim=2, dtype="integer")
    if pad_id is not None:
        check_non_negative_int(pad_id, "pad_id")


def make_src_mask(src: object, pad_id: object) -> None:
    src_tokens(src, pad_id)


def make_tgt_mask(tgt: object, pad_id: object) -> None:
    src_tokens(tgt, pad_id, "tgt")


def token_embedding_init(vocab_size: object, d_model: object, max_len: object, dropout: object,
                         pad_id: object, positional_encoding: object) -> None:
    check_positive_int(vocab_size, "vocab_size")
    check_positive_int(d_model, "d_model")
    check_positive_int(max_len, "max_len")
    if pad_id is not None:
        check_non_negative_int(pad_id, "pad_id")
        if pad_id >= vocab_size:
            raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of {vocab_size}")
    check_bool(positional_encoding, "positional_encoding")
    check_probability(dropout, "dropout")


def embedding_inputs(module: nn.Module, tokens: object, name: str = "tokens") -> None:
    """``tokens``: integer ids ``(batch, seq)`` in the vocabulary, at most ``max_len`` long."""
    token_ids(tokens, name, module.vocab_size)
    if tokens.shape[1] > module.max_len:
        raise ValueError(
            f"{name} has {tokens.shape[1]} positions (shape {tuple(tokens.shape)}), more "
            f"than max_len={module.max_len} of the positional encoding"
        )


def token_embedding_forward(self: nn.Module, tokens: object, offset: object = 0) -> None:
    self.check_inputs(tokens)
    check_non_negative_int(offset, "offset")
    if offset + tokens.shape[1] > self.max_len:
        raise ValueError(
            f"positions {offset} ... {offset + tokens.shape[1] - 1} exceed max_len="
            f"{self.max_len} of the positional encoding"
        )


def tagger_init(num_labels: object) -> None:
    check_positive_int(num_labels, "num_labels")


def _num_heads(encoder_or_decoder: nn.Module) -> int:
    return encoder_or_decoder.layers[0].num_heads


def tagger_forward(self: nn.Module, tokens: object, mask: object = None,
                   need_weights: object = False) -> None:
    self.embed.check_inputs(tokens)
    if mask is not None:
        batch, seq = tokens.shape
        check_mask(mask, (batch, _num_heads(self.encoder), seq, seq))
    check_bool(need_weights, "need_weights")


def transformer_init(src_vocab_size: object, tgt_vocab_size: object,
                     positional_encoding: object) -> None:
    check_positive_int(src_vocab_size, "src_vocab_size")
    check_positive_int(tgt_vocab_size, "tgt_vocab_size")
    check_bool(positional_encoding, "positional_encoding")


def encode(self: nn.Module, src: object, src_mask: object = None,
           need_weights: object = False) -> None:
    self.src_embed.check_inputs(src, "src")
    if src_mask is not None:
        batch, n_src = src.shape
        check_mask(src_mask, (batch, _num_heads(self.encoder), n_src, n_src))
    check_bool(need_weights, "need_weights")


def _decode_inputs(self: nn.Module, tgt: object, memory: object, src_mask: object,
                   tgt_mask: object, memory_mask: object, need_weights: object) -> None:
    self.tgt_embed.check_inputs(tgt, "tgt")
    sequence(memory, "memory", self.d_model)
    if memory.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"tgt {tuple(tgt.shape)} and memory {tuple(memory.shape)} have different batch sizes"
        )
    batch, n_tgt, n_src = tgt.shape[0], tgt.shape[1], memory.shape[1]
    num_heads = _num_heads(self.decoder)
    if src_mask is not None:
        check_mask(src_mask, (batch, num_heads, 1, n_src))
    if tgt_mask is not None:
        check_mask(tgt_mask, (batch, num_heads, n_tgt, n_tgt))
    if memory_mask is not None:
        check_mask(memory_mask, (batch, num_heads, n_tgt, n_src))
    check_bool(need_weights, "need_weights")


def _src_against_memory(self: nn.Module, src: object, memory: object) -> None:
    token_ids(src, "src", self.src_vocab_size)
    if tuple(src.shape) != tuple(memory.shape[:2]):
        raise ValueError(
            f"src {tuple(src.shape)} does not match memory {tuple(memory.shape)}: "
            "expected the same (batch, n_src)"
        )


def decode(self: nn.Module, tgt: object, memory: object, src_mask: object = None,
           tgt_mask: object = None, memory_mask: object = None, need_weights: object = False,
           *, src: object = None) -> None:
    _decode_inputs(self, tgt, memory, src_mask, tgt_mask, memory_mask, need_weights)
    if src is not None:
        _src_against_memory(self, src, memory)
        if src_mask is not None:
            raise ValueError("give the source padding as src_mask or as src, not both")


def decode_step(self: nn.Module, tgt: object, memory: object, cache: object,
                src_mask: object = None, *, src: object = None) -> None:
    from .cache import DecoderCache

    if not isinstance(cache, DecoderCache):
        raise TypeError(f"cache must come from init_cache(), got {type(cache).__name__}")
    decode(self, tgt, memory, src_mask, src=src)
    if len(cache) and cache.batch_size != tgt.shape[0]:
        raise ValueError(
            f"tgt has batch size {tgt.shape[0]}, but the cache holds {cache.batch_size} rows"
        )
    n_keys = len(cache) + tgt.shape[1]
    if n_keys > self.tgt_embed.max_len:
        raise ValueError(
            f"positions {len(cache)} ... {n_keys - 1} exceed max_len={self.tgt_embed.max_len} of "
            "the positional encoding"
        )


def transformer_forward(self: nn.Module, src: object, tgt: object) -> None:
    self.src_embed.check_inputs(src, "src")
    self.tgt_embed.check_inputs(tgt, "tgt")
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)} have different batch sizes"
        )


def init_cache(layers: nn.ModuleList) -> None:
    from .cache import kv_cache_problem

    for index, layer in enumerate(layers):
        for name in ("self_attn", "cross_attn"):
            problem = kv_cache_problem(getattr(layer, name), static=name == "cross_attn")
            if problem:
                raise TypeError(f"decoder layer {index} {name}: {problem}")


def callable_returning(value: object, name: str, signature: str) -> Callable:
    if not callable(value):
        raise TypeError(f"{name} must be a callable {signature}, got {type(value).__name__}")
    return value


# =============================================================================================
# decoding.py
# =============================================================================================


def decoder_model(model: object) -> None:
    for method in ("encode", "decode"):
        if not callable(getattr(model, method, None)):
            raise TypeError(
                f"model must have an `{method}` method (like "
                f"lectures_lib.models.Transformer), got {type(model).__name__}"
            )


def special_ids(bos_id: object, eos_id: object, pad_id: object, model: object = None) -> None:
    for name, value in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", pad_id)):
        check_non_negative_int(value, name)
    if len({bos_id, eos_id, pad_id}) != 3:
        raise ValueError(
            f"bos_id, eos_id and pad_id must be three different tokens, got {bos_id}, {eos_id}, "
            f"{pad_id}"
        )
    vocab = getattr(model, "tgt_vocab_size", None)
    if isinstance(vocab, int):
        for name, value in (("bos_id", bos_id), ("eos_id", eos_id), ("pad_id", pad_id)):
            if value >= vocab:
                raise ValueError(
                    f"{name}={value} is not a token of the model's target vocabulary of {vocab} "
                    f"entries: ids must lie in [0, {vocab - 1}]"
                )


def decoder_src(src: object) -> torch.Tensor:
    check_tensor(src, "src", ndim=2, dtype="integer")
    if src.shape[0] == 0:
        raise ValueError(f"src must hold at least one sequence (batch >= 1), got shape {tuple(src.shape)}")
    if src.shape[1] == 0:
        raise ValueError(
            f"src must hold at least one token per sequence, got shape {tuple(src.shape)}"
        )
    return src


def logits(logits: object, tokens: torch.Tensor, ids: tuple[int, ...], method: str) -> None:
    """What ``model.decode``/``decode_step`` returned: ``(batch, n_tgt, vocab)`` logits."""
    shape_ok = isinstance(logits, torch.Tensor) and logits.dim() == 3
    if not shape_ok or logits.shape[:2] != tokens.shape:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise ValueError(
            f"model.{method} must return logits of shape (batch, n_tgt, vocab) = "
            f"({tokens.shape[0]}, {tokens.shape[1]}, vocab), got {got}"
        )
    if max(ids) >= logits.shape[-1]:
        raise ValueError(
            f"bos_id, eos_id and pad_id must be < the vocabulary size {logits.shape[-1]}, got {ids}"
        )


def _decoder(model, src, max_len, bos_id, eos_id, pad_id, return_scores, suppress_bos) -> None:
    decoder_model(model)
    decoder_src(src)
    check_positive_int(max_len, "max_len")
    special_ids(bos_id, eos_id, pad_id, model)
    check_bool(return_scores, "return_scores")
    check_bool(suppress_bos, "suppress_bos")


def greedy_decode(model, src, max_len, bos_id, eos_id, pad_id, *, return_scores=False,
                  use_cache=True, suppress_bos=True) -> None:
    _decoder(model, src, max_len, bos_id, eos_id, pad_id, return_scores, suppress_bos)
    check_bool(use_cache, "use_cache")


def sample_decode(model, src, max_len, bos_id, eos_id, pad_id, *, temperature=1.0, top_k=None,
                  generator=None, return_scores=False, suppress_bos=True) -> None:
    _decoder(model, src, max_len, bos_id, eos_id, pad_id, return_scores, suppress_bos)
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
    if not (temperature > 0 and math.isfinite(temperature)):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature}")
    if top_k is not None:
        check_positive_int(top_k, "top_k")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise TypeError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}"
        )


def beam_search(model, src, beam_width, max_len, bos_id, eos_id, pad_id, length_penalty=0.0, *,
                return_scores=False, use_cache=True, suppress_bos=True) -> None:
    _decoder(model, src, max_len, bos_id, eos_id, pad_id, return_scores, suppress_bos)
    check_positive_int(beam_width, "beam_width")
    if isinstance(length_penalty, bool) or not isinstance(length_penalty, (int, float)):
        raise TypeError(f"length_penalty must be a number, got {type(length_penalty).__name__}")
    if not (length_penalty >= 0 and math.isfinite(length_penalty)):
        raise ValueError(f"length_penalty must be a finite number >= 0, got {length_penalty}")
    check_bool(use_cache, "use_cache")


def sequence_log_prob(model, src, output, bos_id, eos_id, pad_id, *, suppress_bos=True) -> None:
    decoder_model(model)
    decoder_src(src)
    check_tensor(output, "output", ndim=2, dtype="integer")
    special_ids(bos_id, eos_id, pad_id, model)
    check_bool(suppress_bos, "suppress_bos")
    if output.shape[0] != src.shape[0] or output.shape[1] == 0:
        raise ValueError(
            f"output must have shape (batch={src.shape[0]}, n_out >= 1), got {tuple(output.shape)}"
        )


def token_lists(sequences: object, name: str) -> None:
    from collections.abc import Sequence

    if isinstance(sequences, torch.Tensor):
        check_tensor(sequences, name, ndim=2)
        return
    if not isinstance(sequences, Sequence) or isinstance(sequences, str):
        raise TypeError(
            f"{name} must be a 2-D tensor or a list of sequences, got {type(sequences).__name__}"
        )
    for row in sequences:
        if isinstance(row, torch.Tensor):
            check_tensor(row, f"each row of {name}", ndim=1)
        elif isinstance(row, str) or not isinstance(row, Sequence):
            raise TypeError(
                f"each row of {name} must be a sequence of tokens, got {type(row).__name__}"
            )


def exact_match(predictions, targets, *, eos_id=None, pad_id=0, reduce=True) -> None:
    token_lists(predictions, "predictions")
    token_lists(targets, "targets")
    if len(predictions) != len(targets):
        raise ValueError(
            f"predictions and targets must have the same number of rows, got "
            f"{len(predictions)} and {len(targets)}"
        )
    if not len(targets):
        raise ValueError("exact_match needs at least one example, got none")
    check_bool(reduce, "reduce")


def sentence_bleu(candidate, reference, max_n=4, smooth=True) -> None:
    from collections.abc import Hashable, Sequence

    check_positive_int(max_n, "max_n")
    check_bool(smooth, "smooth")
    for name, tokens in (("candidate", candidate), ("reference", reference)):
        if isinstance(tokens, (str, torch.Tensor)) or not isinstance(tokens, Sequence):
            raise TypeError(f"{name} must be a list of tokens, got {type(tokens).__name__}")
        for position, token in enumerate(tokens):
            if not isinstance(token, Hashable):
                raise TypeError(
                    f"{name}[{position}] is a {type(token).__name__}: tokens must be hashable "
                    "(strings or ints) so that n-grams can be counted"
                )


# =============================================================================================
# training.py
# =============================================================================================


def number(value: object, name: str, *, low: float, inclusive: bool) -> float:
    """A finite real number ``> low`` (or ``>= low`` when ``inclusive``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    ok = value >= low if inclusive else value > low
    if not (math.isfinite(value) and ok):
        relation = ">=" if inclusive else ">"
        raise ValueError(f"{name} must be a finite number {relation} {low:g}, got {value!r}")
    return float(value)


def optional_callable(value: object, name: str, signature: str) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{name} must be None or a callable {signature}, got {type(value).__name__}")


def ignore_id(value: object, allow_none: bool = True) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(
            f"ignore_index must be {'None or ' if allow_none else ''}an int, got "
            f"{type(value).__name__}"
        )


def dataset(data: object, name: str) -> int:
    """``data`` must be a non-empty tuple of tensors sharing their first dimension; returns it."""
    if not isinstance(data, (tuple, list)) or len(data) < 2:
        raise TypeError(
            f"{name} must be a tuple of tensors (inputs..., targets), got {type(data).__name__}"
            + (f" of length {len(data)}" if isinstance(data, (tuple, list)) else "")
        )
    for index, item in enumerate(data):
        check_tensor(item, f"{name}[{index}]")
        if item.dim() == 0:
            raise ValueError(f"{name}[{index}] must have a first (example) dimension, got a scalar")
    sizes = {t.shape[0] for t in data}
    if len(sizes) != 1:
        shapes = [tuple(t.shape) for t in data]
        raise ValueError(f"all tensors in {name} need the same first dimension, got {shapes}")
    n = sizes.pop()
    if n == 0:
        raise ValueError(f"{name} holds no examples (first dimension 0): nothing to train on")
    return n


def outputs(output: object, where: str, ignore_index: int | None) -> tuple:
    """``forward_fn``'s result must be ``(logits (..., C), targets (...))`` with class ids in
    ``[0, C)`` (or ``ignore_index``): checked on every batch, before anything is updated."""
    if not isinstance(output, (tuple, list)) or len(output) != 2:
        raise TypeError(
            f"forward_fn must return (logits, targets), got {type(output).__name__} ({where})"
        )
    logits, targets = output
    check_tensor(logits, f"logits ({where})", dtype="floating")
    check_tensor(targets, f"targets ({where})", dtype="integer")
    if logits.dim() == 0 or logits.shape[:-1] != targets.shape:
        raise ValueError(
            f"logits (..., n_classes) and targets (...) do not match ({where}): logits "
            f"{tuple(logits.shape)}, targets {tuple(targets.shape)}; expected targets of shape "
            f"{tuple(logits.shape[:-1])}"
        )
    counted = targets if ignore_index is None else targets[targets != ignore_index]
    if counted.numel() and (int(counted.min()) < 0 or int(counted.max()) >= logits.shape[-1]):
        raise ValueError(
            f"targets hold class ids in [{int(counted.min())}, {int(counted.max())}] ({where}), "
            f"but the logits have {logits.shape[-1]} classes: ids must lie in "
            f"[0, {logits.shape[-1] - 1}]"
            + ("" if ignore_index is None else f" (or be ignore_index={ignore_index})")
        )
    return logits, targets


def cross_entropy(logits: object, targets: object, ignore_index: object = -100) -> None:
    ignore_id(ignore_index, allow_none=False)
    outputs((logits, targets), "cross_entropy", ignore_index)


def accuracy(logits: object, targets: object, ignore_index: object = None) -> None:
    outputs((logits, targets), "accuracy", ignore_index)


def a_module(model: object, name: str = "model") -> None:
    if not isinstance(model, nn.Module):
        raise TypeError(f"{name} must be a torch.nn.Module, got {type(model).__name__}")


def default_forward(model: object, batch: object) -> None:
    if not isinstance(batch, (tuple, list)) or len(batch) < 2:
        raise TypeError(
            "batch must be a tuple (inputs..., targets) of at least two tensors, got "
            + (f"a {type(batch).__name__} of length {len(batch)}" if isinstance(batch, (tuple, list))
               else type(batch).__name__)
        )


def evaluate(model, data, *, batch_size=512, forward_fn=None, ignore_index=None,
             device=None) -> None:
    a_module(model)
    dataset(data, "data")
    check_positive_int(batch_size, "batch_size")
    optional_callable(forward_fn, "forward_fn", "forward_fn(model, batch) -> (logits, targets)")
    ignore_id(ignore_index)
    check_device(device)


def history(values: list) -> None:
    if not values:
        raise ValueError("the history is empty: train for at least one epoch")


def nothing_counted(total: int, ignore_index: object, name: str, what: str) -> None:
    if total == 0:
        raise ValueError(f"every target in {name} is ignore_index={ignore_index}: {what}")


def lr_schedule(optimizer: object, total_steps: object, schedule: object = "warmup_cosine",
                warmup: object = 0.1,
                schedules: tuple[str, ...] = ("warmup_cosine", "one_cycle", "constant")) -> None:
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"optimizer must be a torch.optim.Optimizer, got {type(optimizer).__name__}"
        )
    check_positive_int(total_steps, "total_steps")
    if schedule not in schedules:
        raise ValueError(f"schedule must be one of {schedules} or a factory, got {schedule!r}")
    warmup = number(warmup, "warmup", low=0.0, inclusive=True)
    if warmup >= 1:
        raise ValueError(f"warmup is a fraction of the steps, in [0, 1), got {warmup!r}")


def schedule_factory(schedule: object, schedules: tuple[str, ...]) -> None:
    if not isinstance(schedule, str) and not callable(schedule):
        raise TypeError(
            f"schedule must be one of {schedules} or a factory(optimizer, total_steps) -> "
            f"scheduler, got {type(schedule).__name__}"
        )


def scheduler(scheduler: object) -> None:
    if not callable(getattr(scheduler, "step", None)):
        raise TypeError(
            "the schedule factory must return a scheduler with a step() method (e.g. a "
            f"torch.optim.lr_scheduler.LRScheduler), got {type(scheduler).__name__}"
        )


def beta_pair(betas: object) -> None:
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"betas must be a pair (beta1, beta2), got {type(betas).__name__} ({betas!r})")
    for index, beta in enumerate(betas):
        number(beta, f"betas[{index}]", low=0.0, inclusive=True)
        if not beta < 1:
            raise ValueError(f"betas[{index}] must be in [0, 1), got {beta!r}")


def fit(model, train_data, *, epochs, batch_size=64, lr=3e-3, schedule="warmup_cosine",
        warmup=0.1, weight_decay=0.0, betas=(0.9, 0.999), eval_data=None, forward_fn=None,
        ignore_index=None, grad_clip=1.0, seed=0, device=None, progress=True, desc="training",
        after_step=None, after_epoch=None) -> None:
    a_module(model)
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError("model has no trainable parameters (none with requires_grad=True)")
    check_positive_int(epochs, "epochs")
    check_positive_int(batch_size, "batch_size")
    number(lr, "lr", low=0.0, inclusive=False)
    number(weight_decay, "weight_decay", low=0.0, inclusive=True)
    if grad_clip is not None:
        number(grad_clip, "grad_clip", low=0.0, inclusive=False)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {type(seed).__name__} ({seed!r})")
    if not isinstance(warmup, (int, float)) or isinstance(warmup, bool) or not 0 <= warmup < 1:
        raise ValueError(f"warmup is a fraction of the steps, in [0, 1), got {warmup!r}")
    ignore_id(ignore_index)
    check_bool(progress, "progress")
    if not isinstance(desc, str):
        raise TypeError(f"desc must be a str (the progress bar's label), got {type(desc).__name__} ({desc!r})")
    optional_callable(forward_fn, "forward_fn", "forward_fn(model, batch) -> (logits, targets)")
    optional_callable(after_step, "after_step", "after_step(step, model)")
    optional_callable(after_epoch, "after_epoch", "after_epoch(epoch, model)")
    schedule_factory(schedule, ("warmup_cosine", "one_cycle", "constant"))
    if isinstance(schedule, str):
        lr_schedule(torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=lr), 1, schedule,
                    warmup, ("warmup_cosine", "one_cycle", "constant"))
    beta_pair(betas)
    dataset(train_data, "train_data")
    if eval_data is not None:
        dataset(eval_data, "eval_data")
    check_device(device)


def finite_loss(loss: torch.Tensor, where: str, rows: torch.Tensor) -> None:
    """A NaN/inf loss stops training before the update (the model keeps its weights)."""
    if not torch.isfinite(loss):
        raise FloatingPointError(
            f"the loss is {loss.item()} at {where} (examples {rows[:8].tolist()}"
            f"{', ...' if len(rows) > 8 else ''}): training stopped before this step, the "
            "model keeps its last finite weights. Look for NaN/inf in these inputs, or try a "
            "smaller lr"
        )


def finite_gradient(norm: torch.Tensor, where: str, loss: torch.Tensor, optimizer) -> None:
    if not torch.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        raise FloatingPointError(
            f"the gradient norm is {norm.item()} at {where} (loss {loss.item():.4g}): "
            "training stopped before this step, the model keeps its last finite weights"
        )
