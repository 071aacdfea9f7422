r"""The Transformer: layer norm, feed-forward, encoder and decoder layers, the seq2seq model.

Derived in ``04_transformer_encoder.ipynb`` (``layer_norm``, ``sublayer_connection``,
``FeedForward``, ``EncoderLayer``, ``Encoder``, ``TokenEmbedding``, ``EncoderTagger``) and
``05_transformer_decoder.ipynb`` (``DecoderLayer``, ``Decoder``, ``make_tgt_mask``,
``Transformer``).

Every block wraps its two (encoder) or three (decoder) sub-layers in a residual connection
(残差连接) :math:`Y = X + H(X)` and a layer normalisation (层归一化). Two orders exist, and both
are selectable with ``norm_first``:

* **Post-LN** (``norm_first=False``), the order of the original paper (Vaswani et al., 2017):
  :math:`x \leftarrow \operatorname{LN}(x + \operatorname{Sublayer}(x))`;
* **Pre-LN** (``norm_first=True``), the order most code uses today (Xiong et al., 2020):
  :math:`x \leftarrow x + \operatorname{Sublayer}(\operatorname{LN}(x))`; a stack of Pre-LN
  layers then needs one final LayerNorm (``Encoder(..., final_norm=True)``).

Conventions are the course's: batch-first tensors ``(batch, seq, d_model)``, boolean masks with
**True = "may attend"** broadcasting to ``(batch, heads, n_queries, n_keys)``. PyTorch's
``nn.Transformer*`` modules use the opposite for their boolean masks (True = "blocked"): pass
``~our_mask`` there.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadAttention, _check_dropout_p, causal_mask, check_mask
from .positional import SinusoidalEncoding
from .utils import check_positive_int, check_tensor

__all__ = [
    "layer_norm",
    "sublayer_connection",
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
    "Encoder",
    "Decoder",
    "TokenEmbedding",
    "EncoderTagger",
    "Transformer",
    "make_src_mask",
    "make_tgt_mask",
]


# ---------------------------------------------------------------------------------------------
# Small helpers: input checks and activations
# ---------------------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu}


def _activation_name(activation: object) -> str:
    """Map ``"relu"``/``"gelu"``, ``F.relu``/``F.gelu`` or ``nn.ReLU()``/``nn.GELU()`` to a name."""
    if isinstance(activation, str) and activation in _ACTIVATIONS:
        return activation
    if activation is F.relu or activation is torch.relu or isinstance(activation, nn.ReLU):
        return "relu"
    if activation is F.gelu or (isinstance(activation, nn.GELU) and activation.approximate == "none"):
        return "gelu"
    raise ValueError(
        "activation must be 'relu' or 'gelu' (or F.relu / torch.relu / F.gelu / nn.ReLU() / "
        f"nn.GELU()), got {activation!r}"
    )


def _check_sequence(x: object, name: str, d_model: int) -> torch.Tensor:
    """``x`` must be a floating tensor ``(batch, seq, d_model)``."""
    check_tensor(x, name, ndim=3, dtype="floating")
    if x.shape[-1] != d_model:
        raise ValueError(
            f"{name} must have shape (batch, seq, d_model={d_model}), got {tuple(x.shape)}: "
            "its last dimension does not match the layer's d_model"
        )
    return x


def _check_token_ids(tokens: object, name: str, vocab_size: int) -> torch.Tensor:
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


def _reset_parameters(module: nn.Module) -> None:
    """Re-initialise every sub-module that knows how (``nn.Linear``, ``nn.LayerNorm``, ...)."""
    for sub in module.modules():
        if sub is not module and hasattr(sub, "reset_parameters"):
            sub.reset_parameters()


# ---------------------------------------------------------------------------------------------
# Layer normalisation and the residual connection
# ---------------------------------------------------------------------------------------------


def layer_norm(
    x: torch.Tensor, gamma: torch.Tensor, beta: torch.Tensor, eps: float = 1e-5
) -> torch.Tensor:
    r"""Layer normalisation (层归一化): normalise each token over its own features.

    .. math::
        \mu = \frac{1}{d}\sum_{j} x_j, \qquad
        \sigma^2 = \frac{1}{d}\sum_{j} (x_j - \mu)^2, \qquad
        y_j = \gamma_j \, \frac{x_j - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta_j

    The mean and the (biased, divide-by-d) variance are taken over the **last** dimension only, so
    every token is normalised on its own, whatever the batch or the sequence length; BatchNorm
    instead normalises each feature over the batch. Same result as ``nn.LayerNorm(d)`` and
    ``F.layer_norm``. ``x``: ``(..., d)``; ``gamma``, ``beta``: ``(d,)``.
    Derived in ``04_transformer_encoder.ipynb``.
    """
    check_tensor(x, "x", dtype="floating")
    if x.dim() == 0:
        raise ValueError("x must have at least 1 dimension (..., d), got a scalar")
    d = x.shape[-1]
    check_tensor(gamma, "gamma", shape=(d,))
    check_tensor(beta, "beta", shape=(d,))
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or eps < 0:
        raise ValueError(f"eps must be a number >= 0, got {eps!r}")
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased (divide by d)
    normalised = (x - mean) / torch.sqrt(variance + eps)  # (..., d)
    return gamma * normalised + beta


def sublayer_connection(
    x: torch.Tensor,
    sublayer: Callable[[torch.Tensor], torch.Tensor],
    norm: Callable[[torch.Tensor], torch.Tensor],
    norm_first: bool = False,
) -> torch.Tensor:
    r"""Residual connection plus LayerNorm around one sub-layer, in either order.

    * Post-LN (``norm_first=False``, the original paper): :math:`\operatorname{LN}(x + H(x))`;
    * Pre-LN (``norm_first=True``, most code today): :math:`x + H(\operatorname{LN}(x))`.

    ``sublayer`` is :math:`H` (attention or feed-forward, dropout included), ``norm`` the
    LayerNorm. In Pre-LN the residual path :math:`x \to x + \dots` never passes through a norm.
    Derived in ``04_transformer_encoder.ipynb``.
    """
    if not isinstance(norm_first, bool):
        raise TypeError(f"norm_first must be a bool, got {type(norm_first).__name__}")
    if norm_first:
        return x + sublayer(norm(x))
    return norm(x + sublayer(x))


# ---------------------------------------------------------------------------------------------
# Feed-forward network
# ---------------------------------------------------------------------------------------------


class FeedForward(nn.Module):
    r"""Position-wise feed-forward network: two linear maps with an activation between.

    .. math:: \operatorname{FFN}(x) = W_2\, \operatorname{act}(W_1 x + b_1) + b_2

    applied to every position separately (the same weights for each token).

    Args:
        d_model: size of the input and output vectors.
        d_ff: size of the hidden layer (the paper uses ``4 * d_model``).
        dropout: dropout after the activation (training only), as in PyTorch's layers.
        activation: ``"relu"`` (the paper) or ``"gelu"`` (BERT, GPT).
        bias: biases on the two linear maps.

    Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str | Callable = "relu",
        bias: bool = True,
    ) -> None:
        super().__init__()
        self.d_model = check_positive_int(d_model, "d_model")
        self.d_ff = check_positive_int(d_ff, "d_ff")
        self.activation = _activation_name(activation)
        self.linear1 = nn.Linear(self.d_model, self.d_ff, bias=bias)  # W_1: d_model -> d_ff
        self.dropout = nn.Dropout(_check_dropout_p(dropout, "dropout"))
        self.linear2 = nn.Linear(self.d_ff, self.d_model, bias=bias)  # W_2: d_ff -> d_model

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``(batch, seq, d_model)`` -> ``(batch, seq, d_model)``."""
        _check_sequence(x, "x", self.d_model)
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # (batch, seq, d_ff)
        return self.linear2(self.dropout(hidden))  # (batch, seq, d_model)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


def _copy_feed_forward(ours: FeedForward, linear1: nn.Linear, linear2: nn.Linear) -> None:
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
    eps = {norm.eps for norm in norms}
    if len(eps) != 1:
        raise ValueError(f"all LayerNorms of the layer must share one eps, got {sorted(eps)}")
    has_bias = layer.linear1.bias is not None
    if any((norm.bias is not None) != has_bias for norm in norms) or (
        (layer.self_attn.in_proj_bias is not None) != has_bias
    ):
        raise ValueError("mixed bias settings are not supported: all biases on, or all off")
    if any(not norm.elementwise_affine for norm in norms):
        raise ValueError("LayerNorms without elementwise_affine are not supported")
    return {
        "d_model": layer.self_attn.embed_dim,
        "num_heads": layer.self_attn.num_heads,
        "d_ff": layer.linear1.out_features,
        "dropout": layer.dropout.p,
        "activation": _activation_name(layer.activation),
        "norm_first": bool(layer.norm_first),
        "layer_norm_eps": eps.pop(),
        "bias": has_bias,
    }


# ---------------------------------------------------------------------------------------------
# Encoder layer
# ---------------------------------------------------------------------------------------------


class EncoderLayer(nn.Module):
    r"""One encoder block (编码器): self-attention and a feed-forward network, each wrapped in a
    residual connection and a LayerNorm.

    Post-LN (``norm_first=False``, the original paper, and PyTorch's default)::

        x = LN_1(x + Dropout(MHA(x, x, x)))
        x = LN_2(x + Dropout(FFN(x)))

    Pre-LN (``norm_first=True``, most code today)::

        x = x + Dropout(MHA(LN_1(x)))
        x = x + Dropout(FFN(LN_2(x)))

    Args:
        d_model: size of every token vector.
        num_heads: attention heads; must divide ``d_model``.
        d_ff: hidden size of the feed-forward network.
        dropout: dropout on attention weights, inside the FFN and on each sub-layer's output.
        activation: ``"relu"`` or ``"gelu"``.
        norm_first: False = Post-LN (paper), True = Pre-LN.
        layer_norm_eps: the :math:`\varepsilon` of both LayerNorms.
        bias: biases in the projections, the FFN and the LayerNorms (as PyTorch's ``bias``).

    ``forward(x, mask=None, need_weights=False)``: ``x`` ``(batch, seq, d_model)``; ``mask`` a
    bool mask (True = may attend) broadcasting to ``(batch, heads, seq, seq)``, e.g. a key-padding
    mask ``(batch, 1, 1, seq)``. With ``need_weights=True`` the per-head attention weights
    ``(batch, heads, seq, seq)`` are kept in ``self.last_attention``; otherwise attention takes the
    fused fast path and ``last_attention`` is None. Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str | Callable = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        dropout = _check_dropout_p(dropout, "dropout")
        self.d_model = check_positive_int(d_model, "d_model")
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.last_attention: torch.Tensor | None = None

    def _self_attention(self, x, mask, need_weights):
        out, weights = self.self_attn(x, x, x, mask, need_weights=need_weights)
        self.last_attention = weights.detach() if need_weights else None
        return self.dropout1(out)  # (batch, seq, d_model)

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        _check_sequence(x, "x", self.d_model)
        if mask is not None:
            check_mask(mask, (x.shape[0], self.self_attn.num_heads, x.shape[1], x.shape[1]))
        x = sublayer_connection(
            x, lambda h: self._self_attention(h, mask, need_weights), self.norm1, self.norm_first
        )
        return sublayer_connection(
            x, lambda h: self.dropout2(self.feed_forward(h)), self.norm2, self.norm_first
        )

    def reset_parameters(self) -> None:
        """Fresh random weights (used by :class:`Encoder` so that copies share nothing)."""
        _reset_parameters(self)

    @classmethod
    def from_torch(cls, layer: nn.TransformerEncoderLayer) -> EncoderLayer:
        """Build an equivalent course layer from a PyTorch ``nn.TransformerEncoderLayer``.

        Copies every weight and the settings (Post-LN or Pre-LN, relu or gelu, bias, eps,
        dropout). Masks are *not* converted: PyTorch's ``src_key_padding_mask`` is True at padding
        ("blocked"), ours is True where a key may be attended, so pass
        ``(~src_key_padding_mask)[:, None, None, :]`` here. Our layer is always batch-first.
        """
        if not isinstance(layer, nn.TransformerEncoderLayer):
            raise TypeError(f"expected nn.TransformerEncoderLayer, got {type(layer).__name__}")
        ours = cls(**_torch_layer_settings(layer))
        ours.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        ours = ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
        _copy_feed_forward(ours.feed_forward, layer.linear1, layer.linear2)
        _copy_norm(ours.norm1, layer.norm1)
        _copy_norm(ours.norm2, layer.norm2)
        return ours.train(layer.training)


# ---------------------------------------------------------------------------------------------
# Decoder layer
# ---------------------------------------------------------------------------------------------


class DecoderLayer(nn.Module):
    r"""One decoder block (解码器): masked self-attention, cross-attention (交叉注意力) to the
    encoder's output, and a feed-forward network; each with a residual connection and LayerNorm.

    Post-LN (``norm_first=False``, the paper)::

        x = LN_1(x + Dropout(MHA(x, x, x, tgt_mask)))
        x = LN_2(x + Dropout(MHA(x, memory, memory, memory_mask)))   # queries from the decoder
        x = LN_3(x + Dropout(FFN(x)))

    Pre-LN (``norm_first=True``) applies each LN to the sub-layer's input instead:
    ``x = x + Dropout(Sublayer(LN(x)))`` (the memory is not normalised here).

    Arguments as :class:`EncoderLayer`. ``forward(x, memory, tgt_mask=None, memory_mask=None,
    need_weights=False)``: ``x`` ``(batch, n_tgt, d_model)``, ``memory`` ``(batch, n_src,
    d_model)``; ``tgt_mask`` broadcasts to ``(batch, heads, n_tgt, n_tgt)`` (causal, and key
    padding), ``memory_mask`` to ``(batch, heads, n_tgt, n_src)``; True = may attend. With
    ``need_weights=True`` the weights are kept in ``last_attention`` (self) and
    ``last_cross_attention`` (cross). Derived in ``05_transformer_decoder.ipynb``.
    """

    def __init__(
        self,
        d_model: int,
        num_heads: int,
        d_ff: int,
        dropout: float = 0.0,
        activation: str | Callable = "relu",
        norm_first: bool = False,
        layer_norm_eps: float = 1e-5,
        bias: bool = True,
    ) -> None:
        super().__init__()
        dropout = _check_dropout_p(dropout, "dropout")
        self.d_model = check_positive_int(d_model, "d_model")
        self.norm_first = bool(norm_first)
        self.self_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.cross_attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm3 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.dropout3 = nn.Dropout(dropout)
        self.last_attention: torch.Tensor | None = None
        self.last_cross_attention: torch.Tensor | None = None

    def _self_attention(self, x, mask, need_weights):
        out, weights = self.self_attn(x, x, x, mask, need_weights=need_weights)
        self.last_attention = weights.detach() if need_weights else None
        return self.dropout1(out)  # (batch, n_tgt, d_model)

    def _cross_attention(self, x, memory, mask, need_weights):
        # Queries from the decoder, keys and values from the encoder's output (the memory).
        out, weights = self.cross_attn(x, memory, memory, mask, need_weights=need_weights)
        self.last_cross_attention = weights.detach() if need_weights else None
        return self.dropout2(out)  # (batch, n_tgt, d_model)

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        _check_sequence(x, "x", self.d_model)
        _check_sequence(memory, "memory", self.d_model)
        if memory.shape[0] != x.shape[0]:
            raise ValueError(
                "x and memory must have the same batch size, got x "
                f"{tuple(x.shape)} and memory {tuple(memory.shape)}"
            )
        batch, n_tgt, n_src = x.shape[0], x.shape[1], memory.shape[1]
        heads = self.self_attn.num_heads
        if tgt_mask is not None:
            check_mask(tgt_mask, (batch, heads, n_tgt, n_tgt))
        if memory_mask is not None:
            check_mask(memory_mask, (batch, heads, n_tgt, n_src))
        x = sublayer_connection(
            x, lambda h: self._self_attention(h, tgt_mask, need_weights), self.norm1,
            self.norm_first,
        )
        x = sublayer_connection(
            x, lambda h: self._cross_attention(h, memory, memory_mask, need_weights), self.norm2,
            self.norm_first,
        )
        return sublayer_connection(
            x, lambda h: self.dropout3(self.feed_forward(h)), self.norm3, self.norm_first
        )

    def reset_parameters(self) -> None:
        """Fresh random weights (used by :class:`Decoder` so that copies share nothing)."""
        _reset_parameters(self)

    @classmethod
    def from_torch(cls, layer: nn.TransformerDecoderLayer) -> DecoderLayer:
        """Build an equivalent course layer from a PyTorch ``nn.TransformerDecoderLayer``.

        Copies every weight and setting (norm order, activation, bias, eps, dropout). Masks are
        not converted: PyTorch's bool ``tgt_mask`` and ``*_key_padding_mask`` mean "blocked" where
        True; ours mean "may attend". Our layer is always batch-first.
        """
        if not isinstance(layer, nn.TransformerDecoderLayer):
            raise TypeError(f"expected nn.TransformerDecoderLayer, got {type(layer).__name__}")
        ours = cls(**_torch_layer_settings(layer))
        ours.self_attn = MultiHeadAttention.from_torch(layer.self_attn)
        ours.cross_attn = MultiHeadAttention.from_torch(layer.multihead_attn)
        ours = ours.to(device=layer.linear1.weight.device, dtype=layer.linear1.weight.dtype)
        _copy_feed_forward(ours.feed_forward, layer.linear1, layer.linear2)
        _copy_norm(ours.norm1, layer.norm1)
        _copy_norm(ours.norm2, layer.norm2)
        _copy_norm(ours.norm3, layer.norm3)
        return ours.train(layer.training)


# ---------------------------------------------------------------------------------------------
# Stacks of layers
# ---------------------------------------------------------------------------------------------


def _independent_layers(layer: nn.Module | Callable[[], nn.Module], num_layers: int, kind: type):
    """``num_layers`` layers that share no parameter: fresh copies of a template, or a factory's."""
    num_layers = check_positive_int(num_layers, "num_layers")
    if isinstance(layer, nn.Module):
        if not isinstance(layer, kind):
            raise TypeError(f"expected a {kind.__name__} as template, got {type(layer).__name__}")
        layers = [copy.deepcopy(layer) for _ in range(num_layers)]
        for each in layers:
            each.reset_parameters()  # identical structure, independent random weights
    elif callable(layer):
        layers = [layer() for _ in range(num_layers)]
        for each in layers:
            if not isinstance(each, kind):
                raise TypeError(
                    f"the layer factory must return a {kind.__name__}, got {type(each).__name__}"
                )
        if len({id(each) for each in layers}) != num_layers:
            raise ValueError("the layer factory returned the same layer twice: layers would share")
    else:
        raise TypeError(
            f"layer must be a {kind.__name__} (template) or a callable returning one, "
            f"got {type(layer).__name__}"
        )
    return nn.ModuleList(layers)


def _final_norm(layers: nn.ModuleList, final_norm: bool | None) -> nn.LayerNorm | None:
    first = layers[0]
    if final_norm is None:
        final_norm = first.norm_first  # Pre-LN leaves the residual stream unnormalised
    if not final_norm:
        return None
    return nn.LayerNorm(first.d_model, eps=first.norm1.eps, bias=first.norm1.bias is not None)


class Encoder(nn.Module):
    """A stack of ``num_layers`` encoder layers: identical structure, **no shared parameters**.

    Args:
        layer: an :class:`EncoderLayer` used as a template (deep-copied ``num_layers`` times, each
            copy re-initialised so the layers start from different random weights), or a
            zero-argument callable returning a new :class:`EncoderLayer` on each call.
        num_layers: how many layers.
        final_norm: a LayerNorm after the last layer. Default (None): only for Pre-LN layers,
            whose output is otherwise not normalised (Post-LN layers end with a LayerNorm).

    ``forward(x, mask=None, need_weights=False)`` runs the layers in turn. After a call with
    ``need_weights=True``, :meth:`attention_maps` returns ``(layers, batch, heads, n, n)``.
    Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        layer: EncoderLayer | Callable[[], EncoderLayer],
        num_layers: int,
        final_norm: bool | None = None,
    ) -> None:
        super().__init__()
        self.layers = _independent_layers(layer, num_layers, EncoderLayer)
        self.norm = _final_norm(self.layers, final_norm)
        self.d_model = self.layers[0].d_model

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, need_weights=need_weights)  # (batch, seq, d_model)
        return self.norm(x) if self.norm is not None else x

    def attention_maps(self) -> torch.Tensor:
        """Self-attention weights of the last ``need_weights=True`` call: ``(layers, batch,
        heads, n, n)``."""
        return _stack_maps([layer.last_attention for layer in self.layers])


class Decoder(nn.Module):
    """A stack of ``num_layers`` decoder layers sharing no parameters (see :class:`Encoder`).

    ``forward(x, memory, tgt_mask=None, memory_mask=None, need_weights=False)``.
    Derived in ``05_transformer_decoder.ipynb``.
    """

    def __init__(
        self,
        layer: DecoderLayer | Callable[[], DecoderLayer],
        num_layers: int,
        final_norm: bool | None = None,
    ) -> None:
        super().__init__()
        self.layers = _independent_layers(layer, num_layers, DecoderLayer)
        self.norm = _final_norm(self.layers, final_norm)
        self.d_model = self.layers[0].d_model

    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, memory, tgt_mask, memory_mask, need_weights=need_weights)
        return self.norm(x) if self.norm is not None else x

    def attention_maps(self) -> dict[str, torch.Tensor]:
        """``{"self": (layers, batch, heads, n_tgt, n_tgt), "cross": (layers, batch, heads,
        n_tgt, n_src)}`` from the last ``need_weights=True`` call."""
        return {
            "self": _stack_maps([layer.last_attention for layer in self.layers]),
            "cross": _stack_maps([layer.last_cross_attention for layer in self.layers]),
        }


def _stack_maps(maps: list[torch.Tensor | None]) -> torch.Tensor:
    if any(m is None for m in maps):
        raise RuntimeError(
            "no attention weights stored: call forward(..., need_weights=True) first"
        )
    return torch.stack(maps)  # (layers, batch, heads, n_q, n_k)


# ---------------------------------------------------------------------------------------------
# Masks from token ids
# ---------------------------------------------------------------------------------------------


def make_src_mask(src: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    """Key-padding mask ``(batch, 1, 1, n_src)``: True where the source token is not padding.

    Broadcasts over heads and queries; ``pad_id=None`` means no padding (all True).
    Derived in ``04_transformer_encoder.ipynb``.
    """
    check_tensor(src, "src", ndim=2, dtype="integer")
    if pad_id is None:
        keep = torch.ones_like(src, dtype=torch.bool)
    else:
        keep = src != pad_id  # (batch, n_src)
    return keep[:, None, None, :]  # (batch, 1, 1, n_src)


def make_tgt_mask(tgt: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    """Decoder self-attention mask ``(batch, 1, n_tgt, n_tgt)``: causal AND key not padding.

    Position i may attend to position j when j <= i and token j is not padding.
    Derived in ``05_transformer_decoder.ipynb``.
    """
    check_tensor(tgt, "tgt", ndim=2, dtype="integer")
    n_tgt = tgt.shape[1]
    causal = causal_mask(n_tgt, device=tgt.device)  # (n_tgt, n_tgt)
    keys = make_src_mask(tgt, pad_id)  # (batch, 1, 1, n_tgt)
    return causal[None, None] & keys  # (batch, 1, n_tgt, n_tgt)


# ---------------------------------------------------------------------------------------------
# Embeddings and whole models
# ---------------------------------------------------------------------------------------------


class TokenEmbedding(nn.Module):
    r"""Token ids -> vectors: embedding lookup scaled by :math:`\sqrt{d_{model}}`, plus the
    sinusoidal positional encoding (位置编码), then dropout.

    The lookup ``E[token]`` is the one-hot vector times the matrix ``E`` (``04`` shows it). The
    paper multiplies embeddings by :math:`\sqrt{d_{model}}`; the embedding matrix is initialised
    with standard deviation :math:`d_{model}^{-1/2}` so the scaled vectors have entries of size
    about 1, like the positional encoding they are added to.

    Args: ``vocab_size``, ``d_model``, ``max_len`` (longest sequence), ``dropout``, ``pad_id``
    (its row starts at zero and gets no gradient; None for no padding token).
    Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int = 256,
        dropout: float = 0.0,
        pad_id: int | None = 0,
    ) -> None:
        super().__init__()
        self.vocab_size = check_positive_int(vocab_size, "vocab_size")
        self.d_model = check_positive_int(d_model, "d_model")
        self.max_len = check_positive_int(max_len, "max_len")
        if pad_id is not None:
            check_positive_int(pad_id, "pad_id", allow_zero=True)
            if pad_id >= vocab_size:
                raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of {vocab_size}")
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        self.positional = SinusoidalEncoding(d_model, max_len)
        self.dropout = nn.Dropout(_check_dropout_p(dropout, "dropout"))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=self.d_model**-0.5)
        if self.pad_id is not None:
            with torch.no_grad():
                self.embedding.weight[self.pad_id].zero_()

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(batch, seq)`` int64 ids -> ``(batch, seq, d_model)``."""
        _check_token_ids(tokens, "tokens", self.vocab_size)
        if tokens.shape[1] > self.max_len:
            raise ValueError(
                f"tokens has {tokens.shape[1]} positions (shape {tuple(tokens.shape)}), more "
                f"than max_len={self.max_len} of the positional encoding"
            )
        vectors = self.embedding(tokens) * math.sqrt(self.d_model)  # (batch, seq, d_model)
        return self.dropout(self.positional(vectors))


def _xavier_init(*modules: nn.Module) -> None:
    """Xavier-uniform for every weight matrix, as ``nn.Transformer`` does."""
    for module in modules:
        for parameter in module.parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)


class EncoderTagger(nn.Module):
    """Encoder-only model that gives every input token a label (sequence labelling).

    ``TokenEmbedding`` -> :class:`Encoder` -> a linear map to ``num_labels`` logits per position.
    ``forward(tokens, mask=None)``: ``tokens`` ``(batch, seq)``; if ``mask`` is None it is the
    key-padding mask of ``tokens != pad_id``. Returns logits ``(batch, seq, num_labels)``.
    Derived in ``04_transformer_encoder.ipynb`` (the reverse task).
    """

    def __init__(
        self,
        vocab_size: int,
        num_labels: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.0,
        max_len: int = 256,
        norm_first: bool = False,
        activation: str = "relu",
        pad_id: int | None = 0,
    ) -> None:
        super().__init__()
        self.num_labels = check_positive_int(num_labels, "num_labels")
        self.pad_id = pad_id
        self.embed = TokenEmbedding(vocab_size, d_model, max_len, dropout, pad_id)
        self.encoder = Encoder(
            lambda: EncoderLayer(d_model, num_heads, d_ff, dropout, activation, norm_first),
            num_layers,
        )
        self.output = nn.Linear(d_model, num_labels)
        _xavier_init(self.encoder, self.output)

    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        if mask is None:
            mask = make_src_mask(tokens, self.pad_id)  # (batch, 1, 1, seq)
        hidden = self.encoder(self.embed(tokens), mask, need_weights=need_weights)
        return self.output(hidden)  # (batch, seq, num_labels)

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor, mask: torch.Tensor | None = None):
        """Self-attention weights ``(layers, batch, heads, seq, seq)``, computed in eval mode."""
        was_training = self.training
        self.eval()
        try:
            self(tokens, mask, need_weights=True)
            return self.encoder.attention_maps()
        finally:
            self.train(was_training)


class Transformer(nn.Module):
    r"""The encoder-decoder Transformer of Vaswani et al. (2017) for sequence-to-sequence tasks.

    ``src`` ids -> :class:`TokenEmbedding` -> :class:`Encoder` -> ``memory``;
    ``tgt`` ids -> :class:`TokenEmbedding` -> :class:`Decoder` (masked self-attention, cross
    attention to ``memory``) -> linear map to ``tgt_vocab_size`` logits (softmax in the loss).

    ``norm_first=False`` is the paper's Post-LN, ``True`` the Pre-LN order (with a final
    LayerNorm after each stack). Weight matrices are Xavier-initialised, as in ``nn.Transformer``.
    ``pad_id`` marks padding in both vocabularies (None: no padding).

    * ``encode(src, src_mask=None) -> memory`` ``(batch, n_src, d_model)``;
    * ``decode(tgt, memory, src=None, tgt_mask=None, memory_mask=None) -> logits``;
    * ``forward(src, tgt) -> logits`` ``(batch, n_tgt, tgt_vocab_size)``;
    * ``attention_maps(src, tgt) -> {"encoder", "decoder_self", "decoder_cross"}``.

    Derived in ``05_transformer_decoder.ipynb``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 64,
        num_heads: int = 4,
        num_encoder_layers: int = 2,
        num_decoder_layers: int = 2,
        d_ff: int = 128,
        dropout: float = 0.0,
        max_len: int = 256,
        norm_first: bool = False,
        activation: str = "relu",
        pad_id: int | None = 0,
    ) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self.src_vocab_size = check_positive_int(src_vocab_size, "src_vocab_size")
        self.tgt_vocab_size = check_positive_int(tgt_vocab_size, "tgt_vocab_size")
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, max_len, dropout, pad_id)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, max_len, dropout, pad_id)
        settings = (d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.encoder = Encoder(lambda: EncoderLayer(*settings), num_encoder_layers)
        self.decoder = Decoder(lambda: DecoderLayer(*settings), num_decoder_layers)
        self.output = nn.Linear(d_model, tgt_vocab_size)  # to one logit per vocabulary entry
        _xavier_init(self.encoder, self.decoder, self.output)

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        """``src`` ``(batch, n_src)`` ids -> memory ``(batch, n_src, d_model)``."""
        _check_token_ids(src, "src", self.src_vocab_size)
        if src_mask is None:
            src_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src)
        return self.encoder(self.src_embed(src), src_mask, need_weights=need_weights)

    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        """``tgt`` ``(batch, n_tgt)`` ids and memory -> logits ``(batch, n_tgt, tgt_vocab)``.

        Default ``tgt_mask``: causal AND target key not padding (:func:`make_tgt_mask`); default
        ``memory_mask``: the source padding mask when ``src`` is given, else no mask.
        """
        _check_token_ids(tgt, "tgt", self.tgt_vocab_size)
        _check_sequence(memory, "memory", self.d_model)
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"tgt {tuple(tgt.shape)} and memory {tuple(memory.shape)} have different batch sizes"
            )
        if tgt_mask is None:
            tgt_mask = make_tgt_mask(tgt, self.pad_id)  # (batch, 1, n_tgt, n_tgt)
        if memory_mask is None and src is not None:
            _check_token_ids(src, "src", self.src_vocab_size)
            if tuple(src.shape) != tuple(memory.shape[:2]):
                raise ValueError(
                    f"src {tuple(src.shape)} does not match memory {tuple(memory.shape)}: "
                    "expected the same (batch, n_src)"
                )
            memory_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src)
        hidden = self.decoder(
            self.tgt_embed(tgt), memory, tgt_mask, memory_mask, need_weights=need_weights
        )
        return self.output(hidden)  # (batch, n_tgt, tgt_vocab_size)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits for every target position at once."""
        memory = self.encode(src)
        return self.decode(tgt, memory, src=src)

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, tgt: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every layer's and head's attention weights, computed in eval mode:
        ``{"encoder": (layers, batch, heads, n_src, n_src), "decoder_self": (layers, batch,
        heads, n_tgt, n_tgt), "decoder_cross": (layers, batch, heads, n_tgt, n_src)}``."""
        was_training = self.training
        self.eval()
        try:
            memory = self.encode(src, need_weights=True)
            self.decode(tgt, memory, src=src, need_weights=True)
        finally:
            self.train(was_training)
        decoder_maps = self.decoder.attention_maps()
        return {
            "encoder": self.encoder.attention_maps(),
            "decoder_self": decoder_maps["self"],
            "decoder_cross": decoder_maps["cross"],
        }
