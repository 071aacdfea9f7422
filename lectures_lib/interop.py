"""PyTorch's modules copied into the course's: the weights and settings of
``nn.MultiheadAttention``, ``nn.TransformerEncoderLayer`` and ``nn.TransformerDecoderLayer``.

The ``from_torch`` class methods of :class:`~lectures_lib.attention.MultiHeadAttention`,
:class:`~lectures_lib.layers.EncoderLayer` and :class:`~lectures_lib.layers.DecoderLayer` call
these with the course's classes as arguments, so this module imports none of them. Masks are
never converted: PyTorch's boolean masks are True where a key is *blocked*, the course's where it
may be attended (pass ``~torch_mask``).
"""

from __future__ import annotations

import torch
from torch import nn

from ._validate import attention as attention_rules
from ._validate import layers as layer_rules
from ._validate.settings import activation_name


def attention_from_torch(cls: type, module: nn.MultiheadAttention) -> nn.Module:
    """A ``cls`` (``MultiHeadAttention``) holding the weights of ``module``; the packed
    ``in_proj_weight`` is split into W^Q, W^K, W^V."""
    attention_rules.torch_mha(module)
    has_bias = module.in_proj_bias is not None
    ours = cls(
        module.embed_dim,
        module.num_heads,
        dropout=module.dropout,
        bias=has_bias,
        kdim=module.kdim,
        vdim=module.vdim,
    )
    ours = ours.to(device=module.out_proj.weight.device, dtype=module.out_proj.weight.dtype)
    d = module.embed_dim
    with torch.no_grad():
        if module._qkv_same_embed_dim:
            w_q, w_k, w_v = module.in_proj_weight.split(d, dim=0)
        else:
            w_q, w_k, w_v = module.q_proj_weight, module.k_proj_weight, module.v_proj_weight
        ours.q_proj.weight.copy_(w_q)
        ours.k_proj.weight.copy_(w_k)
        ours.v_proj.weight.copy_(w_v)
        ours.out_proj.weight.copy_(module.out_proj.weight)
        if has_bias:
            b_q, b_k, b_v = module.in_proj_bias.split(d, dim=0)
            ours.q_proj.bias.copy_(b_q)
            ours.k_proj.bias.copy_(b_k)
            ours.v_proj.bias.copy_(b_v)
            ours.out_proj.bias.copy_(module.out_proj.bias)
    ours.train(module.training)
    return ours


def _copy_feed_forward(ours: nn.Module, linear1: nn.Linear, linear2: nn.Linear) -> None:
    with torch.no_grad():
        ours.linear1.weight.copy_(linear1.weight)
        ours.linear2.weight.copy_(linear2.weight)
        if linear1.bias is not None:
            ours.linear1.bias.copy_(linear1.bias)
            ours.linear2.bias.copy_(linear2.bias)


def _copy_norm(ours: nn.LayerNorm, theirs: nn.LayerNorm) -> None:
    with torch.no_grad():
        ours.weight.copy_(theirs.weight)
        if theirs.bias is not None:
            ours.bias.copy_(theirs.bias)


def _torch_layer_settings(layer: nn.Module) -> dict:
    """The constructor arguments of our layers that reproduce a PyTorch Transformer layer."""
    norms = [m for name, m in layer.named_children() if name.startswith("norm")]
    has_bias = layer.linear1.bias is not None
    layer_rules.torch_layer_settings(layer, norms, has_bias)
    return {
        "d_model": layer.self_attn.embed_dim,
        "num_heads": layer.self_attn.num_heads,
        "d_ff": layer.linear1.out_features,
        "dropout": layer.dropout.p,
        "activation": activation_name(layer.activation),
        "norm_first": bool(layer.norm_first),
        "layer_norm_eps": norms[0].eps,
        "bias": has_bias,
    }


def encoder_layer_from_torch(cls: type, layer: nn.TransformerEncoderLayer, attention: type) -> nn.Module:
    """A ``cls`` (``EncoderLayer``) with the settings and weights of ``layer``."""
    layer_rules.torch_layer_type(layer, nn.TransformerEncoderLayer)
    ours = cls(**_torch_layer_settings(layer))
    ours.self_attn = attention.from_torch(layer.self_attn)
    ours = ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    _copy_feed_forward(ours.feed_forward, layer.linear1, layer.linear2)
    _copy_norm(ours.norm1, layer.norm1)
    _copy_norm(ours.norm2, layer.norm2)
    return ours.train(layer.training)


def decoder_layer_from_torch(cls: type, layer: nn.TransformerDecoderLayer, attention: type) -> nn.Module:
    """A ``cls`` (``DecoderLayer``) with the settings and weights of ``layer``."""
    layer_rules.torch_layer_type(layer, nn.TransformerDecoderLayer)
    ours = cls(**_torch_layer_settings(layer))
    ours.self_attn = attention.from_torch(layer.self_attn)
    ours.cross_attn = attention.from_torch(layer.multihead_attn)
    ours = ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
    _copy_feed_forward(ours.feed_forward, layer.linear1, layer.linear2)
    _copy_norm(ours.norm1, layer.norm1)
    _copy_norm(ours.norm2, layer.norm2)
    _copy_norm(ours.norm3, layer.norm3)
    return ours.train(layer.training)
