r"""Transformer models: stacks of layers, the mask builders, the encoder-only tagger and the
encoder-decoder Transformer (their token embedding is :mod:`lectures_lib.embedding`'s).

Derived in ``04_transformer_encoder.ipynb`` (``Encoder``, ``TokenEmbedding``, ``make_src_mask``,
``EncoderTagger``) and ``05_transformer_decoder.ipynb`` (``Decoder``, ``make_tgt_mask``,
``Transformer``). The layers these are built from are in :mod:`lectures_lib.layers`.

Every model takes its attention as a factory (``attention=`` for ``EncoderTagger``;
``encoder_attention=``, ``decoder_attention=``, ``cross_attention=`` for ``Transformer``), so
each variant of section 06 drops in without a change to the models::

    EncoderTagger(vocab_size, num_labels, attention=partial(LocalAttention, window=8))
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch
from torch import nn

from ._validate import layers as layers_rules
from ._validate import models as rules
from ._validate.settings import check_settings
from .cache import DecoderCache, KeyValueCache
from .embedding import TokenEmbedding
from .layers import AttentionFactory, DecoderLayer, EncoderLayer
from .masks import causal_mask
from .utils import eval_mode, validated

__all__ = [
    "Encoder",
    "Decoder",
    "TokenEmbedding",
    "EncoderTagger",
    "Transformer",
    "DecoderCache",
    "make_src_mask",
    "make_tgt_mask",
]


# ---------------------------------------------------------------------------------------------
# Stacks of layers
# ---------------------------------------------------------------------------------------------


def _independent_layers(layer: nn.Module | Callable[[], nn.Module], num_layers: int, kind: type):
    """``num_layers`` layers that share no parameter: fresh copies of a template, or a factory's."""
    if isinstance(layer, nn.Module):
        layers = [copy.deepcopy(layer) for _ in range(num_layers)]
        for each in layers:
            each.reset_parameters()  # identical structure, independent random weights
    else:
        layers = [layer() for _ in range(num_layers)]
        rules.distinct_layers(layers, kind)  # each a new `kind`
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

    ``forward(x, mask=None, need_weights=False)`` runs the layers in turn;
    :meth:`attention_maps` runs one forward in eval mode and returns every layer's weights
    ``(layers, batch, heads, n, n)``. Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        layer: EncoderLayer | Callable[[], EncoderLayer],
        num_layers: int,
        final_norm: bool | None = None,
    ) -> None:
        rules.stack_settings(layer, num_layers, final_norm, EncoderLayer)
        super().__init__()
        self.layers = _independent_layers(layer, num_layers, EncoderLayer)
        self.norm = _final_norm(self.layers, final_norm)
        self.d_model, self.num_heads = self.layers[0].d_model, self.layers[0].num_heads

    @validated(layers_rules.encoder_layer_inputs)  # a stack takes what its layers take
    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x, mask, need_weights=need_weights)  # (batch, seq, d_model)
        return self.norm(x) if self.norm is not None else x

    @torch.no_grad()
    def attention_maps(self, x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Run one forward in eval mode; every layer's self-attention weights ``(layers, batch,
        heads, n, n)``."""
        with eval_mode(self):
            self(x, mask, need_weights=True)
        return _stack_maps([layer.last_attention for layer in self.layers])


class Decoder(nn.Module):
    """A stack of ``num_layers`` decoder layers sharing no parameters (see :class:`Encoder`).

    ``forward(x, memory, tgt_mask=None, memory_mask=None, need_weights=False)``;
    :meth:`attention_maps` runs one forward in eval mode. Derived in
    ``05_transformer_decoder.ipynb``.
    """

    def __init__(
        self,
        layer: DecoderLayer | Callable[[], DecoderLayer],
        num_layers: int,
        final_norm: bool | None = None,
    ) -> None:
        rules.stack_settings(layer, num_layers, final_norm, DecoderLayer)
        super().__init__()
        self.layers = _independent_layers(layer, num_layers, DecoderLayer)
        self.norm = _final_norm(self.layers, final_norm)
        self.d_model, self.num_heads = self.layers[0].d_model, self.layers[0].num_heads

    @validated(layers_rules.decoder_layer_inputs)  # a stack takes what its layers take
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

    @validated(rules.decoder_stack_cached_inputs)
    def forward_cached(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        caches: list[tuple[KeyValueCache, KeyValueCache]],
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """:meth:`forward` for the new positions only, layer ``i`` using ``caches[i]`` (see
        :meth:`~lectures_lib.layers.DecoderLayer.forward_cached`)."""
        for layer, cache in zip(self.layers, caches, strict=True):
            x = layer.forward_cached(x, memory, cache, tgt_mask, memory_mask)
        return self.norm(x) if self.norm is not None else x

    @torch.no_grad()
    def attention_maps(
        self,
        x: torch.Tensor,
        memory: torch.Tensor,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
    ) -> dict[str, torch.Tensor]:
        """Run one forward in eval mode: ``{"self": (layers, batch, heads, n_tgt, n_tgt),
        "cross": (layers, batch, heads, n_tgt, n_src)}``."""
        with eval_mode(self):
            self(x, memory, tgt_mask, memory_mask, need_weights=True)
        return {
            "self": _stack_maps([layer.last_attention for layer in self.layers]),
            "cross": _stack_maps([layer.last_cross_attention for layer in self.layers]),
        }


def _stack_maps(maps: list[torch.Tensor | None]) -> torch.Tensor:
    for weights in maps:
        layers_rules.weights_present(weights, stacked=True)
    return torch.stack(maps)  # (layers, batch, heads, n_q, n_k)


# ---------------------------------------------------------------------------------------------
# Masks from token ids
# ---------------------------------------------------------------------------------------------


@validated(rules.src_for_mask)
def make_src_mask(src: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    """Key-padding mask ``(batch, 1, 1, n_src)``: True where the source token is not padding.

    Broadcasts over heads and queries; ``pad_id=None`` means no padding (all True).
    Derived in ``04_transformer_encoder.ipynb``.
    """
    if pad_id is None:
        keep = torch.ones_like(src, dtype=torch.bool)
    else:
        keep = src != pad_id  # (batch, n_src)
    return keep[:, None, None, :]  # (batch, 1, 1, n_src)


@validated(rules.tgt_for_mask)
def make_tgt_mask(tgt: torch.Tensor, pad_id: int | None) -> torch.Tensor:
    """Decoder self-attention mask ``(batch, 1, n_tgt, n_tgt)``: causal AND key not padding.

    Position i may attend to position j when j <= i and token j is not padding.
    Derived in ``05_transformer_decoder.ipynb``.
    """
    n_tgt = tgt.shape[1]
    causal = causal_mask(n_tgt, device=tgt.device)  # (n_tgt, n_tgt)
    keys = make_src_mask(tgt, pad_id)  # (batch, 1, 1, n_tgt)
    return causal[None, None] & keys  # (batch, 1, n_tgt, n_tgt)


# ---------------------------------------------------------------------------------------------
# Whole models (the token embedding is in lectures_lib/embedding.py)
# ---------------------------------------------------------------------------------------------


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
    ``attention`` is the self-attention factory of every layer (see
    :class:`~lectures_lib.layers.EncoderLayer`; None = ``MultiHeadAttention``), e.g.
    ``EncoderTagger(vocab, labels, attention=partial(LocalAttention, window=8))``;
    ``positional_encoding=False`` leaves out the sinusoidal table (for an attention with its own
    positions: ``attention=RotaryAttention``).
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
        *,
        attention: AttentionFactory | None = None,
        positional_encoding: bool = True,
    ) -> None:
        check_settings(num_labels=num_labels)
        super().__init__()
        self.num_labels = num_labels
        self.pad_id = pad_id
        self.embed = TokenEmbedding(
            vocab_size, d_model, max_len, dropout, pad_id, positional_encoding=positional_encoding
        )
        self.encoder = Encoder(
            lambda: EncoderLayer(
                d_model, num_heads, d_ff, dropout, activation, norm_first, attention=attention
            ),
            num_layers,
        )
        self.output = nn.Linear(d_model, num_labels)
        _xavier_init(self.encoder, self.output)

    @validated(rules.tagger_inputs)
    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        if mask is None:
            mask = make_src_mask(tokens, self.pad_id)  # (batch, 1, 1, seq)
        hidden = self.encoder(self.embed(tokens), mask, need_weights=need_weights)
        return self.output(hidden)  # (batch, seq, num_labels)

    @torch.no_grad()
    def attention_maps(self, tokens: torch.Tensor, mask: torch.Tensor | None = None):
        """Run one forward in eval mode; every layer's self-attention weights ``(layers, batch,
        heads, seq, seq)``."""
        with eval_mode(self):
            self(tokens, mask, need_weights=True)
        return _stack_maps([layer.last_attention for layer in self.encoder.layers])


class Transformer(nn.Module):
    r"""The encoder-decoder Transformer of Vaswani et al. (2017) for sequence-to-sequence tasks.

    ``src`` ids -> :class:`TokenEmbedding` -> :class:`Encoder` -> ``memory``;
    ``tgt`` ids -> :class:`TokenEmbedding` -> :class:`Decoder` (masked self-attention, cross
    attention to ``memory``) -> linear map to ``tgt_vocab_size`` logits (softmax in the loss).

    ``norm_first=False`` is the paper's Post-LN, ``True`` the Pre-LN order (with a final
    LayerNorm after each stack). ``encoder_attention``, ``decoder_attention`` (the decoder's
    masked self-attention) and ``cross_attention`` are attention factories (see
    :class:`~lectures_lib.layers.EncoderLayer`; None = ``MultiHeadAttention``);
    ``positional_encoding=False`` leaves out the sinusoidal tables (for attentions that bring
    their own positions: ``encoder_attention=RotaryAttention, decoder_attention=RotaryAttention``).
    Weight matrices are Xavier-initialised, as in ``nn.Transformer``. ``pad_id`` marks padding
    in both vocabularies (None: no padding).

    * ``encode(src, src_mask=None) -> memory`` ``(batch, n_src, d_model)``;
    * ``decode(tgt, memory, src_mask=None, tgt_mask=None, memory_mask=None) -> logits``, where
      ``src_mask`` is the source padding mask ``make_src_mask(src, pad_id)`` that the caller of
      ``encode`` builds once (as in the Annotated Transformer's ``decode(memory, src_mask, tgt,
      tgt_mask)``);
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
        *,
        encoder_attention: AttentionFactory | None = None,
        decoder_attention: AttentionFactory | None = None,
        cross_attention: AttentionFactory | None = None,
        positional_encoding: bool = True,
    ) -> None:
        check_settings(src_vocab_size=src_vocab_size, tgt_vocab_size=tgt_vocab_size,
                       positional_encoding=positional_encoding)
        super().__init__()
        self.pad_id, self.d_model = pad_id, d_model
        self.src_vocab_size, self.tgt_vocab_size = src_vocab_size, tgt_vocab_size
        embedding = (d_model, max_len, dropout, pad_id)
        self.src_embed = TokenEmbedding(src_vocab_size, *embedding,
                                        positional_encoding=positional_encoding)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, *embedding,
                                        positional_encoding=positional_encoding)
        settings = (d_model, num_heads, d_ff, dropout, activation, norm_first)
        self.encoder = Encoder(
            lambda: EncoderLayer(*settings, attention=encoder_attention), num_encoder_layers
        )
        self.decoder = Decoder(
            lambda: DecoderLayer(
                *settings, self_attention=decoder_attention, cross_attention=cross_attention
            ),
            num_decoder_layers,
        )
        self.output = nn.Linear(d_model, tgt_vocab_size)  # to one logit per vocabulary entry
        _xavier_init(self.encoder, self.decoder, self.output)

    @validated(rules.encode_inputs)
    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        """``src`` ``(batch, n_src)`` ids -> memory ``(batch, n_src, d_model)``."""
        if src_mask is None:
            src_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src)
        return self.encoder(self.src_embed(src), src_mask, need_weights=need_weights)

    @validated(rules.decode_inputs)
    def decode(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        src_mask: torch.Tensor | None = None,
        tgt_mask: torch.Tensor | None = None,
        memory_mask: torch.Tensor | None = None,
        need_weights: bool = False,
        *,
        src: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``tgt`` ``(batch, n_tgt)`` ids and memory -> logits ``(batch, n_tgt, tgt_vocab)``.

        ``src_mask``: the source padding mask ``(batch, 1, 1, n_src)`` built once by the caller
        of :meth:`encode` (``make_src_mask(src, pad_id)``); the cross-attention masks with it
        (AND ``memory_mask`` when both are given). ``src=`` (the raw source ids) is the older
        spelling: the mask is then built from it. Default ``tgt_mask``: causal AND target key
        not padding (:func:`make_tgt_mask`); no source mask at all: every memory position is a
        key.
        """
        if src is not None:
            src_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src)
        if tgt_mask is None:
            tgt_mask = make_tgt_mask(tgt, self.pad_id)  # (batch, 1, n_tgt, n_tgt)
        memory_mask = _and(memory_mask, src_mask)  # (batch, 1 or heads, n_tgt or 1, n_src)
        hidden = self.decoder(
            self.tgt_embed(tgt), memory, tgt_mask, memory_mask, need_weights=need_weights
        )
        return self.output(hidden)  # (batch, n_tgt, tgt_vocab_size)

    def init_cache(self) -> DecoderCache:
        """An empty :class:`DecoderCache` for :meth:`decode_step` (one per decoding run).

        Raises a ``TypeError`` naming the layer when a decoder attention cannot be cached
        exactly (see :func:`~lectures_lib.cache.kv_cache_problem`): decode such a model with
        ``use_cache=False``.
        """
        layers_rules.cacheable_decoder(self.decoder.layers)
        return DecoderCache([(KeyValueCache(), KeyValueCache()) for _ in self.decoder.layers])

    @validated(rules.decode_step_inputs)
    def decode_step(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        cache: DecoderCache,
        src_mask: torch.Tensor | None = None,
        *,
        src: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Incremental decoding: logits ``(batch, n_new, tgt_vocab)`` for the *new* target tokens
        ``tgt`` ``(batch, n_new)``, which follow the ``len(cache)`` tokens already fed.

        Equal to ``decode(prefix + tgt, memory, src_mask)[:, -n_new:]`` (default masks: causal,
        target padding, and the source padding mask ``src_mask`` when given), but each layer
        projects only the new tokens and attends to the cached keys and values of the earlier
        ones: step ``t`` costs O(t), not O(t^2). ``cache`` comes from :meth:`init_cache` and is
        updated in place. Derived in ``05_transformer_decoder.ipynb``.
        """
        if src is not None:
            src_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src)
        offset, n_new = len(cache), tgt.shape[1]
        kept = torch.ones_like(tgt, dtype=torch.bool) if self.pad_id is None else tgt != self.pad_id
        cache.extend_keys(kept)  # (batch, n_new): which new tokens are keys (not padding)
        # new query i sits at position offset + i: it may attend to keys j <= offset + i
        causal = causal_mask(offset + n_new, device=tgt.device)[offset:]  # (n_new, t)
        tgt_mask = causal[None, None] & cache.keys_kept[:, None, None, :]  # (b, 1, n_new, t)
        hidden = self.decoder.forward_cached(
            self.tgt_embed(tgt, offset), memory, cache.layers, tgt_mask, src_mask
        )
        return self.output(hidden)  # (batch, n_new, tgt_vocab_size)

    @validated(rules.src_and_tgt)
    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits for every target position at once."""
        src_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src): built once
        memory = self.encode(src, src_mask)
        return self.decode(tgt, memory, src_mask)

    @torch.no_grad()
    def attention_maps(self, src: torch.Tensor, tgt: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every layer's and head's attention weights, computed in eval mode:
        ``{"encoder": (layers, batch, heads, n_src, n_src), "decoder_self": (layers, batch,
        heads, n_tgt, n_tgt), "decoder_cross": (layers, batch, heads, n_tgt, n_src)}``."""
        with eval_mode(self):
            memory = self.encode(src, need_weights=True)
            self.decode(tgt, memory, src=src, need_weights=True)
        layers = self.decoder.layers
        return {
            "encoder": _stack_maps([layer.last_attention for layer in self.encoder.layers]),
            "decoder_self": _stack_maps([layer.last_attention for layer in layers]),
            "decoder_cross": _stack_maps([layer.last_cross_attention for layer in layers]),
        }


def _and(mask: torch.Tensor | None, other: torch.Tensor | None) -> torch.Tensor | None:
    """Both masks (True = may attend), or whichever is given."""
    if mask is None or other is None:
        return other if mask is None else mask
    return mask & other
