"""The rules of :mod:`lectures_lib.layers`: layer norm, the residual connection, the attention
factories, the layers' inputs (``EncoderLayer.check_inputs`` and ``DecoderLayer.check_inputs`` are
the doors of their ``forward``), PyTorch layers.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

from torch import nn

from .._mask_check import check_mask
from ..cache import KeyValueCache, kv_cache_problem
from ..utils import check_tensor
from .attention import sequence
from .settings import check_settings, positive_eps


def factory_takes_bias(factory: Callable, name: str) -> None:
    """Refuse clearly a factory that takes no ``bias`` when the layer asks for ``bias=False``
    (the layer's ``bias=False`` would otherwise be lost)."""
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


def attention_module(module: object, name: str) -> None:
    """What an attention factory returned: an ``nn.Module`` with the attention ``forward``."""
    if not isinstance(module, nn.Module):
        raise TypeError(f"the {name} factory must return an nn.Module, got {type(module).__name__}")
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


def layer_norm_inputs(x: object, gamma: object, beta: object, eps: object = 1e-5) -> None:
    check_tensor(x, "x", dtype="floating")
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension (..., d), got a scalar")
    d = x.shape[-1]
    check_tensor(gamma, "gamma", shape=(d,))
    check_tensor(beta, "beta", shape=(d,))
    positive_eps(eps, "eps")


def sublayer_inputs(x: object, sublayer: object, norm: object, norm_first: object = False) -> None:
    check_tensor(x, "x", dtype="floating")
    for name, function in (("sublayer", sublayer), ("norm", norm)):
        if not callable(function):
            raise TypeError(
                f"{name} must be a callable taking and returning a tensor (a module or a "
                f"function), got {type(function).__name__}"
            )
    check_settings(norm_first=norm_first)


def feed_forward_inputs(self: nn.Module, x: object) -> None:
    sequence(x, "x", self.d_model)


def encoder_layer_inputs(module: nn.Module, x: object, mask: object = None,
                         need_weights: object = False) -> None:
    sequence(x, "x", module.d_model)
    if mask is not None:
        check_mask(mask, (x.shape[0], module.num_heads, x.shape[1], x.shape[1]))
    check_settings(need_weights=need_weights)


def decoder_layer_inputs(module: nn.Module, x: object, memory: object, tgt_mask: object = None,
                         memory_mask: object = None, need_weights: object = False) -> None:
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
    check_settings(need_weights=need_weights)


def decoder_layer_cached_inputs(self: nn.Module, x: object, memory: object, cache: object,
                                tgt_mask: object = None, memory_mask: object = None) -> None:
    sequence(x, "x", self.d_model)
    sequence(memory, "memory", self.d_model)
    if not (isinstance(cache, tuple) and len(cache) == 2
            and all(isinstance(c, KeyValueCache) for c in cache)):
        raise TypeError(
            "cache must be a tuple (self_cache, cross_cache) of two KeyValueCache, got "
            f"{type(cache).__name__}"
        )
    cacheable_decoder([self], numbered=False)
    self_cache, cross_cache = cache
    self.self_attn.check_cached_inputs(x, x, x, self_cache, tgt_mask, static=False)
    self.cross_attn.check_cached_inputs(x, memory, memory, cross_cache, memory_mask, static=True)


def cacheable_decoder(layers: list[nn.Module], numbered: bool = True) -> None:
    """Every decoder attention can be cached exactly (else decode with ``use_cache=False``)."""
    for index, layer in enumerate(layers):
        for name in ("self_attn", "cross_attn"):
            problem = kv_cache_problem(getattr(layer, name), static=name == "cross_attn")
            if problem:
                raise TypeError(f"{f'decoder layer {index} ' if numbered else ''}{name}: {problem}")


def torch_layer_type(module: object, expected: type) -> None:
    if not isinstance(module, expected):
        raise TypeError(f"expected nn.{expected.__name__}, got {type(module).__name__}")


def weights_present(weights: object, *, stacked: bool = False) -> None:
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


def torch_layer_settings(layer: nn.Module, norms: list[nn.LayerNorm], has_bias: bool) -> None:
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
