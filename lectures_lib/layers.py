r"""Transformer layers: layer norm, the residual connection, feed-forward, encoder and decoder
layers (and their ``from_torch``).

Derived in ``04_transformer_encoder.ipynb`` (``layer_norm``, ``sublayer_connection``,
``FeedForward``, ``EncoderLayer``) and ``05_transformer_decoder.ipynb`` (``DecoderLayer``).
The stacks and whole models built from these layers are in :mod:`lectures_lib.models`.

Every block wraps its two (encoder) or three (decoder) sub-layers in a residual connection
(残差连接) :math:`Y = X + H(X)` and a layer normalisation (层归一化). Two orders exist, and both
are selectable with ``norm_first``:

* **Post-LN** (``norm_first=False``), the order of the original paper (Vaswani et al., 2017):
  :math:`x \leftarrow \operatorname{LN}(x + \operatorname{Sublayer}(x))`;
* **Pre-LN** (``norm_first=True``), the order most code uses today (Xiong et al., 2020):
  :math:`x \leftarrow x + \operatorname{Sublayer}(\operatorname{LN}(x))`; a stack of Pre-LN
  layers then needs one final LayerNorm (``Encoder(..., final_norm=True)``).

**Attention is pluggable.** Each layer builds its attention from a *factory*
``factory(d_model, num_heads, dropout) -> module`` whose module has
:class:`~lectures_lib.attention.MultiHeadAttention`'s ``forward(query, key, value, mask=None,
need_weights=True) -> (out, weights or None)``: a class (``LocalAttention``) or a
``functools.partial`` (``partial(LocalAttention, window=4)``); None means ``MultiHeadAttention``.

Conventions are the course's: batch-first tensors ``(batch, seq, d_model)``, boolean masks with
**True = "may attend"** broadcasting to ``(batch, heads, n_queries, n_keys)``. PyTorch's
``nn.Transformer*`` modules use the opposite for their boolean masks (True = "blocked"): pass
``~our_mask`` there.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import interop
from ._validate import layers as rules
from ._validate.settings import activation_name, check_settings, factory_or_none
from .attention import MultiHeadAttention
from .cache import KeyValueCache
from .utils import eval_mode, validated

__all__ = [
    "AttentionFactory",
    "make_attention",
    "layer_norm",
    "sublayer_connection",
    "FeedForward",
    "EncoderLayer",
    "DecoderLayer",
]

#: ``factory(d_model, num_heads, dropout) -> module`` with MultiHeadAttention's forward signature.
AttentionFactory = Callable[[int, int, float], nn.Module]


# ---------------------------------------------------------------------------------------------
# Small helpers: activations, the attention factory
# ---------------------------------------------------------------------------------------------

_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "gelu": F.gelu}


def _reset_parameters(module: nn.Module) -> None:
    """Re-initialise every sub-module that knows how (``nn.Linear``, ``nn.LayerNorm``, ...)."""
    for sub in module.modules():
        if sub is not module and hasattr(sub, "reset_parameters"):
            sub.reset_parameters()


def make_attention(
    factory: AttentionFactory | None,
    d_model: int,
    num_heads: int,
    dropout: float,
    bias: bool = True,
    name: str = "attention",
) -> nn.Module:
    """Build one attention module: ``factory(d_model, num_heads, dropout, bias=bias)``, or the
    course's ``MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)`` when
    ``factory`` is None. ``bias`` reaches a factory only when it is not the default (``True``),
    so a factory that takes no ``bias`` still works; one that cannot take ``bias=False`` is
    refused clearly instead of silently building biased projections."""
    factory_or_none(factory, name)
    if factory is None:
        return MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
    if bias:
        module = factory(d_model, num_heads, dropout)
    else:
        rules.factory_takes_bias(factory, name)
        module = factory(d_model, num_heads, dropout, bias=False)
    rules.attention_module(module, name)
    return module


def _detached(weights: torch.Tensor | None) -> torch.Tensor | None:
    return weights.detach() if weights is not None else None


def _weights_of(weights: torch.Tensor | None) -> torch.Tensor:
    rules.weights_present(weights)
    return weights


# ---------------------------------------------------------------------------------------------
# Layer normalisation and the residual connection
# ---------------------------------------------------------------------------------------------


@validated(rules.layer_norm_inputs)
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
    mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)  # (..., 1), biased (divide by d)
    normalised = (x - mean) / torch.sqrt(variance + eps)  # (..., d)
    return gamma * normalised + beta


@validated(rules.sublayer_inputs)
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
        check_settings(d_model=d_model, d_ff=d_ff, bias=bias, activation=activation, dropout=dropout)
        super().__init__()
        self.d_model, self.d_ff = d_model, d_ff
        self.activation = activation_name(activation)  # "relu" or "gelu"
        self.linear1 = nn.Linear(self.d_model, self.d_ff, bias=bias)  # W_1: d_model -> d_ff
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(self.d_ff, self.d_model, bias=bias)  # W_2: d_ff -> d_model

    @validated(rules.feed_forward_inputs)
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``(batch, seq, d_model)`` -> ``(batch, seq, d_model)``."""
        hidden = _ACTIVATIONS[self.activation](self.linear1(x))  # (batch, seq, d_ff)
        return self.linear2(self.dropout(hidden))  # (batch, seq, d_model)

    def extra_repr(self) -> str:
        return f"activation={self.activation!r}"


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
        attention: the self-attention as a factory ``attention(d_model, num_heads, dropout) ->
            module`` with :class:`~lectures_lib.attention.MultiHeadAttention`'s ``forward``
            signature (a variant class, or ``functools.partial(Variant, window=4)``); None means
            ``MultiHeadAttention`` (with ``bias``).

    ``forward(x, mask=None, need_weights=False)``: ``x`` ``(batch, seq, d_model)``; ``mask`` a
    bool mask (True = may attend) broadcasting to ``(batch, heads, seq, seq)``, e.g. a key-padding
    mask ``(batch, 1, 1, seq)``. With ``need_weights=True`` the per-head attention weights
    ``(batch, heads, seq, seq)`` are kept in ``self.last_attention``; otherwise attention takes the
    fused path and ``last_attention`` is None. :meth:`attention_maps` runs one forward in eval
    mode and returns those weights. Derived in ``04_transformer_encoder.ipynb``.
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
        *,
        attention: AttentionFactory | None = None,
    ) -> None:
        check_settings(dropout=dropout, d_model=d_model, num_heads=num_heads, norm_first=norm_first,
                       layer_norm_eps=layer_norm_eps, bias=bias, attention=attention)
        super().__init__()
        self.d_model, self.num_heads, self.norm_first = d_model, num_heads, norm_first
        self.self_attn = make_attention(attention, d_model, num_heads, dropout, bias, "attention")
        self.feed_forward = FeedForward(d_model, d_ff, dropout, activation, bias=bias)
        self.norm1 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.norm2 = nn.LayerNorm(d_model, eps=layer_norm_eps, bias=bias)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)
        self.last_attention: torch.Tensor | None = None

    def _self_attention(self, x, mask, need_weights):
        out, weights = self.self_attn(x, x, x, mask, need_weights=need_weights)
        self.last_attention = _detached(weights) if need_weights else None
        return self.dropout1(out)  # (batch, seq, d_model)

    #: ``check_inputs(x, mask=None, need_weights=False)``: the door of ``forward`` (once, at the
    #: public boundary); an :class:`~lectures_lib.models.Encoder` checks its inputs with it too.
    check_inputs = rules.encoder_layer_inputs

    @validated("check_inputs")
    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        x = sublayer_connection(
            x, lambda h: self._self_attention(h, mask, need_weights), self.norm1, self.norm_first
        )
        return sublayer_connection(
            x, lambda h: self.dropout2(self.feed_forward(h)), self.norm2, self.norm_first
        )

    @torch.no_grad()
    def attention_maps(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Run one forward in eval mode and return its self-attention weights
        ``(batch, heads, seq, seq)``."""
        with eval_mode(self):
            self(x, mask, need_weights=True)
        return _weights_of(self.last_attention)

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
        return interop.encoder_layer_from_torch(cls, layer, MultiHeadAttention)


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
    ``last_cross_attention`` (cross); :meth:`attention_maps` runs one forward in eval mode and
    returns both. ``self_attention`` and ``cross_attention`` are attention factories (see
    :class:`EncoderLayer`; None = ``MultiHeadAttention``). Derived in
    ``05_transformer_decoder.ipynb``.
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
        *,
        self_attention: AttentionFactory | None = None,
        cross_attention: AttentionFactory | None = None,
    ) -> None:
        check_settings(dropout=dropout, d_model=d_model, num_heads=num_heads, norm_first=norm_first,
                       layer_norm_eps=layer_norm_eps, bias=bias, self_attention=self_attention,
                       cross_attention=cross_attention)
        super().__init__()
        self.d_model, self.num_heads, self.norm_first = d_model, num_heads, norm_first
        self.self_attn = make_attention(
            self_attention, d_model, num_heads, dropout, bias, "self_attention"
        )
        self.cross_attn = make_attention(
            cross_attention, d_model, num_heads, dropout, bias, "cross_attention"
        )
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
        self.last_attention = _detached(weights) if need_weights else None
        return self.dropout1(out)  # (batch, n_tgt, d_model)

    def _cross_attention(self, x, memory, mask, need_weights):
        # Queries from the decoder, keys and values from the encoder's output (the memory).
        out, weights = self.cross_attn(x, memory, memory, mask, need_weights=need_weights)
        self.last_cross_attention = _detached(weights) if need_weights else None
        return self.dropout2(out)  # (batch, n_tgt, d_model)

    #: ``check_inputs(x, memory, tgt_mask=None, memory_mask=None, need_weights=False)``: the
    #: door of ``forward``; a :class:`~lectures_lib.models.Decoder` checks its inputs with it too.
    check_inputs = rules.decoder_layer_inputs

    @validated("check_inputs")
    def forward(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
    ) -> torch.Tensor:
        x = sublayer_connection(
            x, lambda h: self._self_attention(h, tgt_mask, need_weights), self.norm1,
            self.norm_first,
        )
        x = sublayer_connection(
            x, lambda h: self._cross_attention(h, memory, memory_mask, need_weights),
            self.norm2, self.norm_first,
        )
        return sublayer_connection(
            x, lambda h: self.dropout3(self.feed_forward(h)), self.norm3, self.norm_first
        )

    @validated(rules.decoder_layer_cached_inputs)
    def forward_cached(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        cache: tuple[KeyValueCache, KeyValueCache],
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:meth:`forward` for the *new* positions ``x`` ``(batch, n_new, d_model)`` only.

        ``cache = (self_cache, cross_cache)``: the self-attention's keys and values of every
        earlier position (the new ones are appended), and the memory's projected keys and values
        (computed on the first call). ``tgt_mask`` broadcasts to ``(batch, heads, n_new,
        n_earlier + n_new)``. Equal to the last ``n_new`` rows of :meth:`forward` on the whole
        prefix. Called by :meth:`lectures_lib.models.Transformer.decode_step`; derived in
        ``05_transformer_decoder.ipynb``.
        """
        self_cache, cross_cache = cache

        def self_attention(h):  # the new queries against every cached key
            return self.dropout1(self.self_attn.forward_cached(h, h, h, self_cache, tgt_mask))

        def cross_attention(h):  # the memory's keys and values are projected once
            out = self.cross_attn.forward_cached(h, memory, memory, cross_cache, memory_mask,
                                                 static=True)
            return self.dropout2(out)

        x = sublayer_connection(x, self_attention, self.norm1, self.norm_first)
        x = sublayer_connection(x, cross_attention, self.norm2, self.norm_first)
        return sublayer_connection(
            x, lambda h: self.dropout3(self.feed_forward(h)), self.norm3, self.norm_first
        )

    @torch.no_grad()
    def attention_maps(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Run one forward in eval mode and return ``{"self": (batch, heads, n_tgt, n_tgt),
        "cross": (batch, heads, n_tgt, n_src)}``."""
        with eval_mode(self):
            self(x, memory, tgt_mask, memory_mask, need_weights=True)
        return {
            "self": _weights_of(self.last_attention),
            "cross": _weights_of(self.last_cross_attention),
        }

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
        return interop.decoder_layer_from_torch(cls, layer, MultiHeadAttention)
