r"""Transformer models: stacks of layers, token embeddings, the mask builders, the encoder-only
tagger and the encoder-decoder Transformer.

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
import math
from collections.abc import Callable

import torch
from torch import nn

from .attention import KeyValueCache, kv_cache_problem
from .layers import AttentionFactory, DecoderLayer, EncoderLayer, check_sequence
from .masks import causal_mask, check_mask
from .positional import SinusoidalEncoding
from .utils import (
    at_boundary,
    check_bool,
    check_non_negative_int,
    check_positive_int,
    check_probability,
    check_tensor,
    eval_mode,
    inside_library,
)

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


def check_token_ids(tokens: object, name: str, vocab_size: int) -> torch.Tensor:
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
    if final_norm is not None:
        check_bool(final_norm, "final_norm")
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
        super().__init__()
        self.layers = _independent_layers(layer, num_layers, EncoderLayer)
        self.norm = _final_norm(self.layers, final_norm)
        self.d_model = self.layers[0].d_model

    def forward(
        self, x: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        if at_boundary():
            self.layers[0].check_inputs(x, mask, need_weights)
        with inside_library():
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
        if at_boundary():
            self.layers[0].check_inputs(x, memory, tgt_mask, memory_mask, need_weights)
        with inside_library():
            for layer in self.layers:
                x = layer(x, memory, tgt_mask, memory_mask, need_weights=need_weights)
        return self.norm(x) if self.norm is not None else x

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
        with inside_library():
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
    if any(m is None for m in maps):
        raise RuntimeError(
            "no attention weights: an attention variant that never builds the N x N matrix "
            "returns None as weights and cannot draw an attention map"
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
    if pad_id is not None:
        check_non_negative_int(pad_id, "pad_id")
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
    keys = make_src_mask(tgt, pad_id)  # (batch, 1, 1, n_tgt): checks pad_id
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
    (its row starts at zero and gets no gradient; None for no padding token),
    ``positional_encoding`` (add the sinusoidal table; ``False`` when the attention brings its own
    positions, e.g. :class:`~lectures_lib.positional.RotarySelfAttention`).
    Derived in ``04_transformer_encoder.ipynb``.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        max_len: int = 256,
        dropout: float = 0.0,
        pad_id: int | None = 0,
        *,
        positional_encoding: bool = True,
    ) -> None:
        super().__init__()
        self.vocab_size = check_positive_int(vocab_size, "vocab_size")
        self.d_model = check_positive_int(d_model, "d_model")
        self.max_len = check_positive_int(max_len, "max_len")
        if pad_id is not None:
            check_non_negative_int(pad_id, "pad_id")
            if pad_id >= vocab_size:
                raise ValueError(f"pad_id={pad_id} is not an id of a vocabulary of {vocab_size}")
        self.pad_id = pad_id
        self.embedding = nn.Embedding(vocab_size, d_model, padding_idx=pad_id)
        positional_encoding = check_bool(positional_encoding, "positional_encoding")
        self.positional = SinusoidalEncoding(d_model, max_len) if positional_encoding else None
        self.dropout = nn.Dropout(check_probability(dropout, "dropout"))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        nn.init.normal_(self.embedding.weight, std=self.d_model**-0.5)
        if self.pad_id is not None:
            with torch.no_grad():
                self.embedding.weight[self.pad_id].zero_()

    def check_inputs(self, tokens: torch.Tensor, name: str = "tokens") -> None:
        """``tokens``: integer ids ``(batch, seq)`` in the vocabulary, at most ``max_len`` long."""
        check_token_ids(tokens, name, self.vocab_size)
        if tokens.shape[1] > self.max_len:
            raise ValueError(
                f"{name} has {tokens.shape[1]} positions (shape {tuple(tokens.shape)}), more "
                f"than max_len={self.max_len} of the positional encoding"
            )

    def forward(self, tokens: torch.Tensor, offset: int = 0) -> torch.Tensor:
        """``tokens`` ``(batch, seq)`` int64 ids -> ``(batch, seq, d_model)``.

        ``offset``: the position of the first token (incremental decoding feeds token ``t``
        alone, at position ``t``).
        """
        if at_boundary():
            self.check_inputs(tokens)
            check_non_negative_int(offset, "offset")
            if offset + tokens.shape[1] > self.max_len:
                raise ValueError(
                    f"positions {offset} ... {offset + tokens.shape[1] - 1} exceed max_len="
                    f"{self.max_len} of the positional encoding"
                )
        vectors = self.embedding(tokens) * math.sqrt(self.d_model)  # (batch, seq, d_model)
        if self.positional is not None:  # + PE[offset : offset + seq]
            table = self.positional.table[offset : offset + tokens.shape[1]]  # (seq, d_model)
            vectors = vectors + table.to(vectors.dtype)
        return self.dropout(vectors)


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
    positions: ``attention=RotarySelfAttention``).
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
        super().__init__()
        self.num_labels = check_positive_int(num_labels, "num_labels")
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

    def forward(
        self, tokens: torch.Tensor, mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        if at_boundary():
            self.embed.check_inputs(tokens)
            if mask is not None:
                batch, seq = tokens.shape
                check_mask(mask, (batch, self.encoder.layers[0].num_heads, seq, seq))
            check_bool(need_weights, "need_weights")
        with inside_library():
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
    :class:`~lectures_lib.layers.EncoderLayer`; None = ``MultiHeadAttention``). Weight matrices are Xavier-initialised, as in ``nn.Transformer``.
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
        *,
        encoder_attention: AttentionFactory | None = None,
        decoder_attention: AttentionFactory | None = None,
        cross_attention: AttentionFactory | None = None,
    ) -> None:
        super().__init__()
        self.pad_id = pad_id
        self.d_model = d_model
        self.src_vocab_size = check_positive_int(src_vocab_size, "src_vocab_size")
        self.tgt_vocab_size = check_positive_int(tgt_vocab_size, "tgt_vocab_size")
        self.src_embed = TokenEmbedding(src_vocab_size, d_model, max_len, dropout, pad_id)
        self.tgt_embed = TokenEmbedding(tgt_vocab_size, d_model, max_len, dropout, pad_id)
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

    def encode(
        self, src: torch.Tensor, src_mask: torch.Tensor | None = None, need_weights: bool = False
    ) -> torch.Tensor:
        """``src`` ``(batch, n_src)`` ids -> memory ``(batch, n_src, d_model)``."""
        if at_boundary():
            self.src_embed.check_inputs(src, "src")
            if src_mask is not None:
                batch, n_src = src.shape
                check_mask(src_mask, (batch, self.encoder.layers[0].num_heads, n_src, n_src))
            check_bool(need_weights, "need_weights")
        with inside_library():
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
        if at_boundary():
            self._check_decode_inputs(tgt, memory, src, tgt_mask, memory_mask, need_weights)
        with inside_library():
            if tgt_mask is None:
                tgt_mask = make_tgt_mask(tgt, self.pad_id)  # (batch, 1, n_tgt, n_tgt)
            if memory_mask is None and src is not None:
                memory_mask = make_src_mask(src, self.pad_id)  # (batch, 1, 1, n_src)
            hidden = self.decoder(
                self.tgt_embed(tgt), memory, tgt_mask, memory_mask, need_weights=need_weights
            )
            return self.output(hidden)  # (batch, n_tgt, tgt_vocab_size)

    def init_cache(self) -> DecoderCache:
        """An empty :class:`DecoderCache` for :meth:`decode_step` (one per decoding run).

        Raises a ``TypeError`` naming the layer when a decoder attention cannot be cached
        exactly (see :func:`~lectures_lib.attention.kv_cache_problem`): decode such a model with
        ``use_cache=False``.
        """
        for index, layer in enumerate(self.decoder.layers):
            for name in ("self_attn", "cross_attn"):
                problem = kv_cache_problem(getattr(layer, name))
                if problem:
                    raise TypeError(f"decoder layer {index} {name}: {problem}")
        return DecoderCache([(KeyValueCache(), KeyValueCache()) for _ in self.decoder.layers])

    def decode_step(
        self,
        tgt: torch.Tensor,
        memory: torch.Tensor,
        cache: DecoderCache,
        src: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Incremental decoding: logits ``(batch, n_new, tgt_vocab)`` for the *new* target tokens
        ``tgt`` ``(batch, n_new)``, which follow the ``len(cache)`` tokens already fed.

        Equal to ``decode(prefix + tgt, memory, src=src)[:, -n_new:]`` (default masks: causal,
        target padding, source padding when ``src`` is given), but each layer projects only the
        new tokens and attends to the cached keys and values of the earlier ones: step ``t``
        costs O(t), not O(t^2). ``cache`` comes from :meth:`init_cache` and is updated in place.
        Derived in ``05_transformer_decoder.ipynb``.
        """
        if at_boundary():
            if not isinstance(cache, DecoderCache):
                raise TypeError(f"cache must come from init_cache(), got {type(cache).__name__}")
            self._check_decode_inputs(tgt, memory, src, None, None, False)
            if len(cache) and cache.batch_size != tgt.shape[0]:
                raise ValueError(
                    f"tgt has batch size {tgt.shape[0]}, but the cache holds {cache.batch_size} rows"
                )
        offset, n_new = len(cache), tgt.shape[1]
        with inside_library():
            kept = torch.ones_like(tgt, dtype=torch.bool) if self.pad_id is None else tgt != self.pad_id
            cache.extend_keys(kept)  # (batch, n_new): which new tokens are keys (not padding)
            # new query i sits at position offset + i: it may attend to keys j <= offset + i
            causal = causal_mask(offset + n_new, device=tgt.device)[offset:]  # (n_new, t)
            tgt_mask = causal[None, None] & cache.keys_kept[:, None, None, :]  # (b, 1, n_new, t)
            memory_mask = make_src_mask(src, self.pad_id) if src is not None else None
            hidden = self.decoder.forward_cached(
                self.tgt_embed(tgt, offset), memory, cache.layers, tgt_mask, memory_mask
            )
            return self.output(hidden)  # (batch, n_new, tgt_vocab_size)

    def _check_decode_inputs(self, tgt, memory, src, tgt_mask, memory_mask, need_weights) -> None:
        self.tgt_embed.check_inputs(tgt, "tgt")
        check_sequence(memory, "memory", self.d_model)
        if memory.shape[0] != tgt.shape[0]:
            raise ValueError(
                f"tgt {tuple(tgt.shape)} and memory {tuple(memory.shape)} have different batch sizes"
            )
        if src is not None:
            check_token_ids(src, "src", self.src_vocab_size)
            if tuple(src.shape) != tuple(memory.shape[:2]):
                raise ValueError(
                    f"src {tuple(src.shape)} does not match memory {tuple(memory.shape)}: "
                    "expected the same (batch, n_src)"
                )
        batch, n_tgt, n_src = tgt.shape[0], tgt.shape[1], memory.shape[1]
        num_heads = self.decoder.layers[0].num_heads
        if tgt_mask is not None:
            check_mask(tgt_mask, (batch, num_heads, n_tgt, n_tgt))
        if memory_mask is not None:
            check_mask(memory_mask, (batch, num_heads, n_tgt, n_src))
        check_bool(need_weights, "need_weights")

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        """Teacher forcing: logits for every target position at once."""
        if at_boundary():
            self.src_embed.check_inputs(src, "src")
            self.tgt_embed.check_inputs(tgt, "tgt")
            if src.shape[0] != tgt.shape[0]:
                raise ValueError(
                    f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)} have different batch sizes"
                )
        with inside_library():
            memory = self.encode(src)
            return self.decode(tgt, memory, src=src)

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


class DecoderCache:
    """Everything :meth:`Transformer.decode_step` keeps between steps: per decoder layer the
    self-attention's and the cross-attention's :class:`~lectures_lib.attention.KeyValueCache`,
    and which target tokens fed so far are real (not padding) keys.

    ``len(cache)``: the number of target tokens fed; :meth:`reorder` keeps batch rows (beam
    search). Derived in ``05_transformer_decoder.ipynb``.
    """

    def __init__(self, layers: list[tuple[KeyValueCache, KeyValueCache]]) -> None:
        self.layers = layers
        self.keys_kept: torch.Tensor | None = None  # (batch, t) bool: True = not padding

    def __len__(self) -> int:
        return 0 if self.keys_kept is None else self.keys_kept.shape[1]

    @property
    def batch_size(self) -> int | None:
        return None if self.keys_kept is None else self.keys_kept.shape[0]

    def extend_keys(self, kept: torch.Tensor) -> None:
        """Record the new tokens ``(batch, n_new)``: True where a token may be attended to."""
        kept = kept.to(torch.bool)
        self.keys_kept = kept if self.keys_kept is None else torch.cat([self.keys_kept, kept], 1)

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep batch rows ``rows`` (1-D indices, repeats allowed) of every cache."""
        if self.keys_kept is not None:
            self.keys_kept = self.keys_kept.index_select(0, rows)
        for self_cache, cross_cache in self.layers:
            self_cache.reorder(rows)
            cross_cache.reorder(rows)
