"""The rules of :mod:`lectures_lib.models`: token ids, the stacks, the embedding, the tagger and
the Transformer's inputs, the decoder cache.
"""

from __future__ import annotations

from torch import nn

from .._mask_check import check_mask
from ..cache import DecoderCache
from .attention import sequence
from .embedding import token_ids
from .layers import decoder_layer_cached_inputs
from .settings import check_settings, settings, tensor


def stack_settings(layer: object, num_layers: object, final_norm: object, kind: type) -> None:
    check_settings(num_layers=num_layers, final_norm=final_norm)
    if isinstance(layer, nn.Module):
        if not isinstance(layer, kind):
            raise TypeError(f"expected a {kind.__name__} as template, got {type(layer).__name__}")
    elif not callable(layer):
        raise TypeError(
            f"layer must be a {kind.__name__} (template) or a callable returning one, "
            f"got {type(layer).__name__}"
        )


def distinct_layers(layers: list[object], kind: type) -> None:
    for each in layers:
        if not isinstance(each, kind):
            raise TypeError(
                f"the layer factory must return a {kind.__name__}, got {type(each).__name__}"
            )
    if len({id(each) for each in layers}) != len(layers):
        raise ValueError("the layer factory returned the same layer twice: layers would share")


def decoder_stack_cached_inputs(self: nn.Module, x: object, memory: object, caches: object,
                                tgt_mask: object = None, memory_mask: object = None) -> None:
    if not isinstance(caches, (list, tuple)) or len(caches) != len(self.layers):
        raise TypeError(
            f"caches must be a list of {len(self.layers)} (self_cache, cross_cache) pairs, one "
            f"per layer, got {type(caches).__name__}"
        )
    for layer, cache in zip(self.layers, caches, strict=True):
        decoder_layer_cached_inputs(layer, x, memory, cache, tgt_mask, memory_mask)


# make_src_mask(src, pad_id), make_tgt_mask(tgt, pad_id): ids (batch, n), an id or None
src_for_mask = settings("src", "pad_id", src=tensor(ndim=2, dtype="integer"))
tgt_for_mask = settings("tgt", "pad_id", tgt=tensor(ndim=2, dtype="integer"))


def tagger_inputs(self: nn.Module, tokens: object, mask: object = None,
                  need_weights: object = False) -> None:
    self.embed.check_inputs(tokens)
    if mask is not None:
        batch, seq = tokens.shape
        check_mask(mask, (batch, self.encoder.num_heads, seq, seq))
    check_settings(need_weights=need_weights)


def encode_inputs(self: nn.Module, src: object, src_mask: object = None,
                  need_weights: object = False) -> None:
    self.src_embed.check_inputs(src, "src")
    if src_mask is not None:
        batch, n_src = src.shape
        check_mask(src_mask, (batch, self.encoder.num_heads, n_src, n_src))
    check_settings(need_weights=need_weights)


def decode_inputs(self: nn.Module, tgt: object, memory: object, src_mask: object = None,
                  tgt_mask: object = None, memory_mask: object = None, need_weights: object = False,
                  *, src: object = None) -> None:
    self.tgt_embed.check_inputs(tgt, "tgt")
    sequence(memory, "memory", self.d_model)
    if memory.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"tgt {tuple(tgt.shape)} and memory {tuple(memory.shape)} have different batch sizes"
        )
    batch, n_tgt, n_src = tgt.shape[0], tgt.shape[1], memory.shape[1]
    num_heads = self.decoder.num_heads
    if src_mask is not None:
        check_mask(src_mask, (batch, num_heads, 1, n_src))
    if tgt_mask is not None:
        check_mask(tgt_mask, (batch, num_heads, n_tgt, n_tgt))
    if memory_mask is not None:
        check_mask(memory_mask, (batch, num_heads, n_tgt, n_src))
    check_settings(need_weights=need_weights)
    if src is None:
        return
    token_ids(src, "src", self.src_vocab_size)
    if tuple(src.shape) != tuple(memory.shape[:2]):
        raise ValueError(
            f"src {tuple(src.shape)} does not match memory {tuple(memory.shape)}: "
            "expected the same (batch, n_src)"
        )
    if src_mask is not None:
        raise ValueError("give the source padding as src_mask or as src, not both")


def decode_step_inputs(self: nn.Module, tgt: object, memory: object, cache: object,
                       src_mask: object = None, *, src: object = None) -> None:
    if not isinstance(cache, DecoderCache):
        raise TypeError(f"cache must come from init_cache(), got {type(cache).__name__}")
    decode_inputs(self, tgt, memory, src_mask, src=src)
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


def src_and_tgt(self: nn.Module, src: object, tgt: object) -> None:
    self.src_embed.check_inputs(src, "src")
    self.tgt_embed.check_inputs(tgt, "tgt")
    if src.shape[0] != tgt.shape[0]:
        raise ValueError(
            f"src {tuple(src.shape)} and tgt {tuple(tgt.shape)} have different batch sizes"
        )

