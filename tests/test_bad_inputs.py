"""The course's bad-input table: for every public function and class, the invalid inputs it must
refuse, the error type and a phrase its message must contain.

The error policy (README, "Errors"): every public entry point checks what it is given (types: a
bool is not an int and an int is not a bool; ranges: sizes >= 1, finite epsilons, scales and
bases, probabilities in [0, 1), ids inside the vocabulary; shapes and dtypes of tensors; masks
that could be read two ways) and raises a ``TypeError`` (wrong kind of thing) or a ``ValueError``
(right kind, wrong value) whose message names the argument, what was expected and what was
given. Never a bare error from inside Python or PyTorch: every row also checks that the error
was raised by the library's own code.

Completeness: :func:`test_every_public_name_has_a_row` walks every module of ``lectures_lib``
and fails for a name in a module's ``__all__`` that has no row here and is not listed in
``NO_ROW`` with the reason. A new public function cannot be added without its row.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from torch import nn

import course_tools
import lectures_lib
from course_tools import grading
from course_tools.grading.sandbox import kernel as sandbox_kernel
from course_tools.publish import exercises
from lectures_lib import (
    attention,
    course,
    decoding,
    diagrams,
    languages,
    layers,
    masks,
    measure,
    models,
    plotting,
    positional,
    training,
    utils,
)
from lectures_lib.data import (
    binding,
    labelling,
    listops,
    long_range,
    ordering,
    relations,
    sequences,
    translation,
)
from lectures_lib.variants import (
    VARIANTS,
    attention_free,
    base,
    chunked,
    clustering,
    efficient,
    linear,
    local,
    low_rank,
    patterns,
    sparse,
    synthesizer,
)

# (the package re-exports the function sinkhorn under the module's name: ask for the module)
sinkhorn = importlib.import_module("lectures_lib.variants.sinkhorn")
matplotlib.use("Agg")
LIBRARY = Path(lectures_lib.__file__).resolve().parent
TOOLS = Path(course_tools.__file__).resolve().parent


@dataclass(frozen=True)
class Row:
    """One invalid input: ``call()`` must raise ``error`` with ``phrase`` in its message."""

    api: object  # the public function or class (its methods and forward count as the class)
    case: str
    call: Callable[[], object]
    error: type[Exception]
    phrase: str

    @property
    def id(self) -> str:
        return f"{getattr(self.api, '__qualname__', self.api)}: {self.case}"


# ---- small valid ingredients, built fresh for every call ---------------------------------------


def floats(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype)


def ids(*shape: int, high: int = 5) -> torch.Tensor:
    return torch.randint(1, high, shape, generator=torch.Generator().manual_seed(0))


def bools(*shape: int) -> torch.Tensor:
    return torch.ones(*shape, dtype=torch.bool)


def qkv(batch=2, n=4, d=6, dtype=torch.float32):
    return floats(batch, n, d, dtype=dtype), floats(batch, n, d, dtype=dtype), floats(batch, n, d, dtype=dtype)


def variant(cls):
    """A small module of the variant ``cls`` (its required options filled in)."""
    needs_len = {"seq_len": 8} if "seq_len" in inspect.signature(cls).parameters else {}
    return cls(8, 2, **needs_len)


def mha():
    return attention.MultiHeadAttention(8, 2)


def encoder_layer(**kwargs):
    return layers.EncoderLayer(8, 2, 16, **kwargs)


def decoder_layer(**kwargs):
    return layers.DecoderLayer(8, 2, 16, **kwargs)


def notebook():
    import nbformat

    return nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])


def tagger():
    return models.EncoderTagger(6, 3, d_model=8, num_heads=2, num_layers=1, d_ff=16)


def seq2seq():
    return models.Transformer(6, 7, d_model=8, num_heads=2, num_encoder_layers=1,
                              num_decoder_layers=1, d_ff=16)


def history(epochs: int = 1) -> training.History:
    run = training.History()
    for _ in range(epochs):
        run.loss.append(1.0)
        run.train_accuracy.append(0.5)
    return run


NAN, INF = float("nan"), float("inf")

def adamw():
    return torch.optim.AdamW(torch.nn.Linear(2, 2).parameters(), lr=1e-3)


def _reused_cache():
    """A cache filled by a batch of 2, then fed a batch of 1."""
    module, cache = mha(), attention.KeyValueCache()
    module.forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), cache)
    return module.forward_cached(floats(1, 1, 8), floats(1, 1, 8), floats(1, 1, 8), cache)


R = Row

# ---- the table ---------------------------------------------------------------------------------

_REPORT = {"submission": "s.ipynb", "notebook": "01_self_attention.ipynb", "score": 4.0,
           "max_score": 4.0, "manual_max_score": 0.0, "error": "", "exercises": []}

ROWS: list[Row] = [
    # utils
    # issue 18, core: the newer APIs refuse what they cannot use (forward_cached, key padding,
    # positions, factories, schedules, flags, pictures)
    R(attention.MultiHeadAttention, "forward_cached: float 0/1 mask", lambda: mha().forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache(), torch.ones(1, 1)), TypeError, "mask must have dtype torch.bool"),
    R(attention.MultiHeadAttention, "forward_cached: int mask", lambda: mha().forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache(), torch.ones(1, 1, dtype=torch.long)), TypeError, "mask must have dtype torch.bool"),
    R(attention.MultiHeadAttention, "forward_cached: static='False'", lambda: mha().forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache(), static="False"), TypeError, "static must be a bool"),
    R(attention.MultiHeadAttention, "forward_cached: static=2", lambda: mha().forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache(), static=2), TypeError, "static must be a bool"),
    R(attention.MultiHeadAttention, "forward_cached: 2-D query", lambda: mha().forward_cached(floats(2, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache()), ValueError, "query must have 3 dimensions"),
    R(attention.MultiHeadAttention, "forward_cached: query width 7", lambda: mha().forward_cached(floats(2, 1, 7), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache()), ValueError, "query must have shape (batch, seq, 8)"),
    R(attention.MultiHeadAttention, "forward_cached: int query", lambda: mha().forward_cached(ids(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache()), TypeError, "query must have dtype floating"),
    R(attention.MultiHeadAttention, "forward_cached: a list as query", lambda: mha().forward_cached([[0.0] * 8], floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache()), TypeError, "query must be a torch.Tensor"),
    R(attention.MultiHeadAttention, "forward_cached: mask of the wrong n_k", lambda: mha().forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), attention.KeyValueCache(), bools(1, 5)), ValueError, "does not fit attention scores of shape (2, 2, 1, 1)"),
    R(attention.MultiHeadAttention, "forward_cached: a cache of another batch size", lambda: _reused_cache(), ValueError, "the cache holds 2 rows"),
    R(attention.MultiHeadAttention, "forward_cached: not a cache", lambda: mha().forward_cached(floats(2, 1, 8), floats(2, 1, 8), floats(2, 1, 8), {}), TypeError, "cache must be a KeyValueCache"),
    R(attention.MultiHeadAttention, "float64 input to a float32 module", lambda: mha()(floats(2, 3, 8, dtype=torch.float64), floats(2, 3, 8, dtype=torch.float64), floats(2, 3, 8, dtype=torch.float64)), TypeError, "must have the module's dtype torch.float32"),
    R(attention.MultiHeadAttention, "key_padding_mask (n_q, n_k)-shaped", lambda: mha()(floats(2, 3, 8), floats(2, 5, 8), floats(2, 5, 8), key_padding_mask=bools(3, 5)), ValueError, "key_padding_mask must have shape (batch, n_keys) = (2, 5)"),
    R(attention.MultiHeadAttention, "key_padding_mask of floats", lambda: mha()(floats(2, 3, 8), floats(2, 5, 8), floats(2, 5, 8), key_padding_mask=torch.ones(2, 5)), TypeError, "key_padding_mask must have dtype bool"),
    R(attention.MultiHeadAttention, "positions of another length", lambda: mha()(floats(2, 3, 8), floats(2, 3, 8), floats(2, 3, 8), positions=torch.arange(4)), ValueError, "positions must have shape (seq,) or (batch, seq)"),
    R(positional.RotaryAttention, "a cached cross-attention", lambda: positional.RotaryAttention(8, 2).forward_cached(floats(2, 1, 8), floats(2, 3, 8), floats(2, 3, 8), attention.KeyValueCache(), static=True), ValueError, "is self-attention: it cannot attend to a static memory"),
    R(positional.RotaryAttention, "as the cached cross-attention of a Transformer", lambda: models.Transformer(6, 7, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16, cross_attention=positional.RotaryAttention).init_cache(), TypeError, "decoder layer 0 cross_attn: RotaryAttention is self-attention"),
    R(layers.EncoderLayer, "factory returning a Linear", lambda: encoder_layer(attention=lambda d, h, p: nn.Linear(d, d)), TypeError, "must return an attention module whose forward is"),
    R(models.EncoderTagger, "factory returning a Linear", lambda: models.EncoderTagger(6, 3, d_model=8, num_heads=2, num_layers=1, d_ff=16, attention=lambda d, h, p: nn.Linear(d, d)), TypeError, "must return an attention module whose forward is"),
    R(models.Transformer, "encoder factory returning a Linear", lambda: models.Transformer(6, 7, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16, encoder_attention=lambda d, h, p: nn.Linear(d, d)), TypeError, "must return an attention module whose forward is"),
    R(layers.EncoderLayer, "bias=False with a factory that takes no bias", lambda: encoder_layer(bias=False, attention=lambda d, h, p: attention.MultiHeadAttention(d, h, p)), TypeError, "bias=False cannot reach the attention factory"),
    R(models.Transformer, "positional_encoding 'no'", lambda: models.Transformer(6, 7, positional_encoding="no"), TypeError, "positional_encoding must be a bool"),
    R(models.Transformer, "decode with src_mask and src", lambda: seq2seq().decode(ids(2, 3), floats(2, 4, 8), bools(2, 1, 1, 4), src=ids(2, 4)), ValueError, "not both"),
    R(models.Transformer, "decode with a float src_mask", lambda: seq2seq().decode(ids(2, 3), floats(2, 4, 8), torch.ones(2, 1, 1, 4)), TypeError, "mask must have dtype torch.bool"),
    R(models.Transformer, "decode_step past max_len", lambda: models.Transformer(6, 7, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16, max_len=4).decode_step(ids(2, 5), floats(2, 3, 8), seq2seq().init_cache()), ValueError, "tgt has 5 positions"),
    R(decoding.greedy_decode, "bos_id outside the vocabulary", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 4, 99, 2, 0), ValueError, "bos_id=99 is not a token of the model's target vocabulary of 7"),
    R(decoding.sample_decode, "bos_id outside the vocabulary", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 99, 2, 0), ValueError, "bos_id=99 is not a token"),
    R(decoding.beam_search, "bos_id outside the vocabulary", lambda: decoding.beam_search(seq2seq(), ids(2, 3), 2, 4, 99, 2, 0), ValueError, "bos_id=99 is not a token"),
    R(decoding.sample_decode, "return_scores 'yes'", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, return_scores="yes"), TypeError, "return_scores must be a bool"),
    R(decoding.greedy_decode, "return_scores 'False'", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, return_scores="False"), TypeError, "return_scores must be a bool"),
    R(decoding.greedy_decode, "suppress_bos 'no'", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, suppress_bos="no"), TypeError, "suppress_bos must be a bool"),
    R(decoding.sample_decode, "an empty batch", lambda: decoding.sample_decode(seq2seq(), ids(0, 5), 4, 1, 2, 0), ValueError, "src must hold at least one sequence (batch >= 1)"),
    R(training.fit, "desc=3", lambda: training.fit(tagger(), (ids(4, 3), ids(4, 3, high=3)), epochs=1, desc=3, progress=False), TypeError, "desc must be a str"),
    R(measure.count_parameters, "trainable_only 'yes'", lambda: measure.count_parameters(nn.Linear(2, 2), trainable_only="yes"), TypeError, "trainable_only must be a bool"),
    R(measure.count_parameters, "trainable_only 2", lambda: measure.count_parameters(nn.Linear(2, 2), trainable_only=2), TypeError, "trainable_only must be a bool"),
    R(plotting.plot_heatmap, "colorbar 'False'", lambda: plotting.plot_heatmap(floats(2, 2), colorbar="False"), TypeError, "colorbar must be a bool"),
    R(plotting.plot_attention, "colorbar 'yes'", lambda: plotting.plot_attention(torch.full((2, 2), 0.5), colorbar="yes"), TypeError, "colorbar must be a bool"),
    R(plotting.plot_attention, "title=3", lambda: plotting.plot_attention(torch.full((2, 2), 0.5), title=3), TypeError, "title must be a str or None"),
    R(plotting.plot_heatmap, "unknown cmap", lambda: plotting.plot_heatmap(floats(2, 2), cmap="no-such-map"), ValueError, "cmap must name a matplotlib colormap"),
    R(plotting.plot_history, "title=3", lambda: plotting.plot_history(history(), title=3), TypeError, "title must be a str or None"),
    R(diagrams.draw_alternating_stack, "title=3", lambda: diagrams.draw_alternating_stack(title=3), TypeError, "title must be a str or None"),
    R(diagrams.draw_alternating_stack, "num_layers=10**6", lambda: diagrams.draw_alternating_stack(num_layers=10**6), ValueError, "num_layers=1000000 is more than a diagram can show"),
    R(diagrams.draw_local_attention, "n_frames=10**6", lambda: diagrams.draw_local_attention(n_frames=10**6), ValueError, "more than a diagram can show"),
    R(diagrams.draw_multi_head, "num_heads=10**6", lambda: diagrams.draw_multi_head(num_heads=10**6), ValueError, "more than a diagram can show"),
    R(diagrams.draw_qkv_flow, "n_inputs=10**6", lambda: diagrams.draw_qkv_flow(n_inputs=10**6), ValueError, "more than a diagram can show"),
    R(diagrams.draw_decoding_loop, "10**4 words", lambda: diagrams.draw_decoding_loop(words=["w"] * 10**4), ValueError, "more than a diagram can show"),
    R(diagrams.draw_encoder_block, "title=3", lambda: diagrams.draw_encoder_block(title=3), TypeError, "title must be a str or None"),
    R(diagrams.draw_encoder_decoder, "title=3", lambda: diagrams.draw_encoder_decoder(title=3), TypeError, "title must be a str or None"),
    R(diagrams.draw_matrix_form, "title=3", lambda: diagrams.draw_matrix_form(title=3), TypeError, "title must be a str or None"),
    R(diagrams.draw_decoding_loop, "title=3", lambda: diagrams.draw_decoding_loop(title=3), TypeError, "title must be a str or None"),
    R(utils.validated, "a validator that is not callable", lambda: utils.validated(3), TypeError, "validator must be a callable"),
    R(utils.validated, "trusted a string", lambda: utils.validated(print, trusted="no"), TypeError, "trusted must be a bool"),
    R(utils.seed_everything, "float seed", lambda: utils.seed_everything(1.5), TypeError, "seed must be an int"),
    R(utils.seed_everything, "bool seed", lambda: utils.seed_everything(True), TypeError, "seed must be an int"),
    R(utils.seed_everything, "0 threads", lambda: utils.seed_everything(0, num_threads=0), ValueError, "num_threads must be >= 1"),
    R(utils.get_device, "unknown device name", lambda: utils.get_device("tpu"), ValueError, "prefer must name a device"),
    R(utils.get_device, "an int", lambda: utils.get_device(3), TypeError, "prefer must be None, a device name"),
    R(utils.eval_mode, "not a module", lambda: utils.eval_mode(3).__enter__(), TypeError, "model must be a torch.nn.Module"),
    R(utils.check_tensor, "a list", lambda: utils.check_tensor([1.0], "x"), TypeError, "x must be a torch.Tensor"),
    R(utils.check_tensor, "wrong rank", lambda: utils.check_tensor(floats(2), "x", ndim=2), ValueError, "x must have 2 dimensions, got 1"),
    R(utils.check_tensor, "wrong dtype class", lambda: utils.check_tensor(ids(2), "x", dtype="floating"), TypeError, "x must have dtype floating"),
    R(utils.check_tensor, "wrong shape", lambda: utils.check_tensor(floats(2, 3), "x", shape=(2, 4)), ValueError, "x must have shape (2, 4), got (2, 3)"),
    R(utils.check_tensor, "unknown dtype class", lambda: utils.check_tensor(floats(2), "x", dtype="complexish"), ValueError, "unknown dtype class"),
    R(utils.check_positive_int, "zero", lambda: utils.check_positive_int(0, "n"), ValueError, "n must be >= 1, got 0"),
    R(utils.check_positive_int, "a bool", lambda: utils.check_positive_int(True, "n"), TypeError, "n must be an int, got bool"),
    R(utils.check_positive_int, "a float", lambda: utils.check_positive_int(2.0, "n"), TypeError, "n must be an int, got float"),
    R(utils.check_non_negative_int, "negative", lambda: utils.check_non_negative_int(-1, "n"), ValueError, "n must be >= 0, got -1"),
    R(utils.check_bool, "a string", lambda: utils.check_bool("yes", "flag"), TypeError, "flag must be a bool"),
    R(utils.check_bool, "an int", lambda: utils.check_bool(1, "flag"), TypeError, "flag must be a bool"),
    R(utils.check_probability, "1.0", lambda: utils.check_probability(1.0, "p"), ValueError, "p must be in [0, 1), got 1.0"),
    R(utils.check_probability, "nan", lambda: utils.check_probability(NAN, "p"), ValueError, "p must be in [0, 1)"),
    R(utils.check_probability, "a string", lambda: utils.check_probability("0.1", "p"), TypeError, "p must be a float in [0, 1)"),
    R(utils.check_positive_float, "inf", lambda: utils.check_positive_float(INF, "eps"), ValueError, "eps must be a finite number > 0, got inf"),
    R(utils.check_positive_float, "zero", lambda: utils.check_positive_float(0.0, "eps"), ValueError, "eps must be a finite number > 0"),
    R(utils.check_positive_float, "a string", lambda: utils.check_positive_float("1", "eps"), TypeError, "eps must be a number > 0, got str"),
    R(utils.check_seed, "a float", lambda: utils.check_seed(0.5), TypeError, "seed must be an int, got float"),
    R(utils.check_device, "unknown device name", lambda: utils.check_device("tpu"), ValueError, "device must name a device"),
    R(utils.check_device, "an int", lambda: utils.check_device(0), TypeError, "device must be None, a device name"),
    R(utils.check_qkv, "integer q", lambda: utils.check_qkv(ids(2, 3), floats(2, 3), floats(2, 3)), TypeError, "q must have dtype floating"),
    R(utils.check_qkv, "d_k differs", lambda: utils.check_qkv(floats(2, 3), floats(2, 4), floats(2, 4)), ValueError, "same feature size d_k"),
    R(utils.check_qkv, "no features", lambda: utils.check_qkv(floats(2, 0), floats(2, 0), floats(2, 3)), ValueError, "q must have at least one feature"),
    # masks
    R(masks.causal_mask, "n = 0", lambda: masks.causal_mask(0), ValueError, "n must be >= 1, got 0"),
    R(masks.causal_mask, "n a float", lambda: masks.causal_mask(3.0), TypeError, "n must be an int, got float"),
    R(masks.causal_mask, "n a bool", lambda: masks.causal_mask(True), TypeError, "n must be an int, got bool"),
    R(masks.causal_mask, "unknown device", lambda: masks.causal_mask(3, device="tpu"), ValueError, "device must name a device"),
    R(masks.causal_mask, "n = -3", lambda: masks.causal_mask(-3), ValueError, "n must be >= 1, got -3"),
    R(masks.causal_mask, "n = 2.0", lambda: masks.causal_mask(2.0), TypeError, "n must be an int, got float"),
    R(masks.causal_mask, "n a string", lambda: masks.causal_mask("3"), TypeError, "n must be an int, got str"),
    R(masks.causal_mask, "n = None", lambda: masks.causal_mask(None), TypeError, "n must be an int, got NoneType"),
    R(masks.key_padding_mask, "no lengths", lambda: masks.key_padding_mask([]), ValueError, "lengths is empty"),
    R(masks.key_padding_mask, "negative length", lambda: masks.key_padding_mask([3, -1]), ValueError, "lengths must be >= 0"),
    R(masks.key_padding_mask, "float lengths", lambda: masks.key_padding_mask(torch.tensor([2.0, 3.0])), TypeError, "lengths must have dtype integer"),
    R(masks.key_padding_mask, "2-D lengths", lambda: masks.key_padding_mask(torch.tensor([[2, 3]])), ValueError, "lengths must have 1 dimensions"),
    R(masks.key_padding_mask, "max_len too short", lambda: masks.key_padding_mask([2, 5], max_len=4), ValueError, "max_len=4 is shorter than the longest sequence (5)"),
    R(masks.check_mask, "float mask", lambda: masks.check_mask(floats(3, 3), (2, 2, 3, 3)), TypeError, "mask must have dtype torch.bool"),
    R(masks.check_mask, "not a tensor", lambda: masks.check_mask([[True]], (2, 2, 3, 3)), TypeError, "mask must be a torch.Tensor"),
    R(masks.check_mask, "3-D mask for 4-D scores", lambda: masks.check_mask(bools(2, 3, 3), (2, 2, 3, 3)), ValueError, "is 3-D, which is ambiguous"),
    R(masks.check_mask, "size that neither equals nor is 1", lambda: masks.check_mask(bools(2, 1, 1, 4), (2, 2, 3, 5)), ValueError, "does not fit attention scores of shape (2, 2, 3, 5)"),
    R(masks.check_mask, "more dimensions than the scores", lambda: masks.check_mask(bools(1, 1, 1, 3, 3), (2, 2, 3, 3)), ValueError, "cannot be matched"),
    R(masks.check_mask, "0-D mask", lambda: masks.check_mask(torch.tensor(True), (2, 2, 3, 3)), ValueError, "cannot be matched"),
    R(masks.check_mask, "scores_shape an int", lambda: masks.check_mask(bools(3, 3), 5), TypeError, "scores_shape must be a tuple of sizes"),
    # attention: the steps and the two paths
    R(attention.attention_scores, "1-D q", lambda: attention.attention_scores(floats(3), floats(3)), ValueError, "q must have at least 2 dimensions"),
    R(attention.attention_scores, "d_k differs", lambda: attention.attention_scores(floats(2, 3), floats(2, 4)), ValueError, "same feature size d_k"),
    R(attention.attention_scores, "integer q", lambda: attention.attention_scores(ids(2, 3), ids(2, 3)), TypeError, "q must have dtype floating"),
    R(attention.masked_softmax, "integer scores", lambda: attention.masked_softmax(ids(2, 2)), TypeError, "scores must have dtype floating"),
    R(attention.masked_softmax, "1-D scores", lambda: attention.masked_softmax(floats(3)), ValueError, "scores must have shape (..., n_queries, n_keys)"),
    R(attention.masked_softmax, "mask of another size", lambda: attention.masked_softmax(floats(2, 3, 4), bools(3, 5)), ValueError, "does not fit attention scores"),
    R(attention.scaled_dot_product_attention, "integer q", lambda: attention.scaled_dot_product_attention(ids(2, 3, 4), floats(2, 5, 4), floats(2, 5, 6)), TypeError, "q must have dtype floating, got torch.int64"),
    R(attention.scaled_dot_product_attention, "1-D q, k, v", lambda: attention.scaled_dot_product_attention(floats(4), floats(4), floats(4)), ValueError, "q must have at least 2 dimensions (..., seq, features), got shape (4,)"),
    R(attention.scaled_dot_product_attention, "keys and values unpaired", lambda: attention.scaled_dot_product_attention(floats(2, 3, 4), floats(2, 5, 4), floats(2, 6, 4)), ValueError, "keys and values must come in pairs"),
    R(attention.scaled_dot_product_attention, "batch differs", lambda: attention.scaled_dot_product_attention(floats(2, 3, 4), floats(3, 3, 4), floats(3, 3, 4)), ValueError, "same leading (batch/head) dimensions"),
    R(attention.scaled_dot_product_attention, "dtypes differ", lambda: attention.scaled_dot_product_attention(floats(2, 3, 4), floats(2, 3, 4, dtype=torch.float64), floats(2, 3, 4)), TypeError, "must share a dtype"),
    R(attention.scaled_dot_product_attention, "a numpy array", lambda: attention.scaled_dot_product_attention(np.zeros((2, 3)), floats(2, 3), floats(2, 3)), TypeError, "q must be a torch.Tensor"),
    R(attention.scaled_dot_product_attention, "additive float mask", lambda: attention.scaled_dot_product_attention(*qkv(), mask=floats(4, 4)), TypeError, "An additive float mask"),
    R(attention.scaled_dot_product_attention, "dropout_p = 1", lambda: attention.scaled_dot_product_attention(*qkv(), dropout_p=1.0), ValueError, "dropout_p must be in [0, 1)"),
    R(attention.fused_attention, "3-D mask for 4-D scores", lambda: attention.fused_attention(floats(2, 2, 3, 4), floats(2, 2, 3, 4), floats(2, 2, 3, 4), bools(2, 3, 3)), ValueError, "is 3-D, which is ambiguous"),
    R(attention.fused_attention, "integer v", lambda: attention.fused_attention(floats(2, 3), floats(2, 3), ids(2, 3)), TypeError, "v must have dtype floating"),
    R(attention.fused_attention, "dropout_p a string", lambda: attention.fused_attention(*qkv(), dropout_p="0.1"), TypeError, "dropout_p must be a float"),
    R(attention.SelfAttention, "d_model = 0", lambda: attention.SelfAttention(0), ValueError, "d_model must be >= 1"),
    R(attention.SelfAttention, "bias a string", lambda: attention.SelfAttention(4, bias="no"), TypeError, "bias must be a bool"),
    R(attention.SelfAttention, "x of another width", lambda: attention.SelfAttention(4)(floats(2, 3, 5)), ValueError, "x must have shape (batch, seq, 4)"),
    R(attention.SelfAttention, "2-D x", lambda: attention.SelfAttention(4)(floats(3, 4)), ValueError, "x must have 3 dimensions"),
    R(attention.split_heads, "d_model not divisible", lambda: attention.split_heads(floats(2, 3, 6), 4), ValueError, "not divisible by num_heads=4"),
    R(attention.split_heads, "num_heads = 0", lambda: attention.split_heads(floats(2, 3, 6), 0), ValueError, "num_heads must be >= 1"),
    R(attention.split_heads, "4-D x", lambda: attention.split_heads(floats(2, 2, 3, 6), 2), ValueError, "x must have 3 dimensions"),
    R(attention.merge_heads, "3-D x", lambda: attention.merge_heads(floats(2, 3, 6)), ValueError, "x must have 4 dimensions"),
    R(attention.multi_head_attention, "weight of the wrong shape", lambda: attention.multi_head_attention(floats(2, 3, 4), floats(4, 4), floats(4, 5), floats(4, 4), floats(4, 4), 2), ValueError, "w_k must have shape (4, 4)"),
    R(attention.multi_head_attention, "heads do not divide", lambda: attention.multi_head_attention(floats(2, 3, 4), *(floats(4, 4) for _ in range(4)), 3), ValueError, "not divisible by num_heads=3"),
    R(attention.MultiHeadAttention, "d_model not divisible", lambda: attention.MultiHeadAttention(6, 4), ValueError, "not divisible by num_heads=4"),
    R(attention.MultiHeadAttention, "dropout = 1.5", lambda: attention.MultiHeadAttention(8, 2, dropout=1.5), ValueError, "dropout must be in [0, 1)"),
    R(attention.MultiHeadAttention, "kdim = 0", lambda: attention.MultiHeadAttention(8, 2, kdim=0), ValueError, "kdim must be >= 1"),
    R(attention.MultiHeadAttention, "bias None", lambda: attention.MultiHeadAttention(8, 2, bias=None), TypeError, "bias must be a bool"),
    R(attention.MultiHeadAttention, "query of another width", lambda: mha()(floats(2, 3, 6), floats(2, 3, 8), floats(2, 3, 8)), ValueError, "query must have shape (batch, seq, 8)"),
    R(attention.MultiHeadAttention, "key and value lengths differ", lambda: mha()(floats(2, 3, 8), floats(2, 4, 8), floats(2, 5, 8)), ValueError, "key and value must have the same length"),
    R(attention.MultiHeadAttention, "batch sizes differ", lambda: mha()(floats(2, 3, 8), floats(3, 3, 8), floats(3, 3, 8)), ValueError, "same batch size"),
    R(attention.MultiHeadAttention, "need_weights a string", lambda: mha()(floats(2, 3, 8), floats(2, 3, 8), floats(2, 3, 8), need_weights="no"), TypeError, "need_weights must be a bool"),
    R(attention.MultiHeadAttention, "from_torch of another module", lambda: attention.MultiHeadAttention.from_torch(nn.Linear(2, 2)), TypeError, "expected nn.MultiheadAttention"),
    R(attention.split_heads, "10 features in 4 heads", lambda: attention.split_heads(floats(2, 3, 10), 4), ValueError, "d_model=10 (last dimension of x, shape (2, 3, 10)) is not divisible by num_heads=4"),
    R(attention.split_heads, "2-D x", lambda: attention.split_heads(floats(3, 10), 2), ValueError, "x must have 3 dimensions, got 2 (shape (3, 10))"),
    R(attention.MultiHeadAttention, "d_model=10, num_heads=3", lambda: attention.MultiHeadAttention(10, 3), ValueError, "d_model=10 is not divisible by num_heads=3"),
    R(attention.MultiHeadAttention, "d_model=7, num_heads=2", lambda: attention.MultiHeadAttention(7, 2), ValueError, "d_model=7 is not divisible by num_heads=2"),
    R(attention.MultiHeadAttention, "more heads than features", lambda: attention.MultiHeadAttention(4, 8), ValueError, "d_model=4 is not divisible by num_heads=8"),
    R(attention.MultiHeadAttention, "unbatched query", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(3, 8), floats(2, 5, 4), floats(2, 5, 8)), ValueError, "query must have 3 dimensions, got 2 (shape (3, 8))"),
    R(attention.MultiHeadAttention, "query of another d_model", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 6), floats(2, 5, 4), floats(2, 5, 8)), ValueError, "query must have shape (batch, seq, 8), got (2, 3, 6)"),
    R(attention.MultiHeadAttention, "key of another kdim", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 8), floats(2, 5, 8), floats(2, 5, 8)), ValueError, "key must have shape (batch, seq, 4), got (2, 5, 8)"),
    R(attention.MultiHeadAttention, "keys and values of other lengths", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 8), floats(2, 5, 4), floats(2, 4, 8)), ValueError, "key and value must have the same length, got (2, 5, 4) and (2, 4, 8)"),
    R(attention.MultiHeadAttention, "key of another batch", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 8), floats(3, 5, 4), floats(3, 5, 8)), ValueError, "query, key and value must have the same batch size, got (2, 3, 8), (3, 5, 4), (3, 5, 8)"),
    R(attention.MultiHeadAttention, "a (batch, n_k) padding as mask", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 8), floats(2, 5, 4), floats(2, 5, 8), bools(2, 5)), ValueError, "mask with shape (2, 5) does not fit attention scores of shape (2, 2, 3, 5)"),
    R(attention.MultiHeadAttention, "a transposed mask", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 8), floats(2, 5, 4), floats(2, 5, 8), bools(5, 3)), ValueError, "mask with shape (5, 3) does not fit attention scores of shape (2, 2, 3, 5)"),
    R(attention.MultiHeadAttention, "a float mask", lambda: attention.MultiHeadAttention(8, 2, kdim=4)(floats(2, 3, 8), floats(2, 5, 4), floats(2, 5, 8), torch.ones(3, 5)), TypeError, "mask must have dtype torch.bool (True = may attend), got torch.float32"),
    R(attention.MultiHeadAttention, "from_torch with add_zero_attn", lambda: attention.MultiHeadAttention.from_torch(nn.MultiheadAttention(8, 2, add_zero_attn=True)), ValueError, "add_zero_attn are not supported"),
    # layers
    R(layers.make_attention, "an instance, not a factory", lambda: layers.make_attention(mha(), 8, 2, 0.0), TypeError, "pass the class, not an instance"),
    R(layers.make_attention, "factory returns a tensor", lambda: layers.make_attention(lambda d, h, p: floats(2), 8, 2, 0.0), TypeError, "factory must return an nn.Module"),
    R(layers.layer_norm, "eps = nan", lambda: layers.layer_norm(floats(2, 3), torch.ones(3), torch.zeros(3), eps=NAN), ValueError, "eps must be a finite number > 0, got nan"),
    R(layers.layer_norm, "eps = 0", lambda: layers.layer_norm(floats(2, 3), torch.ones(3), torch.zeros(3), eps=0.0), ValueError, "eps must be a finite number > 0"),
    R(layers.layer_norm, "gamma of another size", lambda: layers.layer_norm(floats(2, 3), torch.ones(4), torch.zeros(3)), ValueError, "gamma must have shape (3,)"),
    R(layers.layer_norm, "integer x", lambda: layers.layer_norm(ids(2, 3), torch.ones(3), torch.zeros(3)), TypeError, "x must have dtype floating"),
    R(layers.sublayer_connection, "norm_first a string", lambda: layers.sublayer_connection(floats(2, 3, 4), nn.Identity(), nn.LayerNorm(4), "yes"), TypeError, "norm_first must be a bool"),
    R(layers.sublayer_connection, "sublayer not callable", lambda: layers.sublayer_connection(floats(2, 3, 4), 3, nn.LayerNorm(4)), TypeError, "sublayer must be a callable"),
    R(layers.FeedForward, "activation tanh", lambda: layers.FeedForward(8, 16, activation="tanh"), ValueError, "activation must be 'relu' or 'gelu'"),
    R(layers.FeedForward, "d_ff = 0", lambda: layers.FeedForward(8, 0), ValueError, "d_ff must be >= 1"),
    R(layers.FeedForward, "x of another width", lambda: layers.FeedForward(8, 16)(floats(2, 3, 4)), ValueError, "last dimension does not match the layer's d_model"),
    R(layers.EncoderLayer, "layer_norm_eps = -1", lambda: encoder_layer(layer_norm_eps=-1), ValueError, "layer_norm_eps must be a finite number > 0, got -1"),
    R(layers.EncoderLayer, "layer_norm_eps = inf", lambda: encoder_layer(layer_norm_eps=INF), ValueError, "layer_norm_eps must be a finite number > 0"),
    R(layers.EncoderLayer, "norm_first 'yes'", lambda: encoder_layer(norm_first="yes"), TypeError, "norm_first must be a bool"),
    R(layers.EncoderLayer, "num_heads do not divide", lambda: layers.EncoderLayer(8, 3, 16), ValueError, "not divisible by num_heads=3"),
    R(layers.EncoderLayer, "x of another width", lambda: encoder_layer()(floats(2, 3, 6)), ValueError, "x must have shape (batch, seq, d_model=8)"),
    R(layers.EncoderLayer, "mask of another length", lambda: encoder_layer()(floats(2, 3, 8), bools(2, 1, 1, 4)), ValueError, "does not fit attention scores"),
    R(layers.EncoderLayer, "from_torch of a decoder layer", lambda: layers.EncoderLayer.from_torch(nn.TransformerDecoderLayer(8, 2, 16)), TypeError, "expected nn.TransformerEncoderLayer"),
    R(layers.DecoderLayer, "memory batch differs", lambda: decoder_layer()(floats(2, 3, 8), floats(3, 4, 8)), ValueError, "x and memory must have the same batch size"),
    R(layers.DecoderLayer, "memory_mask for another source length", lambda: decoder_layer()(floats(2, 3, 8), floats(2, 4, 8), memory_mask=bools(2, 1, 1, 5)), ValueError, "does not fit attention scores"),
    R(layers.DecoderLayer, "bias 1", lambda: decoder_layer(bias=1), TypeError, "bias must be a bool"),
    R(layers.DecoderLayer, "from_torch of an encoder layer", lambda: layers.DecoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, 16)), TypeError, "expected nn.TransformerDecoderLayer"),
    # models
    R(models.Encoder, "num_layers = 0", lambda: models.Encoder(encoder_layer(), 0), ValueError, "num_layers must be >= 1"),
    R(models.Encoder, "final_norm 'yes'", lambda: models.Encoder(encoder_layer(), 1, final_norm="yes"), TypeError, "final_norm must be a bool"),
    R(models.Encoder, "a decoder layer as template", lambda: models.Encoder(decoder_layer(), 2), TypeError, "expected a EncoderLayer as template"),
    R(models.Encoder, "factory returns one shared layer", lambda: models.Encoder((lambda layer: lambda: layer)(encoder_layer()), 2), ValueError, "returned the same layer twice"),
    R(models.Encoder, "x of another width", lambda: models.Encoder(encoder_layer(), 1)(floats(2, 3, 4)), ValueError, "x must have shape (batch, seq, d_model=8)"),
    R(models.Decoder, "an int as layer", lambda: models.Decoder(3, 2), TypeError, "layer must be a DecoderLayer"),
    R(models.Decoder, "memory of another width", lambda: models.Decoder(decoder_layer(), 1)(floats(2, 3, 8), floats(2, 3, 4)), ValueError, "memory must have shape (batch, seq, d_model=8)"),
    R(models.TokenEmbedding, "pad_id outside the vocabulary", lambda: models.TokenEmbedding(5, 8, pad_id=5), ValueError, "pad_id=5 is not an id of a vocabulary of 5"),
    R(models.TokenEmbedding, "ids outside the vocabulary", lambda: models.TokenEmbedding(5, 8)(torch.tensor([[1, 7]])), ValueError, "ids must lie in [0, 4]"),
    R(models.TokenEmbedding, "float tokens", lambda: models.TokenEmbedding(5, 8)(floats(1, 2)), TypeError, "tokens must have dtype integer"),
    R(models.TokenEmbedding, "positional_encoding 'yes'", lambda: models.TokenEmbedding(5, 8, positional_encoding="yes"), TypeError, "positional_encoding must be a bool"),
    R(models.TokenEmbedding, "longer than max_len", lambda: models.TokenEmbedding(5, 8, max_len=3)(ids(1, 4)), ValueError, "more than max_len=3"),
    R(models.EncoderTagger, "activation tanh", lambda: models.EncoderTagger(6, 3, activation="tanh"), ValueError, "activation must be 'relu' or 'gelu'"),
    R(models.EncoderTagger, "num_labels = 0", lambda: models.EncoderTagger(6, 0), ValueError, "num_labels must be >= 1"),
    R(models.EncoderTagger, "negative token id", lambda: tagger()(torch.tensor([[1, -1]])), ValueError, "ids must lie in [0, 5]"),
    R(models.EncoderTagger, "mask of another length", lambda: tagger()(ids(2, 3), bools(2, 1, 1, 4)), ValueError, "does not fit attention scores"),
    R(models.Transformer, "pad_id outside the vocabulary", lambda: models.Transformer(5, 5, pad_id=9), ValueError, "pad_id=9 is not an id"),
    R(models.Transformer, "norm_first 'yes'", lambda: models.Transformer(5, 5, d_model=8, num_heads=2, norm_first="yes"), TypeError, "norm_first must be a bool"),
    R(models.Transformer, "src and tgt batches differ", lambda: seq2seq()(ids(2, 3), ids(3, 3)), ValueError, "different batch sizes"),
    R(models.Transformer, "tgt id outside the target vocabulary", lambda: seq2seq()(ids(2, 3), torch.tensor([[1, 7]] * 2)), ValueError, "tgt holds token ids in [1, 7]"),
    R(models.Transformer, "decode with memory of another width", lambda: seq2seq().decode(ids(2, 3), floats(2, 3, 4)), ValueError, "memory must have shape (batch, seq, d_model=8)"),
    R(models.Transformer, "decode with src that does not match memory", lambda: seq2seq().decode(ids(2, 3), floats(2, 3, 8), src=ids(2, 4)), ValueError, "does not match memory"),
    R(models.make_src_mask, "pad_id = -5", lambda: models.make_src_mask(ids(2, 3), -5), ValueError, "pad_id must be >= 0, got -5"),
    R(models.make_src_mask, "pad_id = 1.5", lambda: models.make_src_mask(ids(2, 3), 1.5), TypeError, "pad_id must be an int, got float"),
    R(models.make_src_mask, "pad_id = '0'", lambda: models.make_src_mask(ids(2, 3), "0"), TypeError, "pad_id must be an int, got str"),
    R(models.make_src_mask, "float src", lambda: models.make_src_mask(floats(2, 3), 0), TypeError, "src must have dtype integer"),
    R(models.make_tgt_mask, "1-D tgt", lambda: models.make_tgt_mask(ids(3), 0), ValueError, "tgt must have 2 dimensions"),
    R(models.make_tgt_mask, "pad_id True", lambda: models.make_tgt_mask(ids(2, 3), True), TypeError, "pad_id must be an int, got bool"),
    # positional
    R(positional.sinusoidal_encoding, "base = inf", lambda: positional.sinusoidal_encoding(4, 4, base=INF), ValueError, "base must be a finite number > 1, got inf"),
    R(positional.sinusoidal_encoding, "base = 1", lambda: positional.sinusoidal_encoding(4, 4, base=1), ValueError, "base must be a finite number > 1"),
    R(positional.sinusoidal_encoding, "base a string", lambda: positional.sinusoidal_encoding(4, 4, base="1e4"), TypeError, "base must be a number"),
    R(positional.sinusoidal_encoding, "integer dtype", lambda: positional.sinusoidal_encoding(4, 4, dtype=torch.long), TypeError, "dtype must be a floating torch.dtype"),
    R(positional.sinusoidal_encoding, "unknown device", lambda: positional.sinusoidal_encoding(4, 4, device="gpu"), ValueError, "device must name a device"),
    R(positional.sinusoidal_encoding, "n_positions = 0", lambda: positional.sinusoidal_encoding(0, 4), ValueError, "n_positions must be >= 1"),
    R(positional.SinusoidalEncoding, "longer than max_len", lambda: positional.SinusoidalEncoding(4, max_len=3)(floats(1, 4, 4)), ValueError, "built with max_len=3"),
    R(positional.SinusoidalEncoding, "integer x", lambda: positional.SinusoidalEncoding(4)(ids(1, 2, 4)), TypeError, "x must have dtype floating"),
    R(positional.LearnedPositionalEmbedding, "init_std = inf", lambda: positional.LearnedPositionalEmbedding(4, 4, init_std=INF), ValueError, "init_std must be a finite number > 0, got inf"),
    R(positional.LearnedPositionalEmbedding, "init_std a string", lambda: positional.LearnedPositionalEmbedding(4, 4, init_std="0.02"), TypeError, "init_std must be a number > 0"),
    R(positional.LearnedPositionalEmbedding, "longer than max_len", lambda: positional.LearnedPositionalEmbedding(3, 4)(floats(1, 4, 4)), ValueError, "only has vectors for max_len=3"),
    R(positional.rotary_angles, "odd d_head", lambda: positional.rotary_angles(torch.arange(3), 5), ValueError, "d_head must be even, got 5"),
    R(positional.rotary_angles, "positions a list", lambda: positional.rotary_angles([0, 1], 4), TypeError, "positions must be a torch.Tensor"),
    R(positional.rotary_angles, "dtype a string", lambda: positional.rotary_angles(torch.arange(3), 4, dtype="float"), TypeError, "dtype must be a floating torch.dtype"),
    R(positional.apply_rotary, "odd last dimension", lambda: positional.apply_rotary(floats(2, 3, 5)), ValueError, "must be even"),
    R(positional.apply_rotary, "NaN position", lambda: positional.apply_rotary(floats(1, 3, 4), torch.tensor([0.0, NAN, 1.0])), ValueError, "positions must be finite"),
    R(positional.apply_rotary, "bool positions", lambda: positional.apply_rotary(floats(1, 3, 4), bools(3)), TypeError, "positions must be integer or float"),
    R(positional.apply_rotary, "positions that enlarge x", lambda: positional.apply_rotary(floats(1, 3, 4), torch.arange(4)), ValueError, "must broadcast to x.shape[:-1]"),
    R(positional.RotaryEmbedding, "base = 1", lambda: positional.RotaryEmbedding(4, base=1), ValueError, "base must be a finite number > 1"),
    R(positional.RotaryEmbedding, "odd d_head", lambda: positional.RotaryEmbedding(3), ValueError, "d_head must be even"),
    R(positional.RotaryEmbedding, "x of another width", lambda: positional.RotaryEmbedding(4)(floats(2, 3, 6)), ValueError, "x must have shape (..., seq, d_head=4)"),
    R(positional.sinusoidal_encoding, "n_positions = -3", lambda: positional.sinusoidal_encoding(-3, 4), ValueError, "n_positions must be >= 1, got -3"),
    R(positional.sinusoidal_encoding, "d_model = 0", lambda: positional.sinusoidal_encoding(4, 0), ValueError, "d_model must be >= 1, got 0"),
    R(positional.sinusoidal_encoding, "n_positions = 2.5", lambda: positional.sinusoidal_encoding(2.5, 4), TypeError, "n_positions must be an int, got float"),
    R(positional.sinusoidal_encoding, "n_positions = True", lambda: positional.sinusoidal_encoding(True, 4), TypeError, "n_positions must be an int, got bool"),
    R(positional.sinusoidal_encoding, "d_model a string", lambda: positional.sinusoidal_encoding(4, "8"), TypeError, "d_model must be an int, got str"),
    R(positional.sinusoidal_encoding, "d_model = -1", lambda: positional.sinusoidal_encoding(4, -1), ValueError, "d_model must be >= 1, got -1"),
    R(positional.sinusoidal_encoding, "d_model = 2.5", lambda: positional.sinusoidal_encoding(4, 2.5), TypeError, "d_model must be an int, got float"),
    R(positional.sinusoidal_encoding, "d_model = True", lambda: positional.sinusoidal_encoding(4, True), TypeError, "d_model must be an int, got bool"),
    R(positional.sinusoidal_encoding, "base = 1.0", lambda: positional.sinusoidal_encoding(3, 4, base=1.0), ValueError, "base must be a finite number > 1, got 1.0"),
    R(positional.SinusoidalEncoding, "x of another width", lambda: positional.SinusoidalEncoding(6, max_len=10)(floats(2, 5, 4)), ValueError, "x must have shape (batch, seq, d_model=6), got (2, 5, 4)"),
    R(positional.SinusoidalEncoding, "2-D x", lambda: positional.SinusoidalEncoding(6, max_len=10)(floats(5, 6)), ValueError, "x must have 3 dimensions, got 2"),
    R(positional.LearnedPositionalEmbedding, "x of another width", lambda: positional.LearnedPositionalEmbedding(max_len=8, d_model=4)(floats(1, 3, 5)), ValueError, "x must have shape (batch, seq, d_model=4), got (1, 3, 5)"),
    R(positional.LearnedPositionalEmbedding, "2-D x", lambda: positional.LearnedPositionalEmbedding(max_len=8, d_model=4)(floats(3, 4)), ValueError, "x must have 3 dimensions, got 2"),
    R(positional.LearnedPositionalEmbedding, "max_len = 0", lambda: positional.LearnedPositionalEmbedding(0, 4), ValueError, "max_len must be >= 1, got 0"),
    R(positional.LearnedPositionalEmbedding, "init_std = 0", lambda: positional.LearnedPositionalEmbedding(4, 4, init_std=0.0), ValueError, "init_std must be a finite number > 0"),
    R(positional.apply_rotary, "1-D x", lambda: positional.apply_rotary(floats(6)), ValueError, "x must have shape (..., seq, d_head), got (6,)"),
    R(positional.apply_rotary, "integer x", lambda: positional.apply_rotary(ids(3, 4)), TypeError, "x must have dtype floating"),
    R(positional.apply_rotary, "positions that do not broadcast", lambda: positional.apply_rotary(floats(3, 4), torch.zeros(2, 3)), ValueError, "positions of shape (2, 3) must broadcast to x.shape[:-1] = (3,)"),
    R(positional.RotaryAttention, "odd d_head", lambda: positional.RotaryAttention(6, 2), ValueError, "needs an even d_head"),
    R(positional.RotaryAttention, "positions of another length", lambda: positional.RotaryAttention(8, 2)(floats(2, 3, 8), floats(2, 3, 8), floats(2, 3, 8), positions=torch.arange(4)), ValueError, "positions must have shape (seq,) or (batch, seq)"),
    R(positional.RotaryAttention, "inf position", lambda: positional.RotaryAttention(8, 2)(floats(2, 3, 8), floats(2, 3, 8), floats(2, 3, 8), positions=torch.tensor([0.0, 1.0, INF])), ValueError, "positions must be finite"),
    # measure
    R(measure.peak_tensor_memory, "not callable", lambda: measure.peak_tensor_memory(3), TypeError, "fn must be a callable"),
    R(measure.median_time, "repeats = 0", lambda: measure.median_time(lambda: None, repeats=0), ValueError, "repeats must be an int >= 1, got 0"),
    R(measure.median_time, "warmup a float", lambda: measure.median_time(lambda: None, warmup=0.5), ValueError, "warmup must be an int >= 0"),
    R(measure.median_time, "not callable", lambda: measure.median_time(None), TypeError, "fn must be a callable"),
    R(measure.median_time, "unknown clock", lambda: measure.median_time(lambda: None, clock="cpu-time"), ValueError, "clock must be one of ['cpu', 'wall'], got 'cpu-time'"),
    R(measure.count_parameters, "not a module", lambda: measure.count_parameters(3), TypeError, "model must be a torch.nn.Module"),
    # diagrams
    R(diagrams.draw_qkv_flow, "n_inputs = 0", lambda: diagrams.draw_qkv_flow(n_inputs=0), ValueError, "n_inputs must be >= 1"),
    R(diagrams.draw_matrix_form, "ax an int", lambda: diagrams.draw_matrix_form(ax=3), TypeError, "ax must be None or a matplotlib Axes"),
    R(diagrams.draw_local_attention, "query outside the frames", lambda: diagrams.draw_local_attention(n_frames=5, query=5), ValueError, "query must be a frame index < n_frames=5"),
    R(diagrams.draw_local_attention, "window = -1", lambda: diagrams.draw_local_attention(window=-1), ValueError, "window must be >= 0"),
    R(diagrams.draw_multi_head, "num_heads = 0", lambda: diagrams.draw_multi_head(num_heads=0), ValueError, "num_heads must be >= 1"),
    R(diagrams.draw_encoder_block, "norm_first 'yes'", lambda: diagrams.draw_encoder_block(norm_first="yes"), TypeError, "norm_first must be a bool"),
    R(diagrams.draw_alternating_stack, "num_layers = 0", lambda: diagrams.draw_alternating_stack(num_layers=0), ValueError, "num_layers must be >= 1"),
    R(diagrams.draw_encoder_decoder, "ax a string", lambda: diagrams.draw_encoder_decoder(ax="left"), TypeError, "ax must be None or a matplotlib Axes"),
    R(diagrams.draw_decoding_loop, "no words", lambda: diagrams.draw_decoding_loop(words=[]), ValueError, "words must be a non-empty sequence"),
    R(diagrams.draw_decoding_loop, "an int", lambda: diagrams.draw_decoding_loop(words=3), TypeError, "words must be a list of strings"),
    # data: section 01
    R(labelling.lookup_labelling, "min_distance > max_len", lambda: labelling.lookup_labelling(4, min_distance=30), ValueError, "min_distance=30 leaves nothing to label"),
    R(labelling.lookup_labelling, "float seed", lambda: labelling.lookup_labelling(4, seed=1.5), TypeError, "seed must be an int"),
    R(labelling.lookup_labelling, "min_len > max_len", lambda: labelling.lookup_labelling(4, min_len=20, max_len=12), ValueError, "min_len must be <= max_len"),
    R(labelling.lookup_labelling, "one value", lambda: labelling.lookup_labelling(4, n_values=1), ValueError, "n_values must be >= 2"),
    R(labelling.lookup_labelling, "no sequences", lambda: labelling.lookup_labelling(0), ValueError, "n_sequences must be >= 1"),
    R(labelling.lookup_labelling_splits, "n_test = 0", lambda: labelling.lookup_labelling_splits(10, 0), ValueError, "n_test must be >= 1"),
    R(labelling.lookup_labelling_splits, "more sequences than exist", lambda: labelling.lookup_labelling_splits(200, 100, n_symbols=2, n_values=2, min_len=3, max_len=3, min_distance=1), ValueError, "distinct sequences"),
    R(labelling.lookup_features, "id past the padding id", lambda: labelling.lookup_features(torch.tensor([99]), 2, 2), ValueError, "token ids must lie in [0, 6]"),
    R(labelling.lookup_features, "a list", lambda: labelling.lookup_features([1, 2], 2, 2), TypeError, "tokens must be a torch.Tensor"),
    R(labelling.lookup_num_features, "n_values = 0", lambda: labelling.lookup_num_features(2, 0), ValueError, "n_values must be >= 1"),
    R(labelling.lookup_vocab_size, "n_symbols a float", lambda: labelling.lookup_vocab_size(2.0, 2), TypeError, "n_symbols must be an int"),
    R(labelling.lookup_pad_id, "n_symbols = 0", lambda: labelling.lookup_pad_id(0, 2), ValueError, "n_symbols must be >= 1"),
    R(labelling.lookup_token_names, "float ids", lambda: labelling.lookup_token_names([1.5], 2, 2), TypeError, "tokens must have dtype integer"),
    R(labelling.lookup_token_names, "negative id", lambda: labelling.lookup_token_names([-1], 2, 2), ValueError, "token ids must lie in [0, 6]"),
    # data: section 02
    R(relations.make_two_relations, "float seed", lambda: relations.make_two_relations(4, seed=1.5), TypeError, "seed must be an int"),
    R(relations.make_two_relations, "two letters", lambda: relations.make_two_relations(4, num_letters=2), ValueError, "num_letters must be >= 3"),
    R(relations.make_two_relations, "one digit", lambda: relations.make_two_relations(4, num_digits=1), ValueError, "num_digits must be >= 2"),
    R(relations.two_relations_vocab_size, "num_letters = 0", lambda: relations.two_relations_vocab_size(0, 4), ValueError, "num_letters must be >= 1"),
    R(relations.format_two_relations, "negative id", lambda: relations.format_two_relations(torch.tensor([-1]), 2), ValueError, "tokens must be ids >= 0"),
    R(relations.format_two_relations, "2-D tokens", lambda: relations.format_two_relations(ids(2, 3), 2), ValueError, "tokens must have 1 dimensions"),
    # data: section 03
    R(ordering.make_flip_task, "float seed", lambda: ordering.make_flip_task(4, 2, 5, seed=1.5), TypeError, "seed must be an int"),
    R(ordering.make_flip_task, "min_len = 1", lambda: ordering.make_flip_task(4, 1, 5), ValueError, "min_len must be >= 2"),
    R(ordering.make_flip_task, "min_len > max_len", lambda: ordering.make_flip_task(4, 6, 5), ValueError, "min_len must be <= max_len"),
    R(ordering.best_order_blind_accuracy, "float tokens", lambda: ordering.best_order_blind_accuracy(floats(2, 3), ids(2, 3)), TypeError, "tokens must have dtype integer"),
    R(ordering.best_order_blind_accuracy, "labels of another shape", lambda: ordering.best_order_blind_accuracy(ids(2, 3), ids(2, 4)), ValueError, "labels must have shape (2, 3)"),
    R(ordering.best_order_blind_accuracy, "nothing labelled", lambda: ordering.best_order_blind_accuracy(ids(2, 3), torch.full((2, 3), -100)), ValueError, "labels has no labelled token"),
    # data: section 04
    R(sequences.sequence_task, "unknown task", lambda: sequences.sequence_task("copy", 4, 5, 6), ValueError, "task must be one of"),
    R(sequences.sequence_task, "float seed", lambda: sequences.sequence_task("sort", 4, 5, 6, seed=1.5), TypeError, "seed must be an int, got float"),
    R(sequences.sequence_task, "pad_id outside the vocabulary", lambda: sequences.sequence_task("sort", 4, 5, 6, pad_id=6), ValueError, "pad_id=6 must be a token id below vocab_size=6"),
    R(sequences.sequence_task, "more examples than sequences", lambda: sequences.sequence_task("sort", 100, 2, 3), ValueError, "distinct sequences"),
    R(sequences.reverse_task, "float seed", lambda: sequences.reverse_task(4, 5, 6, seed=1.5), TypeError, "seed must be an int, got float"),
    R(sequences.reverse_task, "min_len > seq_len", lambda: sequences.reverse_task(4, 5, 6, min_len=6), ValueError, "min_len=6 is larger than seq_len=5"),
    R(sequences.sort_task, "vocab_size = 1", lambda: sequences.sort_task(4, 5, 1), ValueError, "vocab_size must be >= 2"),
    R(sequences.sequence_task_splits, "n_train = 0", lambda: sequences.sequence_task_splits("reverse", 0, 4, 5, 6), ValueError, "n_train must be >= 1"),
    # data: section 05
    R(translation.Vocab, "repeated token", lambda: translation.Vocab(["a", "a"]), ValueError, "tokens must be unique"),
    R(translation.Vocab, "a special token", lambda: translation.Vocab(["<eos>"]), ValueError, "not special tokens"),
    R(translation.Vocab, "an int", lambda: translation.Vocab(3), TypeError, "tokens must be a list of token strings"),
    R(translation.Vocab, "encode ints", lambda: translation.Vocab(["a"]).encode([1]), TypeError, "tokens must be a string or a list of token strings"),
    R(translation.Vocab, "encode an unknown token", lambda: translation.Vocab(["a"]).encode("a b"), ValueError, "unknown tokens ['b']"),
    R(translation.Vocab, "decode a string id", lambda: translation.Vocab(["a"]).decode(["a"]), TypeError, "ids must be ints"),
    R(translation.Vocab, "decode an id outside", lambda: translation.Vocab(["a"]).decode([9]), ValueError, "id 9 is not in the vocabulary"),
    R(translation.Vocab, "decode a 2-D tensor", lambda: translation.Vocab(["a"]).decode(ids(2, 2)), ValueError, "decode takes one sequence"),
    R(translation.number_to_words, "a bool", lambda: translation.number_to_words(True), TypeError, "n must be an int, got bool"),
    R(translation.number_to_words, "a million", lambda: translation.number_to_words(1_000_000), ValueError, "n must be <= 999999"),
    R(translation.number_to_digits, "width = 0", lambda: translation.number_to_digits(3, 0), ValueError, "width must be >= 1"),
    R(translation.number_to_digits, "more digits than width", lambda: translation.number_to_digits(123, 2), ValueError, "more than width=2 digits"),
    R(translation.make_translation_data, "float seed", lambda: translation.make_translation_data(100, 10, 999, seed=1.5), TypeError, "seed must be an int"),
    R(translation.make_translation_data, "leading_zeros a string", lambda: translation.make_translation_data(100, 10, 999, leading_zeros="no"), TypeError, "leading_zeros must be a bool"),
    R(translation.make_translation_data, "unknown direction", lambda: translation.make_translation_data(100, 10, 999, direction="up"), ValueError, "direction must be one of"),
    R(translation.make_translation_data, "train and test overlap", lambda: translation.make_translation_data(900, 200, 999), ValueError, "train and test may not overlap"),
    R(translation.sentence_shape, "negative", lambda: translation.sentence_shape(-1), ValueError, "n must be >= 0, got -1"),
    # plotting
    R(plotting.plot_heatmap, "3-D matrix", lambda: plotting.plot_heatmap(floats(2, 2, 2)), ValueError, "matrix must be 2-D"),
    R(plotting.plot_heatmap, "a string", lambda: plotting.plot_heatmap("abc"), TypeError, "matrix must be a tensor or array of numbers"),
    R(plotting.plot_heatmap, "empty matrix", lambda: plotting.plot_heatmap(floats(0, 3)), ValueError, "matrix is empty"),
    R(plotting.plot_heatmap, "ax not an Axes", lambda: plotting.plot_heatmap(floats(2, 2), ax=3), TypeError, "ax must be None or a matplotlib Axes"),
    R(plotting.plot_attention, "wrong number of query labels", lambda: plotting.plot_attention(torch.rand(3, 3), query_labels=["a"]), ValueError, "query_labels must have one label per query"),
    R(plotting.plot_attention, "wrong number of key labels", lambda: plotting.plot_attention(torch.rand(3, 4), key_labels=list("abc")), ValueError, "key_labels must have one label per key"),
    R(plotting.plot_attention, "scores, not weights", lambda: plotting.plot_attention(floats(3, 3) * 10), ValueError, "weights must be attention weights in [0, 1]"),
    R(plotting.plot_attention, "labels a string", lambda: plotting.plot_attention(torch.rand(3, 3), key_labels="abc"), TypeError, "key_labels must be a list of strings"),
    R(plotting.plot_attention_heads, "cols = 0", lambda: plotting.plot_attention_heads(torch.rand(2, 3, 3), cols=0), ValueError, "cols must be >= 1, got 0"),
    R(plotting.plot_attention_heads, "2-D weights", lambda: plotting.plot_attention_heads(torch.rand(3, 3)), ValueError, "weights must be (heads, n_q, n_k)"),
    R(plotting.plot_attention_heads, "wrong number of titles", lambda: plotting.plot_attention_heads(torch.rand(2, 3, 3), titles=["a"]), ValueError, "titles must have one label per map"),
    R(plotting.plot_mask, "float tensor", lambda: plotting.plot_mask(torch.rand(2, 2)), TypeError, "mask must have dtype torch.bool"),
    R(plotting.plot_mask, "float array", lambda: plotting.plot_mask(np.random.rand(2, 2)), TypeError, "mask must be boolean"),
    R(plotting.plot_history, "a list", lambda: plotting.plot_history([1]), TypeError, "history must be a History"),
    R(plotting.plot_history, "an empty History", lambda: plotting.plot_history(training.History()), ValueError, "history is empty"),
    R(plotting.plot_history, "a dict with a non-History", lambda: plotting.plot_history({"a": history(), "b": 3}), TypeError, "history['b'] must be a History"),
    R(plotting.plot_history, "an empty dict", lambda: plotting.plot_history({}), ValueError, "history is an empty dict"),
    # variants
    R(patterns.local_mask, "window = -1", lambda: patterns.local_mask(5, -1), ValueError, "window must be >= 0"),
    R(patterns.local_mask, "n = 0", lambda: patterns.local_mask(0, 1), ValueError, "n must be >= 1"),
    R(patterns.local_mask, "device an int", lambda: patterns.local_mask(5, 1, device=3), TypeError, "device must be None, a device name"),
    R(patterns.stride_mask, "stride = 0", lambda: patterns.stride_mask(5, 0), ValueError, "stride must be >= 1"),
    R(patterns.global_mask, "an int, not a list", lambda: patterns.global_mask(5, 0), TypeError, "global_positions must be a list of positions"),
    R(patterns.global_mask, "position outside", lambda: patterns.global_mask(5, [5]), ValueError, "global_positions must lie in [0, 4]"),
    R(patterns.global_mask, "float position", lambda: patterns.global_mask(5, [1.5]), TypeError, "global_positions must have dtype integer"),
    R(patterns.local_mask, "window = 1.5", lambda: patterns.local_mask(4, 1.5), TypeError, "window must be an int, got float"),
    R(patterns.local_mask, "window = True", lambda: patterns.local_mask(4, True), TypeError, "window must be an int, got bool"),
    R(patterns.global_mask, "negative position", lambda: patterns.global_mask(4, [-1]), ValueError, "global_positions must lie in [0, 3]"),
    R(patterns.global_mask, "a float tensor", lambda: patterns.global_mask(4, torch.tensor([0.0])), TypeError, "global_positions must have dtype integer"),
    R(patterns.global_mask, "a nested list", lambda: patterns.global_mask(4, [[1]]), ValueError, "global_positions must have 1 dimensions"),
    R(local.local_attention, "window = -1", lambda: local.local_attention(*qkv(), -1), ValueError, "window must be >= 0"),
    R(local.local_attention, "cross-attention lengths", lambda: local.local_attention(floats(2, 3, 4), floats(2, 5, 4), floats(2, 5, 4), 1), ValueError, "local attention is self-attention"),
    R(local.local_attention, "need_weights 1", lambda: local.local_attention(*qkv(), 1, need_weights=1), TypeError, "need_weights must be a bool"),
    R(local.band_to_dense, "even band width", lambda: local.band_to_dense(floats(3, 4)), ValueError, "an odd last dimension"),
    R(local.band_to_dense, "integer weights", lambda: local.band_to_dense(ids(3, 3)), TypeError, "band_weights must have dtype floating"),
    R(local.band_to_dense, "1-D band", lambda: local.band_to_dense(floats(3)), ValueError, "band_weights must have shape (..., n, 2 * window + 1) (an odd last dimension), got (3,)"),
    R(linear.elu_feature_map, "a list", lambda: linear.elu_feature_map([1.0]), TypeError, "x must be a torch.Tensor"),
    R(linear.elu_feature_map, "integer tensor", lambda: linear.elu_feature_map(ids(2)), TypeError, "x must have dtype floating"),
    R(linear.linear_attention, "feature map with negative values", lambda: linear.linear_attention(*qkv(), feature_map=lambda x: x), ValueError, "feature_map must give non-negative features"),
    R(linear.linear_attention, "feature map not callable", lambda: linear.linear_attention(*qkv(), feature_map=3), TypeError, "feature_map must be callable"),
    R(linear.linear_attention, "feature map returns a list", lambda: linear.linear_attention(*qkv(), feature_map=lambda x: [1.0]), TypeError, "feature_map must return a floating tensor"),
    R(linear.linear_attention, "feature map changes the sequence length", lambda: linear.linear_attention(*qkv(), feature_map=lambda x: x.exp()[..., :1, :]), ValueError, "feature_map must keep every dimension but the last"),
    R(linear.linear_attention, "unpaired keys and values", lambda: linear.linear_attention(floats(2, 3, 4), floats(2, 3, 4), floats(2, 4, 4)), ValueError, "keys and values must come in pairs"),
    R(linear.LinearAttention, "feature_map not callable", lambda: linear.LinearAttention(8, 2, feature_map=3), TypeError, "feature_map must be callable"),
    R(linear.LinearAttention, "a mask it cannot honour", lambda: linear.LinearAttention(8, 2)(*qkv(d=8), torch.eye(4, dtype=torch.bool)), ValueError, "can only honour key padding"),
    R(linear.random_projection, "n_features = 0", lambda: linear.random_projection(0, 4), ValueError, "n_features must be >= 1"),
    R(linear.random_projection, "orthogonal 'yes'", lambda: linear.random_projection(4, 4, orthogonal="yes"), TypeError, "orthogonal must be a bool"),
    R(linear.random_projection, "integer dtype", lambda: linear.random_projection(4, 4, dtype=torch.long), TypeError, "dtype must be a floating torch.dtype"),
    R(linear.random_projection, "generator a seed", lambda: linear.random_projection(4, 4, generator=3), TypeError, "generator must be a torch.Generator"),
    R(linear.performer_features, "projection of another width", lambda: linear.performer_features(floats(2, 4), floats(3, 5)), ValueError, "projection must have shape (n_features, 4)"),
    R(linear.performer_features, "integer x", lambda: linear.performer_features(ids(2, 4), floats(3, 4)), TypeError, "x must have dtype floating"),
    R(linear.PerformerAttention, "n_features = 0", lambda: linear.PerformerAttention(8, 2, n_features=0), ValueError, "n_features must be >= 1"),
    R(sinkhorn.sinkhorn, "integer scores", lambda: sinkhorn.sinkhorn(ids(2, 3, 3)), TypeError, "log_scores must have dtype floating"),
    R(sinkhorn.sinkhorn, "not square", lambda: sinkhorn.sinkhorn(floats(3, 4)), ValueError, "log_scores must have shape (..., n, n)"),
    R(sinkhorn.sinkhorn, "n_iters = 0", lambda: sinkhorn.sinkhorn(floats(3, 3), n_iters=0), ValueError, "n_iters must be >= 1"),
    R(sinkhorn.SinkhornAttention, "temperature = nan", lambda: sinkhorn.SinkhornAttention(8, 2, temperature=NAN), ValueError, "temperature must be a finite number > 0"),
    R(sinkhorn.SinkhornAttention, "block_size = 0", lambda: sinkhorn.SinkhornAttention(8, 2, block_size=0), ValueError, "block_size must be >= 1"),
    R(sinkhorn.SinkhornAttention, "causal mask", lambda: sinkhorn.SinkhornAttention(8, 2, block_size=2)(*qkv(d=8), masks.causal_mask(4)[None, None]), ValueError, "can only honour key padding"),
    # issue 31: ListOps
    R(listops.listops_task, "min_len > max_len", lambda: listops.listops_task(4, 64, min_len=65), ValueError, "min_len must be <= max_len=64, got min_len=65"),
    R(listops.listops_task, "max_len below the shortest expression", lambda: listops.listops_task(4, 3), ValueError, "max_len must be >= 4"),
    R(listops.listops_task, "max_args = 1", lambda: listops.listops_task(4, 64, max_args=1), ValueError, "max_args must be >= 2"),
    R(listops.listops_task, "float n_examples", lambda: listops.listops_task(4.0, 64), TypeError, "n_examples must be an int"),
    R(listops.listops_encode, "unknown token", lambda: listops.listops_encode("[MAX 1 x ]"), ValueError, "expression must use the tokens"),
    R(listops.listops_decode, "id out of range", lambda: listops.listops_decode([3, 99]), ValueError, "ids must be ints in 0 ... 15"),
    R(listops.listops_value, "digit 12", lambda: listops.listops_value(("[MAX", [1, 12])), ValueError, "tree[1][1] must be a digit 0 ... 9, got 12"),
    R(listops.listops_value, "unknown operator", lambda: listops.listops_value(("[PROD", [1, 2])), ValueError, "operator in"),
    R(listops.listops_class_shares, "float labels", lambda: listops.listops_class_shares(torch.zeros(3)), TypeError, "labels must be an int64 tensor"),
    # issue 20: the binding task, the content-blind baseline, FNet, Efficient Attention
    R(binding.binding_task, "seq_len too short", lambda: binding.binding_task(4, 20), ValueError, "seq_len must hold 4 true pairs"),
    R(binding.binding_task, "n_values = 1", lambda: binding.binding_task(4, 32, n_values=1), ValueError, "n_values must be >= 2"),
    R(binding.binding_tokens, "n_pairs = 0", lambda: binding.binding_tokens(0), ValueError, "n_pairs must be >= 1"),
    R(binding.binding_vocab_size, "n_filler 'x'", lambda: binding.binding_vocab_size(4, 4, "x"), TypeError, "n_filler must be"),
    R(attention_free.uniform_attention, "integer v", lambda: attention_free.uniform_attention(ids(2, 4)), TypeError, "v must have dtype floating"),
    R(attention_free.uniform_attention, "key_mask of another length", lambda: attention_free.uniform_attention(floats(4, 3), torch.ones(5, dtype=torch.bool)), ValueError, "key_mask must have shape"),
    R(attention_free.fourier_mixing, "1-D x", lambda: attention_free.fourier_mixing(floats(4)), ValueError, "x must have at least 2 dimensions"),
    R(attention_free.UniformAttention, "causal mask", lambda: attention_free.UniformAttention(8, 2)(*qkv(d=8), masks.causal_mask(4)[None, None]), ValueError, "can only honour key padding"),
    R(attention_free.FourierMixing, "d_model = 0", lambda: attention_free.FourierMixing(0), ValueError, "d_model must be >= 1"),
    R(efficient.efficient_attention, "k of another width", lambda: efficient.efficient_attention(floats(3, 4), floats(3, 5), floats(3, 4)), ValueError, "k"),
    R(efficient.EfficientAttention, "causal mask", lambda: efficient.EfficientAttention(8, 2)(*qkv(d=8), masks.causal_mask(4)[None, None]), ValueError, "can only honour key padding"),
    R(low_rank.LinformerAttention, "seq_len = 0", lambda: low_rank.LinformerAttention(8, 2, seq_len=0), ValueError, "seq_len must be >= 1"),
    R(low_rank.LinformerAttention, "share_kv 'no'", lambda: low_rank.LinformerAttention(8, 2, seq_len=4, share_kv="no"), TypeError, "share_kv must be a bool"),
    R(low_rank.LinformerAttention, "longer than seq_len", lambda: low_rank.LinformerAttention(8, 2, seq_len=3, k=2)(*qkv(d=8)), ValueError, "was built for seq_len=3"),
    R(low_rank.CompressedAttention, "stride = 0", lambda: low_rank.CompressedAttention(8, 2, stride=0), ValueError, "stride must be >= 1"),
    R(low_rank.CompressedAttention, "causal mask", lambda: low_rank.CompressedAttention(8, 2, stride=2)(*qkv(d=8), masks.causal_mask(4)[None, None]), ValueError, "can only honour key padding"),
    R(synthesizer.DenseSynthesizerAttention, "hidden = 0", lambda: synthesizer.DenseSynthesizerAttention(8, 2, seq_len=4, hidden=0), ValueError, "hidden must be >= 1"),
    R(synthesizer.DenseSynthesizerAttention, "longer than seq_len", lambda: synthesizer.DenseSynthesizerAttention(8, 2, seq_len=3)(*qkv(d=8)), ValueError, "was built for seq_len=3"),
    R(synthesizer.RandomSynthesizerAttention, "fixed 'yes'", lambda: synthesizer.RandomSynthesizerAttention(8, 2, seq_len=4, fixed="yes"), TypeError, "fixed must be a bool"),
    R(synthesizer.RandomSynthesizerAttention, "seq_len = 0", lambda: synthesizer.RandomSynthesizerAttention(8, 2, seq_len=0), ValueError, "seq_len must be >= 1"),
    # variants (issue 18): the rule for what a variant cannot do, seeds, empty inputs, ids
    *[R(cls, "float64 input to a float32 module", lambda cls=cls: variant(cls)(*qkv(d=8, n=4, batch=2, dtype=torch.float64)), TypeError, "must have the module's dtype torch.float32, got torch.float64") for cls in VARIANTS],
    R(clustering.clustered_attention, "(batch, n) ids for (batch, heads, n, d) queries", lambda: clustering.clustered_attention(floats(2, 1, 4, 6), floats(2, 1, 4, 6), floats(2, 1, 4, 6), torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long), 2), ValueError, "query_clusters must have shape (..., rounds, 4) = (2, 1, rounds, 4)"),
    R(clustering.clustered_attention, "(batch, heads, n) ids without the rounds", lambda: clustering.clustered_attention(floats(2, 1, 4, 6), floats(2, 1, 4, 6), floats(2, 1, 4, 6), torch.zeros(2, 1, 4, dtype=torch.long), torch.zeros(2, 1, 4, dtype=torch.long), 2), ValueError, "add the rounds dimension"),
    R(clustering.cluster_mask, "batches do not broadcast", lambda: clustering.cluster_mask(torch.zeros(3, 1, 4, dtype=torch.long), torch.zeros(2, 1, 4, dtype=torch.long)), ValueError, "must broadcast"),
    R(clustering.random_rotations, "float seed", lambda: clustering.random_rotations(4, 2, seed=1.5), TypeError, "seed must be an int"),
    R(clustering.random_rotations, "bool seed", lambda: clustering.random_rotations(4, 2, seed=True), TypeError, "seed must be an int"),
    R(clustering.kmeans, "str seed", lambda: clustering.kmeans(floats(5, 3), 2, seed="a"), TypeError, "seed must be an int"),
    R(clustering.LSHAttention, "float seed", lambda: clustering.LSHAttention(8, 2, seed=1.5), TypeError, "seed must be an int"),
    R(clustering.RoutingAttention, "str seed", lambda: clustering.RoutingAttention(8, 2, seed="0"), TypeError, "seed must be an int"),
    R(sparse.global_attention, "global_positions None", lambda: sparse.global_attention(*qkv(), None), TypeError, "global_positions must be a list of positions"),
    R(sparse.global_attention, "global_positions a str", lambda: sparse.global_attention(*qkv(), "0"), TypeError, "global_positions must be a list of positions"),
    R(sparse.global_attention, "q a list", lambda: sparse.global_attention([1.0], *qkv()[1:], [0]), TypeError, "q must be a torch.Tensor"),
    R(sparse.global_attention, "q 1-D", lambda: sparse.global_attention(floats(4), *qkv()[1:], [0]), ValueError, "q must"),
    R(patterns.random_mask, "unknown device", lambda: patterns.random_mask(4, 1, device="tpu0"), ValueError, "device"),
    R(patterns.random_mask, "device a float", lambda: patterns.random_mask(4, 1, device=3.5), TypeError, "device must be None, a device name"),
    R(linear.LinearAttention, "a negative feature map", lambda: linear.LinearAttention(8, 2, feature_map=lambda x: x)(*qkv(d=8)), ValueError, "feature_map must give non-negative features"),
    # data: section 07
    R(long_range.retrieval_vocab_size, "n_keys = 0", lambda: long_range.retrieval_vocab_size(0), ValueError, "n_keys must be >= 1"),
    R(long_range.retrieval_task, "float seed", lambda: long_range.retrieval_task(4, 16, seed=1.5), TypeError, "seed must be an int"),
    R(long_range.retrieval_task, "sequence too short for its pairs", lambda: long_range.retrieval_task(4, 2), ValueError, "seq_len must be >= 2 * n_keys"),
    R(patterns.dilated_mask, "dilation = 0", lambda: patterns.dilated_mask(5, 1, 0), ValueError, "dilation must be >= 1"),
    R(patterns.random_keys, "float seed", lambda: patterns.random_keys(4, 2, seed=1.5), TypeError, "seed must be an int"),
    R(patterns.random_mask, "n = 0", lambda: patterns.random_mask(0, 1), ValueError, "n must be >= 1"),
    R(patterns.head_patterns, "no pattern", lambda: patterns.head_patterns([]), TypeError, "patterns must be a non-empty list"),
    R(patterns.head_patterns, "float pattern", lambda: patterns.head_patterns([torch.rand(3, 3)]), TypeError, "patterns[0] must have dtype bool"),
    R(patterns.receptive_field, "float mask", lambda: patterns.receptive_field(torch.eye(3), 1), TypeError, "mask must have dtype bool"),
    R(base.PatternAttention, "d_model not divisible", lambda: base.PatternAttention(6, 4), ValueError, "not divisible by num_heads=4"),
    R(base.AttentionVariant, "d_model not divisible", lambda: base.AttentionVariant(6, 4), ValueError, "not divisible by num_heads=4"),
    R(local.local_attention, "float key mask", lambda: local.local_attention(*qkv(), 1, key_mask=torch.rand(2, 4)), TypeError, "key_mask must have dtype bool"),
    R(local.LocalAttention, "window = -1", lambda: local.LocalAttention(8, 2, window=-1), ValueError, "window must be >= 0"),
    R(sparse.strided_attention, "stride = 0", lambda: sparse.strided_attention(floats(2, 4, 6), floats(2, 4, 6), floats(2, 4, 6), 0), ValueError, "stride must be >= 1"),
    R(sparse.sparse_attention, "float key_index", lambda: sparse.sparse_attention(floats(2, 4, 6), floats(2, 4, 6), floats(2, 4, 6), torch.rand(4, 2)), TypeError, "key_index must have dtype integer"),
    R(sparse.global_attention, "position outside", lambda: sparse.global_attention(floats(2, 4, 6), floats(2, 4, 6), floats(2, 4, 6), [7]), ValueError, "global_positions must lie in [0, 3]"),
    R(sparse.LongformerAttention, "dilation 0", lambda: sparse.LongformerAttention(8, 2, dilations=[0, 1]), ValueError, "must be >= 1, got 0"),
    R(sparse.LongformerAttention, "window = -1", lambda: sparse.LongformerAttention(8, 2, window=-1), ValueError, "window must be >= 0"),
    R(sparse.BigBirdAttention, "num_random = -1", lambda: sparse.BigBirdAttention(8, 2, num_random=-1), ValueError, "num_random must be >= 0"),
    R(sparse.BigBirdAttention, "float seed", lambda: sparse.BigBirdAttention(8, 2, seed=1.5), TypeError, "seed must be an int"),
    R(clustering.lsh_buckets, "integer x", lambda: clustering.lsh_buckets(ids(2, 3), floats(3, 2)), TypeError, "x must have dtype floating"),
    R(clustering.lsh_buckets, "feature sizes differ", lambda: clustering.lsh_buckets(floats(2, 3), floats(4, 2)), ValueError, "with the same d"),
    R(clustering.random_rotations, "odd n_buckets", lambda: clustering.random_rotations(4, 3), ValueError, "n_buckets must be even"),
    R(clustering.kmeans, "n_clusters = 0", lambda: clustering.kmeans(floats(5, 3), 0), ValueError, "n_clusters must be >= 1"),
    R(clustering.cluster_mask, "float clusters", lambda: clustering.cluster_mask(floats(4), floats(4)), TypeError, "query_clusters must have dtype integer"),
    R(clustering.clustered_attention, "cluster id outside", lambda: clustering.clustered_attention(floats(2, 4, 6), floats(2, 4, 6), floats(2, 4, 6), torch.full((2, 1, 4), 5), torch.zeros(2, 1, 4, dtype=torch.long), 2), ValueError, "query_clusters must lie in [0, 1]"),
    R(clustering.LSHAttention, "n_hashes = 0", lambda: clustering.LSHAttention(8, 2, n_hashes=0), ValueError, "n_hashes must be >= 1"),
    R(clustering.RoutingAttention, "decay = nan", lambda: clustering.RoutingAttention(8, 2, decay=NAN), ValueError, "decay must be in [0, 1)"),
    # training (issue 12 owns the checks of fit/evaluate: rows for what is refused today)
    R(training.accuracy, "float targets", lambda: training.accuracy(floats(2, 3, 4), floats(2, 3)), TypeError, "targets (accuracy) must have dtype integer"),
    R(training.cross_entropy, "targets of another shape, same numel", lambda: training.cross_entropy(floats(2, 3, 4), ids(3, 2, high=4)), ValueError, "do not match"),
    R(decoding.sentence_bleu, "unhashable tokens", lambda: decoding.sentence_bleu([[1], [2]], [[1], [2]]), TypeError, "tokens must be hashable"),
    R(training.lr_schedule, "not an optimiser", lambda: training.lr_schedule("adam", 10), TypeError, "optimizer must be a torch.optim.Optimizer"),
    R(training.lr_schedule, "total_steps = 0", lambda: training.lr_schedule(adamw(), 0), ValueError, "total_steps must be >= 1"),
    R(training.lr_schedule, "unknown schedule", lambda: training.lr_schedule(adamw(), 10, "linear"), ValueError, "schedule must be one of"),
    R(training.lr_schedule, "warmup = 1", lambda: training.lr_schedule(adamw(), 10, warmup=1.0), ValueError, "warmup is a fraction"),
    R(training.lr_schedule, "negative warmup", lambda: training.lr_schedule(adamw(), 10, warmup=-0.1), ValueError, "warmup must be"),
    R(training.fit, "betas a float", lambda: training.fit(tagger(), (ids(4, 3), ids(4, 3, high=3)), epochs=1, betas=0.9, progress=False), TypeError, "betas must be a pair (beta1, beta2)"),
    R(training.fit, "beta2 = 1", lambda: training.fit(tagger(), (ids(4, 3), ids(4, 3, high=3)), epochs=1, betas=(0.9, 1.0), progress=False), ValueError, "betas[1] must be in [0, 1)"),
    R(training.fit, "beta1 negative", lambda: training.fit(tagger(), (ids(4, 3), ids(4, 3, high=3)), epochs=1, betas=(-0.1, 0.9), progress=False), ValueError, "betas[0] must be a finite number >= 0"),
    R(training.fit, "epochs = 0", lambda: training.fit(tagger(), (ids(4, 3), ids(4, 3, high=3)), epochs=0, progress=False), ValueError, "epochs must be >= 1"),
    R(training.fit, "batch_size = 0", lambda: training.fit(tagger(), (ids(4, 3), ids(4, 3, high=3)), epochs=1, batch_size=0, progress=False), ValueError, "batch_size must be >= 1"),
    R(training.fit, "data a list", lambda: training.fit(tagger(), [ids(4, 3)], epochs=1, progress=False), TypeError, "train_data must be a tuple of tensors"),
    R(training.fit, "examples do not pair up", lambda: training.fit(tagger(), (ids(4, 3), ids(5, 3, high=3)), epochs=1, progress=False), ValueError, "need the same first dimension"),
    R(training.fit, "grad_clip = 0", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, grad_clip=0), ValueError, "grad_clip must be a finite number > 0, got 0"),
    R(training.fit, "grad_clip = -1.0", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, grad_clip=-1.0), ValueError, "grad_clip must be a finite number > 0, got -1.0"),
    R(training.fit, "grad_clip = inf", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, grad_clip=INF), ValueError, "grad_clip must be a finite number > 0, got inf"),
    R(training.fit, "lr = 0.0", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, lr=0.0), ValueError, "lr must be a finite number > 0, got 0.0"),
    R(training.fit, "lr = nan", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, lr=NAN), ValueError, "lr must be a finite number > 0, got nan"),
    R(training.fit, "lr a string", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, lr="1e-3"), TypeError, "lr must be a number, got str"),
    R(training.fit, "weight_decay = -0.1", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, weight_decay=-0.1), ValueError, "weight_decay must be a finite number >= 0"),
    R(training.fit, "warmup = 1.5", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, warmup=1.5), ValueError, "warmup is a fraction of the steps, in [0, 1), got 1.5"),
    R(training.fit, "seed = 1.5", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, seed=1.5), TypeError, "seed must be an int, got float"),
    R(training.fit, "ignore_index = 1.0", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, ignore_index=1.0), TypeError, "ignore_index must be None or an int, got float"),
    R(training.fit, "progress 'yes'", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress="yes"), TypeError, "progress must be a bool"),
    R(training.fit, "forward_fn = 3", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, forward_fn=3), TypeError, "forward_fn must be None or a callable"),
    R(training.fit, "after_step = 3", lambda: training.fit(nn.Linear(4, 2), (floats(8, 4), ids(8, high=2)), epochs=1, progress=False, after_step=3), TypeError, "after_step must be None or a callable"),
    R(training.evaluate, "one tensor only", lambda: training.evaluate(tagger(), (ids(4, 3),)), TypeError, "data must be a tuple of tensors"),
    R(training.accuracy, "shapes do not match", lambda: training.accuracy(floats(3, 4), ids(4)), ValueError, "do not match"),
    R(training.History, "final_accuracy of an empty history", lambda: training.History().final_accuracy, ValueError, "the history is empty"),
    # decoding
    R(decoding.greedy_decode, "model without encode/decode", lambda: decoding.greedy_decode(nn.Linear(2, 2), ids(2, 3), 4, 1, 2, 0), TypeError, "model must have an `encode` method"),
    R(decoding.greedy_decode, "bos_id == eos_id", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 4, 1, 1, 0), ValueError, "three different tokens"),
    R(decoding.greedy_decode, "float src", lambda: decoding.greedy_decode(seq2seq(), floats(2, 3), 4, 1, 2, 0), TypeError, "src must have dtype integer"),
    R(decoding.beam_search, "empty src", lambda: decoding.beam_search(seq2seq(), ids(2, 0), 2, 4, 1, 2, 0), ValueError, "src must hold at least one token"),
    R(decoding.sample_decode, "temperature = 0", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, temperature=0.0), ValueError, "temperature must be a finite number > 0"),
    R(decoding.sample_decode, "top_k = 0", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, top_k=0), ValueError, "top_k must be >= 1"),
    R(decoding.sample_decode, "generator a seed", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, generator=0), TypeError, "generator must be a torch.Generator"),
    R(decoding.sample_decode, "temperature = -1", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, temperature=-1.0), ValueError, "temperature must be a finite number > 0, got -1.0"),
    R(decoding.sample_decode, "temperature = inf", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, temperature=INF), ValueError, "temperature must be a finite number > 0, got inf"),
    R(decoding.sample_decode, "temperature a string", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, temperature="hot"), TypeError, "temperature must be a number, got str"),
    R(decoding.sample_decode, "top_k = 1.5", lambda: decoding.sample_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, top_k=1.5), TypeError, "top_k must be an int, got float"),
    R(decoding.sample_decode, "a model without encode", lambda: decoding.sample_decode(object(), ids(2, 1), 3, 1, 2, 0), TypeError, "model must have an `encode` method"),
    R(decoding.sequence_log_prob, "model an int", lambda: decoding.sequence_log_prob(3, ids(2, 3), ids(2, 3), 1, 2, 0), TypeError, "model must have an `encode` method"),
    R(decoding.exact_match, "an int", lambda: decoding.exact_match(3, 4), TypeError, "predictions must be a 2-D tensor or a list of sequences"),
    R(decoding.sentence_bleu, "an int candidate", lambda: decoding.sentence_bleu(3, 4), TypeError, "candidate must be a list of tokens"),
    R(training.default_forward, "batch of one tensor", lambda: training.default_forward(tagger(), (ids(2, 3),)), TypeError, "batch must be a tuple (inputs..., targets)"),
    R(training.default_forward, "batch a tensor", lambda: training.default_forward(tagger(), ids(2, 3)), TypeError, "batch must be a tuple (inputs..., targets)"),
    # variants: the helpers section 06 derives
    R(local.LocalAttention, "float mask", lambda: local.LocalAttention(8, 2)(*qkv(d=8), floats(1, 1, 1, 4)), TypeError, "mask must have dtype torch.bool"),
    R(local.LocalAttention, "3-D mask", lambda: local.LocalAttention(8, 2)(*qkv(d=8), bools(2, 1, 4)), ValueError, "3-D"),
    R(clustering.nearest_centroid, "centroids of another width", lambda: clustering.nearest_centroid(floats(5, 3), floats(2, 4)), ValueError, "centroids must have the width d = 3"),
    R(clustering.nearest_centroid, "no centroid", lambda: clustering.nearest_centroid(floats(5, 3), floats(0, 3)), ValueError, "centroids (..., C >= 1, d)"),
    R(clustering.nearest_centroid, "integer x", lambda: clustering.nearest_centroid(ids(5, 3), floats(2, 3)), TypeError, "x must have dtype floating"),
    R(clustering.nearest_centroid, "batches do not broadcast", lambda: clustering.nearest_centroid(floats(2, 5, 3), floats(3, 2, 3)), ValueError, "must broadcast"),
    R(sparse.sparse_pattern, "key index past n", lambda: sparse.sparse_pattern(4, torch.full((4, 2), 4)), ValueError, "key_index entries must lie in [-1, 3]"),
    R(sparse.sparse_pattern, "key index below -1", lambda: sparse.sparse_pattern(4, torch.full((4, 2), -2)), ValueError, "key_index entries must lie in [-1, 3]"),
    R(sparse.sparse_pattern, "rows are not n", lambda: sparse.sparse_pattern(4, torch.zeros(3, 2, dtype=torch.long)), ValueError, "key_index must have shape (..., n=4, slots)"),
    # exercises: the release tool
    R(utils.check_path, "an int", lambda: utils.check_path(3, "where"), TypeError, "where must be a path"),
    R(exercises.find_regions, "an int source", lambda: exercises.find_regions(3), TypeError, "source must be a cell's source"),
    R(exercises.find_regions, "a list of ints", lambda: exercises.find_regions([1, 2]), TypeError, "source must be a cell's source"),
    R(exercises.strip_solutions, "unknown cell type", lambda: exercises.strip_solutions("x = 1", "python"), ValueError, "cell_type must be 'code', 'markdown' or 'raw'"),
    R(exercises.find_exercises, "a dict", lambda: exercises.find_exercises({"cells": []}), TypeError, "nb must be a notebook read with nbformat.read"),
    R(exercises.annotate_notebook, "an int", lambda: exercises.annotate_notebook(3), TypeError, "nb must be a notebook read with nbformat.read"),
    R(exercises.release_notebook, "an int notebook", lambda: exercises.release_notebook(3, 4), TypeError, "nb must be a notebook read with nbformat.read"),
    R(exercises.release_notebook, "an int name", lambda: exercises.release_notebook(notebook(), 4), TypeError, "name must be a non-empty str"),
    R(exercises.release, "source an int", lambda: exercises.release(3, "out"), TypeError, "source must be a path"),
    R(exercises.release, "keep_solutions a string", lambda: exercises.release("notebooks", "out", keep_solutions="no"), TypeError, "keep_solutions must be a bool"),
    R(sandbox_kernel.install, "user a string", lambda: sandbox_kernel.install(user="yes"), TypeError, "user must be a bool"),
    R(sandbox_kernel.install, "prefix an int", lambda: sandbox_kernel.install(prefix=3), TypeError, "prefix must be None or a non-empty path"),
    R(sandbox_kernel.install, "user and prefix", lambda: sandbox_kernel.install(user=True, prefix="/tmp/x"), ValueError, "user and prefix are exclusive"),
    R(sandbox_kernel.launch_command, "inner an int", lambda: sandbox_kernel.launch_command(3, "."), TypeError, "inner must be a path"),
    R(sandbox_kernel.launch_command, "limits a dict", lambda: sandbox_kernel.launch_command("k", ".", {"memory": 1}), TypeError, "limits must be None or a sandbox Limits"),
    R(sandbox_kernel.launch_command, "info_fd a string", lambda: sandbox_kernel.launch_command("k", ".", info_fd="3"), TypeError, "info_fd must be None or a file descriptor"),
    R(course_tools.clone_root, "an int command", lambda: course_tools.clone_root(3), TypeError, "command must be a non-empty str"),
    R(course.stored_benchmark, "a path, not a name", lambda: course.stored_benchmark("benchmarks/long_range.json"), ValueError, "name must be a file name in benchmarks/"),
    R(languages.normalise_language, "an int", lambda: languages.normalise_language(3), TypeError, "language must be a str"),
    R(languages.normalise_language, "fr", lambda: languages.normalise_language("fr"), ValueError, "language must be one of en, zh-Hans (zh-CN), zh-Hant (zh-TW)"),
    R(languages.submission_language, "an int", lambda: languages.submission_language(3), TypeError, "folder must be a path (str or os.PathLike), got int"),
    R(course.stored_benchmark, "an int name", lambda: course.stored_benchmark(3), ValueError, "name must be a file name in benchmarks/"),
    # grading
    R(grading.grade_submission, "path an int", lambda: grading.grade_submission(3), TypeError, "path must be a path"),
    R(grading.grade_submission, "timeout = -1", lambda: grading.grade_submission("missing.ipynb", timeout=-1), ValueError, "timeout must be a finite number > 0"),
    R(grading.grade_submission, "timeout a string", lambda: grading.grade_submission("missing.ipynb", timeout="60"), TypeError, "timeout must be a number > 0"),
    R(grading.grade_submission, "course not a folder", lambda: grading.grade_submission("missing.ipynb", course="no/such/folder"), ValueError, "course must be the folder"),
    R(grading.grade_paths, "one path, not a list", lambda: grading.grade_paths("submission.ipynb"), TypeError, "paths must be a list of paths"),
    R(grading.grade_paths, "empty list", lambda: grading.grade_paths([]), ValueError, "paths must name at least one"),
    R(grading.grade_paths, "an int in the list", lambda: grading.grade_paths([3]), TypeError, "paths[0] must be a path"),
    R(grading.format_table, "a list", lambda: grading.format_table([]), TypeError, "report must be a report dict"),
    R(grading.format_table, "keys missing", lambda: grading.format_table({"score": 1}), ValueError, "missing ["),
    R(grading.format_csv, "one report, not a list", lambda: grading.format_csv({"score": 1}), TypeError, "reports must be a list"),
    R(grading.format_nbgrader_csv, "one report, not a list", lambda: grading.format_nbgrader_csv({"score": 1}, ["alice"]), TypeError, "reports must be a list"),
    R(grading.format_nbgrader_csv, "no id per report", lambda: grading.format_nbgrader_csv([_REPORT], []), ValueError, "student_ids must be a list of one id per report (1)"),
    R(grading.format_nbgrader_csv, "an id that is a formula", lambda: grading.format_nbgrader_csv([_REPORT], ["=1+1"]), ValueError, "student_ids[0] must be a plain student id"),
    R(grading.grade_submission, "sandbox a string", lambda: grading.grade_submission("missing.ipynb", sandbox="no"), TypeError, "sandbox must be a bool"),
    R(grading.format_csv, "a report without keys", lambda: grading.format_csv([{}]), ValueError, "reports[0] must be a report"),
    # variants.chunked (issue 19): Reformer's chunks and the balanced Routing clusters.
    R(chunked.lsh_chunked_attention, "chunk_size 0", lambda: chunked.lsh_chunked_attention(floats(1, 4, 6), floats(1, 4, 6), floats(1, 4, 6), torch.zeros(1, 4, dtype=torch.long), 0), ValueError, "chunk_size"),
    R(chunked.lsh_chunked_attention, "buckets for another length", lambda: chunked.lsh_chunked_attention(floats(1, 4, 6), floats(1, 4, 6), floats(1, 4, 6), torch.zeros(1, 5, dtype=torch.long), 2), ValueError, "buckets must have shape"),
    R(chunked.lsh_chunk_mask, "float buckets", lambda: chunked.lsh_chunk_mask(floats(1, 4), 2), TypeError, "buckets"),
    R(chunked.hash_buckets, "block 0", lambda: chunked.hash_buckets(floats(4, 6), floats(1, 6, 2), block=0), ValueError, "block"),
    R(chunked.balanced_members, "size larger than n", lambda: chunked.balanced_members(floats(4, 6), floats(2, 6), 5), ValueError, "size must be at most"),
    R(chunked.membership_mask, "a position twice", lambda: chunked.membership_mask(torch.tensor([[1, 1]]), torch.tensor([[0, 1]]), 4), ValueError, "twice"),
    R(chunked.balanced_routing_attention, "a position out of range", lambda: chunked.balanced_routing_attention(floats(4, 6), floats(4, 6), floats(4, 6), torch.tensor([[0, 9]]), torch.tensor([[0, 1]])), ValueError, "query_members must hold positions"),
    R(chunked.balanced_routing_attention, "zero clusters", lambda: chunked.balanced_routing_attention(floats(4, 6), floats(4, 6), floats(4, 6), torch.zeros(0, 2, dtype=torch.long), torch.zeros(0, 2, dtype=torch.long)), ValueError, "must list at least one cluster: shape (..., clusters >= 1, size), got (0, 2)"),
    R(chunked.balanced_routing_attention, "clusters of the queries and keys differ", lambda: chunked.balanced_routing_attention(floats(4, 6), floats(4, 6), floats(4, 6), torch.tensor([[0, 1]]), torch.tensor([[0, 1], [2, 3]])), ValueError, "must list the same clusters, got (1, 2) and (2, 2)"),
    R(chunked.drop_self, "a (n, m) mask", lambda: chunked.drop_self(torch.ones(3, 4, dtype=torch.bool)), ValueError, "square mask"),
    R(chunked.ReformerAttention, "chunk_size 0", lambda: chunked.ReformerAttention(8, 2, chunk_size=0), ValueError, "chunk_size"),
    R(chunked.BalancedRoutingAttention, "cluster_size 0", lambda: chunked.BalancedRoutingAttention(8, 2, cluster_size=0), ValueError, "cluster_size"),
]

# Issue 23 (H23): the digits data, the vision models and the attention explorer.
from lectures_lib import explorer, vision  # noqa: E402
from lectures_lib.data import digits  # noqa: E402

_VIEW = dict(name="v", maps=torch.full((1, 1, 2, 2), 0.5), query_labels=["a", "b"])
ROWS += [
    R(digits.digits_splits, "test_fraction = 0", lambda: digits.digits_splits(0.0), ValueError, "test_fraction must lie strictly between 0 and 1"),
    R(digits.digits_splits, "test_fraction a string", lambda: digits.digits_splits("0.2"), TypeError, "test_fraction must be a float"),
    R(digits.digits_splits, "seed a float", lambda: digits.digits_splits(seed=1.5), TypeError, "seed"),
    R(digits.image_patches, "2-D images", lambda: digits.image_patches(torch.zeros(8, 8)), ValueError, "images must have 3 dimensions"),
    R(digits.image_patches, "integer images", lambda: digits.image_patches(torch.zeros(1, 8, 8, dtype=torch.int64)), TypeError, "images must have dtype floating"),
    R(digits.image_patches, "patch_size does not divide", lambda: digits.image_patches(torch.zeros(1, 8, 8), 3), ValueError, "patch_size must divide both sides"),
    R(digits.patch_grid, "patch_size does not divide", lambda: digits.patch_grid(8, 3), ValueError, "patch_size=3 does not divide image_size=8"),
    R(vision.PatchClassifier, "n_patches = 0", lambda: vision.PatchClassifier(0, 4, 10), ValueError, "n_patches must be >= 1"),
    R(vision.PatchClassifier, "pooling unknown", lambda: vision.PatchClassifier(16, 4, 10, pooling="max"), ValueError, "pooling must be one of"),
    R(vision.PatchClassifier, "patches of the wrong shape", lambda: vision.PatchClassifier(16, 4, 10)(torch.zeros(2, 9, 4)), ValueError, "patches must have shape (batch, 16, 4)"),
    R(vision.PixelMLP, "images of the wrong size", lambda: vision.PixelMLP(64, 10)(torch.zeros(2, 7, 7)), ValueError, "the network expects 64"),
    R(vision.SmallCNN, "images of the wrong size", lambda: vision.SmallCNN(8, 10)(torch.zeros(2, 7, 7)), ValueError, "images must have shape (batch, 8, 8)"),
    R(explorer.check_view, "not a view", lambda: explorer.check_view("maps"), TypeError, "views[0] must be an AttentionView"),
    R(explorer.AttentionView, "3-D maps", lambda: explorer.check_view(explorer.AttentionView(**{**_VIEW, "maps": torch.zeros(1, 2, 2)})), ValueError, "maps must have 4 dimensions"),
    R(explorer.AttentionView, "labels of the wrong length", lambda: explorer.check_view(explorer.AttentionView(**{**_VIEW, "query_labels": ["a"]})), ValueError, "query_labels has 1 labels"),
    R(explorer.AttentionExplorer, "logits, not weights", lambda: explorer.AttentionExplorer([explorer.AttentionView(**{**_VIEW, "maps": torch.full((1, 1, 2, 2), 3.0)})]), ValueError, "after the softmax"),
    R(explorer.AttentionExplorer, "no views", lambda: explorer.AttentionExplorer([]), TypeError, "views must be a non-empty list"),
]

# Issue 40: a "predict first" experiment waits for the prediction.
from lectures_lib import predict  # noqa: E402

ROWS += [
    R(predict.after_prediction, "a prediction that is not a function", lambda: predict.after_prediction("my guess", lambda: None), TypeError, "prediction must be a function"),
    R(predict.after_prediction, "an experiment that is not a function", lambda: predict.after_prediction(lambda: "x", None), TypeError, "experiment must be a function"),
]

# Issue 39: section 08's real sentences.
from lectures_lib.data import sentences  # noqa: E402

ROWS += [
    R(sentences.load_sentences, "path an int", lambda: sentences.load_sentences(3), TypeError, "path must be a path"),
    R(sentences.split_sentences, "n_test 0", lambda: sentences.split_sentences(n_test=0), ValueError, "n_test must be a positive int"),
    R(sentences.split_sentences, "everything for testing", lambda: sentences.split_sentences(n_test=5000), ValueError, "leaves no training pairs"),
    R(sentences.split_sentences, "a float seed", lambda: sentences.split_sentences(seed=0.5), TypeError, "seed must be an int"),
    R(sentences.split_sentences, "pairs of strings", lambda: sentences.split_sentences(["a", "b"]), TypeError, "pairs must be SentencePair records"),
    R(sentences.secret_split, "an empty secret", lambda: sentences.secret_split(""), ValueError, "secret must be a non-empty string"),
    R(sentences.secret_split, "a secret not a str", lambda: sentences.secret_split(1234), TypeError, "secret must be a str"),
    R(sentences.chinese_characters, "a list", lambda: sentences.chinese_characters(["你好"]), TypeError, "text must be a str"),
    R(sentences.english_words, "None", lambda: sentences.english_words(None), TypeError, "text must be a str"),
    R(sentences.SentenceVocab, "an int", lambda: sentences.SentenceVocab(3), TypeError, "tokens must be a list of token strings"),
    R(sentences.SentenceVocab, "<unk> given again", lambda: sentences.SentenceVocab(["<unk>"]), ValueError, "tokens must be unique"),
    R(sentences.build_vocab, "min_count 0", lambda: sentences.build_vocab([["a"]], min_count=0), ValueError, "min_count must be >= 1"),
    R(sentences.build_vocab, "a string per sentence", lambda: sentences.build_vocab(["a b"]), TypeError, "token_lists[i] must be a list of non-empty strings"),
    R(sentences.pad_batch, "width too small", lambda: sentences.pad_batch([[4, 5, 6]], width=2), ValueError, "width must be >= the longest row (3)"),
    R(sentences.pad_batch, "rows of strings", lambda: sentences.pad_batch([["a"]]), TypeError, "rows must be a non-empty list of lists of token ids"),
    R(sentences.bmes_tags, "a sentence, not its words", lambda: sentences.bmes_tags("老师好"), TypeError, "words must be a list of non-empty strings"),
    R(sentences.words_from_tags, "a tag too few", lambda: sentences.words_from_tags(["我", "们"], ["B"]), ValueError, "one tag per character: 2 characters, 1 tags"),
    R(sentences.words_from_tags, "an unknown tag", lambda: sentences.words_from_tags(["我", "们"], ["B", "X"]), ValueError, "tags must be among"),
    R(sentences.max_match, "a list lexicon", lambda: sentences.max_match("老师", ["老师"]), TypeError, "lexicon must be a set of words"),
    R(sentences.max_match, "max_word 0", lambda: sentences.max_match("老师", {"老师"}, 0), ValueError, "max_word must be >= 1"),
    R(sentences.segmentation_f1, "another text", lambda: sentences.segmentation_f1([["老师"]], [["老", "帅"]]), ValueError, "cover different text"),
    R(sentences.segmentation_f1, "fewer predictions", lambda: sentences.segmentation_f1([], [["老师"]]), ValueError, "one prediction per gold sentence"),
]

# Issue 42: the refusal tests that stood outside the table (one row per case; their tests removed,
# rows already in the table not repeated).


def _qkv64(*batch, n=6, d_k=4, d_v=5, n_k=None):
    """q, k, v in float64 as the variants' tests draw them: ``(*batch, n, d_k)`` etc."""
    n_k = n if n_k is None else n_k
    g = torch.Generator().manual_seed(0)
    return (torch.randn(*batch, n, d_k, dtype=torch.float64, generator=g),
            torch.randn(*batch, n_k, d_k, dtype=torch.float64, generator=g),
            torch.randn(*batch, n_k, d_v, dtype=torch.float64, generator=g))


def _clusters(rounds=1, n=6, value=0):
    return torch.full((2, rounds, n), value, dtype=torch.long)


def _xy(n=32):
    x = floats(n, 4)
    return x, (x[:, 0] > 0).long()


def _fit(data, **kwargs):
    return training.fit(nn.Linear(4, 2), data, epochs=1, progress=False, **kwargs)


def _decode_step_of_another_batch():
    model = models.Transformer(11, 9, d_model=16, num_heads=2, d_ff=32)
    src = ids(5, 6)
    memory, cache = model.encode(src), model.init_cache()
    model.decode_step(torch.full((5, 1), 1), memory, cache, src=src)
    return model.decode_step(torch.full((2, 1), 1), memory[:2], cache, src=src[:2])


_SMALL_T = dict(d_model=16, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=24)
ROWS += [
    # attention, layers, models
    R(attention.split_heads, "num_heads not dividing d_model", lambda: attention.split_heads(floats(2, 5, 12), 5), ValueError, "d_model=12 (last dimension of x, shape (2, 5, 12)) is not divisible by num_heads=5"),
    R(attention.split_heads, "2-D x of 12 features", lambda: attention.split_heads(floats(5, 12), 3), ValueError, "x must have 3 dimensions"),
    R(attention.merge_heads, "3-D x of 12 features", lambda: attention.merge_heads(floats(2, 5, 12)), ValueError, "x must have 4 dimensions"),
    *[R(attention.scaled_dot_product_attention, f"a {dtype} mask", lambda dtype=dtype: attention.scaled_dot_product_attention(*qkv(), torch.ones(4, 4, dtype=dtype)), TypeError, f"mask must have dtype torch.bool (True = may attend), got {dtype}") for dtype in (torch.float64, torch.int64, torch.uint8)],
    R(layers.EncoderLayer, "2-D x", lambda: encoder_layer()(floats(3, 8)), ValueError, "x must have 3 dimensions"),
    R(layers.EncoderLayer, "a float mask", lambda: encoder_layer()(floats(2, 3, 8), torch.ones(2, 1, 1, 3)), TypeError, "mask must have dtype torch.bool"),
    R(layers.EncoderLayer, "a (batch, n) padding mask", lambda: encoder_layer()(floats(2, 3, 8), bools(2, 3)), ValueError, "A key-padding mask (batch, n_keys) needs shape (batch, 1, 1, n_keys)"),
    R(layers.EncoderLayer, "activation 'tanh'", lambda: layers.EncoderLayer(8, 2, 16, activation="tanh"), ValueError, "activation must be 'relu' or 'gelu'"),
    R(layers.EncoderLayer, "dropout 1.5", lambda: layers.EncoderLayer(8, 2, 16, dropout=1.5), ValueError, "dropout must be in [0, 1)"),
    R(layers.DecoderLayer, "memory of width 6", lambda: decoder_layer()(floats(2, 3, 8), floats(2, 4, 6)), ValueError, "memory must have shape (batch, seq, d_model=8), got (2, 4, 6)"),
    R(layers.DecoderLayer, "a memory mask of the target's shape", lambda: decoder_layer()(floats(2, 4, 8), floats(2, 7, 8), None, bools(4, 4)), ValueError, "mask with shape (4, 4) does not fit attention scores of shape (2, 2, 4, 7)"),
    R(layers.DecoderLayer, "a (batch, n_src) memory mask", lambda: decoder_layer()(floats(2, 4, 8), floats(2, 7, 8), None, bools(2, 7)), ValueError, "mask with shape (2, 7) does not fit"),
    R(layers.DecoderLayer, "a float target mask", lambda: decoder_layer()(floats(2, 4, 8), floats(2, 7, 8), torch.ones(4, 4)), TypeError, "mask must have dtype torch.bool"),
    R(models.Transformer, "a source id outside the vocabulary", lambda: models.Transformer(11, 13, **_SMALL_T)(torch.tensor([[1, 11]]), torch.tensor([[1, 2]])), ValueError, "src holds token ids in [1, 11], but the vocabulary has 11 entries: ids must lie in [0, 10]"),
    R(models.Transformer, "a target id outside the vocabulary", lambda: models.Transformer(11, 13, **_SMALL_T)(torch.tensor([[1, 2]]), torch.tensor([[1, 13]])), ValueError, "tgt holds token ids in [1, 13]"),
    R(models.Transformer, "float source ids", lambda: models.Transformer(11, 13, **_SMALL_T)(torch.tensor([[1.0, 2.0]]), torch.tensor([[1, 2]])), TypeError, "src must have dtype integer"),
    R(models.Transformer, "1-D source", lambda: models.Transformer(11, 13, **_SMALL_T)(torch.tensor([1, 2]), torch.tensor([[1, 2]])), ValueError, "src must have 2 dimensions"),
    R(models.Transformer, "decode with memory of another batch", lambda: models.Transformer(11, 13, **_SMALL_T).decode(torch.tensor([[1, 2]]), floats(2, 3, 16)), ValueError, "have different batch sizes"),
    R(models.Transformer, "decode_step without a cache", lambda: seq2seq().decode_step(ids(2, 1), floats(2, 4, 8), None), TypeError, "cache must come from init_cache(), got NoneType"),
    R(models.Transformer, "decode_step on a cache of another batch", _decode_step_of_another_batch, ValueError, "tgt has batch size 2, but the cache holds 5 rows"),
    R(models.EncoderTagger, "an attention instance as factory", lambda: models.EncoderTagger(8, 8, d_model=16, num_heads=2, attention=attention.MultiHeadAttention(16, 2)), TypeError, "pass the class, not an instance"),
    R(models.EncoderTagger, "attention 'local'", lambda: models.EncoderTagger(8, 8, d_model=16, num_heads=2, attention="local"), TypeError, "attention must be None or a factory"),
    R(models.Transformer, "a cross-attention factory returning a str", lambda: models.Transformer(8, 8, d_model=16, num_heads=2, cross_attention=lambda d, h, p: "attention"), TypeError, "the cross_attention factory must return an nn.Module, got str"),
    R(models.TokenEmbedding, "forward_offset past max_len", lambda: models.TokenEmbedding(9, 8, max_len=16)(ids(5, 1), offset=256), ValueError, "positions 256 ... 256 exceed max_len=16 of the positional encoding"),
    # training
    R(training.fit, "tensors of different lengths", lambda: _fit((_xy()[0], _xy()[1][:10])), ValueError, "all tensors in train_data need the same first dimension"),
    R(training.fit, "one tensor, not a tuple", lambda: _fit(_xy()[0]), TypeError, "train_data must be a tuple of tensors (inputs..., targets), got Tensor"),
    R(training.fit, "no training example", lambda: _fit((_xy()[0][:0], _xy()[1][:0])), ValueError, "train_data holds no examples"),
    R(training.fit, "no evaluation example", lambda: _fit(_xy(), eval_data=(_xy()[0][:0], _xy()[1][:0])), ValueError, "eval_data holds no examples"),
    R(training.fit, "forward_fn returning the logits only", lambda: _fit(_xy(), forward_fn=lambda model, batch: model(batch[0])), TypeError, "forward_fn must return (logits, targets), got Tensor"),
    R(training.evaluate, "batch_size 0", lambda: training.evaluate(nn.Linear(4, 2), _xy(), batch_size=0), ValueError, "batch_size must be >= 1, got 0"),
    R(training.evaluate, "no example", lambda: training.evaluate(nn.Linear(4, 2), (_xy()[0][:0], _xy()[1][:0])), ValueError, "data holds no examples"),
    R(training.evaluate, "every target ignored", lambda: training.evaluate(nn.Linear(4, 2), (_xy()[0], torch.full((32,), -1)), ignore_index=-1), ValueError, "every target in data is ignore_index=-1: there is nothing to evaluate"),
    # variants: the efficient functions
    R(local.local_attention, "window 2.0", lambda: local.local_attention(*_qkv64(2, n=5), 2.0), TypeError, "window must be an int"),
    R(local.local_attention, "fewer queries than keys", lambda: local.local_attention(_qkv64(2, n=5)[0][:, :4], *_qkv64(2, n=5)[1:], 1), ValueError, "as many queries as keys (query i looks at keys i - window ... i + window), got q (2, 4, 4)"),
    R(local.local_attention, "key_mask of another length", lambda: local.local_attention(*_qkv64(2, n=5), 1, key_mask=bools(2, 4)), ValueError, "key_mask must have shape (..., n) broadcasting to (2, 5)"),
    R(local.local_attention, "dropout_p 1.5", lambda: local.local_attention(*_qkv64(2, n=5), 1, dropout_p=1.5), ValueError, "dropout_p must be in [0, 1)"),
    *[R(api, case, call, error, phrase) for api, run in (
        (local.local_attention, lambda q, k, v: local.local_attention(q, k, v, 1)),
        (linear.linear_attention, lambda q, k, v: linear.linear_attention(q, k, v)),
    ) for case, call, error, phrase in (
        ("keys of another width", lambda run=run: run(_qkv64(2, n=5)[0], _qkv64(2, n=5)[1][..., :3], _qkv64(2, n=5)[2]), ValueError, "same feature size d_k"),
        ("fewer values than keys", lambda run=run: run(*_qkv64(2, n=5)[:2], _qkv64(2, n=5)[2][:, :4]), ValueError, "keys and values must come in pairs"),
        ("values of another batch", lambda run=run: run(*_qkv64(2, n=5)[:2], _qkv64(2, n=5)[2][:1]), ValueError, "same leading"),
        ("1-D queries", lambda run=run: run(_qkv64(2, n=5)[0][0, 0], *_qkv64(2, n=5)[1:]), ValueError, "at least 2 dimensions"),
        ("integer q, k, v", lambda run=run: run(*(t.long() for t in _qkv64(2, n=5))), TypeError, "must have dtype floating"),
        ("keys of another dtype", lambda run=run: run(_qkv64(2, n=5)[0], _qkv64(2, n=5)[1].float(), _qkv64(2, n=5)[2]), TypeError, "share a dtype"),
        ("queries as a list", lambda run=run: run(_qkv64(2, n=5)[0].tolist(), *_qkv64(2, n=5)[1:]), TypeError, "must be a torch.Tensor"),
    )],
    R(linear.linear_attention, "feature_map 'elu'", lambda: linear.linear_attention(*_qkv64(2, n=5), feature_map="elu"), TypeError, "feature_map must be callable, got str"),
    R(linear.linear_attention, "features of another size for the queries", lambda: linear.linear_attention(_qkv64(2, n=5)[0][:, :3], *_qkv64(2, n=5)[1:], feature_map=lambda x: x[..., : x.shape[-2] - 1].exp()), ValueError, "feature_map must map queries and keys to the same number of features"),
    R(linear.linear_attention, "causal with fewer queries than keys", lambda: linear.linear_attention(*_qkv64(n=4, n_k=6), causal=True), ValueError, "causal linear attention needs as many queries as keys"),
    R(linear.linear_attention, "causal 1", lambda: linear.linear_attention(*_qkv64(n=4, n_k=6), causal=1), TypeError, "causal must be a bool"),
    R(sparse.strided_attention, "fewer queries than keys", lambda: sparse.strided_attention(_qkv64(2)[0][:, :4], *_qkv64(2)[1:], 2), ValueError, "strided_attention is self-attention over positions: it needs as many queries as keys"),
    R(sparse.strided_attention, "a float key_mask", lambda: sparse.strided_attention(*_qkv64(2), 2, key_mask=torch.ones(2, 6)), TypeError, "key_mask must have dtype bool"),
    R(sparse.global_attention, "a global position past the end", lambda: sparse.global_attention(*_qkv64(2), [6]), ValueError, "global_positions must lie in [0, 5]"),
    R(sparse.global_attention, "key_mask of another length", lambda: sparse.global_attention(*_qkv64(2), [0], key_mask=bools(2, 5)), ValueError, "key_mask must have shape"),
    R(sparse.sparse_attention, "key_index for another length", lambda: sparse.sparse_attention(*_qkv64(2), torch.zeros(5, 2, dtype=torch.long)), ValueError, "key_index must have shape"),
    R(sparse.sparse_attention, "key_index past the end", lambda: sparse.sparse_attention(*_qkv64(2), torch.full((6, 2), 6)), ValueError, "key_index entries must lie in [-1, 5]"),
    R(clustering.random_rotations, "odd n_buckets 5", lambda: clustering.random_rotations(8, 5), ValueError, "n_buckets must be even"),
    R(clustering.clustered_attention, "query cluster 2 of 2", lambda: clustering.clustered_attention(*_qkv64(2), _clusters(value=2), _clusters(), 2), ValueError, "query_clusters must lie in [0, 1]"),
    R(clustering.clustered_attention, "key clusters for another length", lambda: clustering.clustered_attention(*_qkv64(2), _clusters(), _clusters(n=5), 2), ValueError, "key_clusters must have shape (..., rounds, 6)"),
    R(clustering.clustered_attention, "rounds that differ", lambda: clustering.clustered_attention(*_qkv64(2), _clusters(), _clusters(rounds=2), 2), ValueError, "same number of rounds"),
    R(clustering.lsh_buckets, "rotations for another d", lambda: clustering.lsh_buckets(_qkv64(2)[0], clustering.random_rotations(5, 4)), ValueError, "with the same d"),
    R(clustering.LSHAttention, "odd n_buckets", lambda: clustering.LSHAttention(8, 2, n_buckets=3), ValueError, "n_buckets must be even"),
    R(clustering.RoutingAttention, "n_clusters 0", lambda: clustering.RoutingAttention(8, 2, n_clusters=0), ValueError, "n_clusters must be >= 1"),
    R(chunked.lsh_chunked_attention, "buckets for another length (batched)", lambda: chunked.lsh_chunked_attention(*_qkv64(2, 3, n=8), torch.zeros(1, 7, dtype=torch.long), 4), ValueError, "buckets must have shape (..., rounds >= 1, 8)"),
    R(chunked.balanced_routing_attention, "a position twice in a cluster", lambda: chunked.balanced_routing_attention(*_qkv64(2, 3, n=8), torch.tensor([[1, 1]]), torch.tensor([[0, 1]])), ValueError, "query_members lists a position twice in one cluster"),
    R(chunked.balanced_members, "size 9 of 8 vectors", lambda: chunked.balanced_members(_qkv64(2, 3, n=8, d_k=8)[0], torch.randn(2, 8, dtype=torch.float64), 9), ValueError, "size must be at most n = 8"),
    R(local.local_attention, "key_mask of another length (batched)", lambda: local.local_attention(*_qkv64(2, 3, n=8), 2, key_mask=bools(5)), ValueError, "key_mask must have shape"),
    # variants: the modules
    *[R(cls, "a causal mask", lambda cls=cls, kwargs=kwargs: cls(8, 2, **kwargs)(*qkv(2, 6, 8), masks.causal_mask(6)), ValueError, f"{cls.__name__} never builds the N x N matrix") for cls, kwargs in ((low_rank.LinformerAttention, {"seq_len": 6}), (low_rank.CompressedAttention, {}), (sinkhorn.SinkhornAttention, {}))],
    R(low_rank.LinformerAttention, "6 positions for seq_len 4", lambda: low_rank.LinformerAttention(8, 2, seq_len=4)(*qkv(2, 6, 8)), ValueError, "LinformerAttention was built for seq_len=4"),
    R(low_rank.LinformerAttention, "k 0", lambda: low_rank.LinformerAttention(8, 2, seq_len=6, k=0), ValueError, "k must be >= 1"),
    R(sinkhorn.SinkhornAttention, "fewer keys than queries", lambda: sinkhorn.SinkhornAttention(8, 2)(floats(2, 6, 8), floats(2, 4, 8), floats(2, 4, 8)), ValueError, "SinkhornAttention is self-attention: it needs as many queries as keys"),
    R(sinkhorn.SinkhornAttention, "temperature 0", lambda: sinkhorn.SinkhornAttention(8, 2, temperature=0.0), ValueError, "temperature must be a finite number > 0"),
    R(sparse.LongformerAttention, "one dilation for two heads", lambda: sparse.LongformerAttention(8, 2, dilations=(1,)), ValueError, "dilations must give one dilation per head (num_heads=2), got 1"),
    R(sparse.LongformerAttention, "a global token past the sequence", lambda: sparse.LongformerAttention(8, 2, global_positions=(5,))(*qkv(1, 4, 8)), ValueError, "global_positions=[5] of LongformerAttention must lie inside the sequence"),
    R(sparse.BigBirdAttention, "keys longer than the queries", lambda: sparse.BigBirdAttention(8, 2)(floats(1, 4, 8), floats(1, 5, 8), floats(1, 5, 8)), ValueError, "same length"),
    # vision, the explorer, predict-first
    R(vision.PatchClassifier, "2-D patches", lambda: vision.PatchClassifier(16, 4, 10, d_model=32, num_heads=2, num_layers=2, d_ff=64)(floats(16, 4)), ValueError, "patches must have 3 dimensions"),
    R(vision.PatchClassifier, "integer patches for attention_maps", lambda: vision.PatchClassifier(16, 4, 10, d_model=32, num_heads=2, num_layers=2, d_ff=64).attention_maps(torch.zeros(2, 16, 4, dtype=torch.int64)), TypeError, "patches must have dtype floating"),
    R(explorer.AttentionExplorer, "a str among the views", lambda: explorer.AttentionExplorer([explorer.AttentionView(**_VIEW), "not a view"]), TypeError, "views[1] must be an AttentionView"),
    R(explorer.AttentionExplorer, "title 3", lambda: explorer.AttentionExplorer([explorer.AttentionView(**_VIEW)], title=3), TypeError, "title must be a str"),
    R(predict.after_prediction, "a prediction returning an int", lambda: predict.after_prediction(lambda: 3, lambda: None), TypeError, "prediction must return the prediction as a str, got int"),
]


ROWS += [  # issue 42: the data tasks' refusal tests, as rows
    R(utils.seed_everything, "a str seed", lambda: utils.seed_everything("0"), TypeError, "seed must be an int"),
    R(utils.seed_everything, "None as seed", lambda: utils.seed_everything(None), TypeError, "seed must be an int"),
    R(binding.binding_task, "n_pairs 0", lambda: binding.binding_task(4, seq_len=32, n_pairs=0), ValueError, "n_pairs"),
    R(binding.binding_task, "n_filler -1", lambda: binding.binding_task(4, seq_len=32, n_filler=-1), ValueError, "n_filler"),
    R(binding.binding_task, "seed -1", lambda: binding.binding_task(4, seq_len=32, seed=-1), ValueError, "seed"),
    R(binding.binding_task, "seq_len 2.5", lambda: binding.binding_task(4, seq_len=2.5), TypeError, "seq_len"),
    R(digits.digits_splits, "test_fraction 1", lambda: digits.digits_splits(1.0), ValueError, "test_fraction must be in [0, 1), got 1.0"),
    R(digits.digits_splits, "test_fraction -0.1", lambda: digits.digits_splits(-0.1), ValueError, "test_fraction must be in [0, 1), got -0.1"),
    R(labelling.lookup_features, "id 21 of 21", lambda: labelling.lookup_features(torch.tensor([0, 21]), 4, 4), ValueError, "token ids must lie in [0, 20]"),
    R(labelling.lookup_features, "a negative id", lambda: labelling.lookup_features(torch.tensor([-1]), 4, 4), ValueError, "token ids must lie"),
    R(labelling.lookup_features, "float ids", lambda: labelling.lookup_features(torch.tensor([0.0, 1.0]), 4, 4), TypeError, "tokens must have dtype integer"),
    *[R(listops.listops_task, f"{name} {value!r}", lambda kwargs={name: value}: listops.listops_task(**{"n_examples": 4, "max_len": 64, **kwargs}), error, name) for name, value, error in (
        ("n_examples", 0, ValueError), ("n_examples", 2.0, TypeError), ("max_len", True, TypeError),
        ("min_len", 0, ValueError), ("max_depth", 1, ValueError), ("seed", -1, ValueError),
        ("max_attempts", 0, ValueError))],
    R(listops.listops_encode, "a list", lambda: listops.listops_encode(["[MAX", "1"]), TypeError, "expression must be a str"),
    R(listops.listops_encode, "a two-digit number", lambda: listops.listops_encode("[MAX 1 12 ]"), ValueError, "expression must use the tokens"),
    R(listops.listops_decode, "id 16", lambda: listops.listops_decode([1, 16]), ValueError, "ids must be ints in 0 ... 15"),
    R(listops.listops_class_shares, "class 10", lambda: listops.listops_class_shares(torch.tensor([3, 10])), ValueError, "classes 0 ... 9"),
    R(long_range.retrieval_task, "6 positions for 4 keys", lambda: long_range.retrieval_task(4, 6, n_keys=4), ValueError, "seq_len must be >= 2 * n_keys"),
    R(long_range.retrieval_task, "n_examples 0", lambda: long_range.retrieval_task(0, 16), ValueError, "n_examples must be >= 1"),
    R(long_range.retrieval_vocab_size, "n_values 0", lambda: long_range.retrieval_vocab_size(4, 0), ValueError, "n_values must be >= 1"),
    R(ordering.best_order_blind_accuracy, "labels of 3 of 6 positions", lambda: ordering.best_order_blind_accuracy(ordering.make_flip_task(5, 4, 6).tokens, ordering.make_flip_task(5, 4, 6).labels[:, :3]), ValueError, "must have shape"),
    *[R(sentences.split_sentences, f"n_test {bad!r}", lambda bad=bad: sentences.split_sentences(n_test=bad), ValueError, "n_test must be a positive int") for bad in (-1, 1.5, True)],
    R(sequences.sequence_task_splits, "task 'shuffle'", lambda: sequences.sequence_task_splits("shuffle", 10, 10, 4, 5), ValueError, "task"),
    R(sequences.reverse_task, "100 examples of 16 sequences", lambda: sequences.reverse_task(100, 2, 5), ValueError, "distinct"),
    R(sequences.reverse_task, "min_len 6 for seq_len 4", lambda: sequences.reverse_task(10, 4, 5, min_len=6), ValueError, "min_len"),
    R(sequences.reverse_task, "pad_id 5 of 5", lambda: sequences.reverse_task(10, 4, 5, pad_id=5), ValueError, "pad_id"),
    R(sequences.reverse_task, "float n_examples", lambda: sequences.reverse_task(10.0, 4, 5), TypeError, "n_examples must be an int"),
    R(translation.Vocab, "decode id 7", lambda: translation.Vocab(["a"]).decode([7]), ValueError, "not in the vocabulary"),
]


ROWS += [  # issue 42: the refusals of the utils', masks' and decoders' tests, as rows
    R(utils.check_tensor, "2-D for 3", lambda: utils.check_tensor(torch.zeros(2, 3), "x", ndim=3), ValueError, "must have 3 dimensions, got 2 (shape (2, 3))"),
    R(utils.check_tensor, "floats for integer", lambda: utils.check_tensor(torch.zeros(2, 3), "x", dtype="integer"), TypeError, "must have dtype integer, got torch.float32"),
    R(utils.check_tensor, "a free first dimension", lambda: utils.check_tensor(torch.zeros(2, 3), "x", shape=(None, 4)), ValueError, "must have shape (*, 4), got (2, 3)"),
    R(utils.check_non_negative_int, "a bool", lambda: utils.check_non_negative_int(True, "n"), TypeError, "n must be an int, got bool"),
    R(utils.check_bool, "None", lambda: utils.check_bool(None, "flag"), TypeError, "flag must be a bool"),
    *[R(utils.check_probability, f"{bad!r}", lambda bad=bad: utils.check_probability(bad, "p"), ValueError, "p must be in [0, 1)") for bad in (-0.1,)],
    R(masks.check_mask, "(batch, n_k) padding for 4-D scores", lambda: masks.check_mask(bools(2, 5), (2, 4, 3, 5)), ValueError, "mask with shape (2, 5) does not fit attention scores of shape (2, 4, 3, 5)"),
    R(masks.check_mask, "5-D for 4-D scores", lambda: masks.check_mask(bools(1, 2, 4, 3, 5), (2, 4, 3, 5)), ValueError, "mask with shape (1, 2, 4, 3, 5) cannot be matched"),
    R(masks.check_mask, "a 0-d mask", lambda: masks.check_mask(torch.tensor(True), (3, 5)), ValueError, "mask with shape () cannot be matched"),
    R(masks.check_mask, "transposed (n_k, n_q)", lambda: masks.check_mask(bools(5, 3), (3, 5)), ValueError, "mask with shape (5, 3) does not fit"),
    R(decoding.greedy_decode, "a model without encode", lambda: decoding.greedy_decode(object(), ids(2, 3), 3, 1, 2, 0), TypeError, "model must have an `encode` method"),
    R(decoding.greedy_decode, "1-D src", lambda: decoding.greedy_decode(seq2seq(), ids(3), 3, 1, 2, 0), ValueError, "src must have 2 dimensions"),
    R(decoding.greedy_decode, "max_len 0", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 0, 1, 2, 0), ValueError, "max_len must be >= 1"),
    R(decoding.beam_search, "beam_width 0", lambda: decoding.beam_search(seq2seq(), ids(2, 3), 0, 3, 1, 2, 0), ValueError, "beam_width must be >= 1"),
    R(decoding.greedy_decode, "eos_id outside the vocabulary", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 3, 1, 99, 0), ValueError, "eos_id=99 is not a token of the model's target vocabulary"),
    R(decoding.beam_search, "length_penalty -1", lambda: decoding.beam_search(seq2seq(), ids(2, 3), 2, 3, 1, 2, 0, length_penalty=-1.0), ValueError, "length_penalty must be a finite number >= 0, got -1.0"),
]


ROWS += [  # issue 42: the positional tests' refusals, as rows
    R(positional.RotaryEmbedding, "odd d_head 7", lambda: positional.RotaryEmbedding(7), ValueError, "d_head must be even, got 7"),
    R(positional.RotaryEmbedding, "x of 6 features for d_head 8", lambda: positional.RotaryEmbedding(8, max_len=6)(floats(2, 6)), ValueError, "x must have shape (..., seq, d_head=8), got (2, 6)"),
    R(positional.RotaryAttention, "from_torch with kdim and vdim 4", lambda: positional.RotaryAttention.from_torch(nn.MultiheadAttention(8, 2, kdim=4, vdim=4)), ValueError, "kdim and vdim must equal embed_dim"),
    R(positional.RotaryAttention, "query of 4 features", lambda: positional.RotaryAttention(8, num_heads=2)(*qkv(2, 3, 4)), ValueError, "query must have shape (batch, seq, 8)"),
    R(positional.RotaryAttention, "a 3-D mask", lambda: positional.RotaryAttention(8, num_heads=2)(*qkv(2, 3, 8), bools(3, 3, 3)), ValueError, "is 3-D, which is ambiguous"),
]


class _AttendChanged(attention.MultiHeadAttention):
    """A variant that changes ``attend`` and says nothing about caching."""

    def attend(self, q, k, v, mask, need_weights):
        return super().attend(q, k, v, mask, need_weights)


class _LastPositionOnly(models.Transformer):
    """A model whose ``decode`` forgets the position dimension of its logits."""

    def decode(self, *args, **kwargs):
        return super().decode(*args, **kwargs)[:, -1]


def _small_transformer(**kwargs):
    return models.Transformer(6, 7, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16, **kwargs)


ROWS += [  # issue 42: the refusals inside tests that assert other things, as rows (cases already rows: not repeated)
    R(training.fit, "a schedule factory returning no scheduler", lambda: training.fit(nn.Linear(4, 2), _xy(), epochs=1, progress=False, schedule=lambda optimizer, steps: 3), TypeError, "the schedule factory must return a scheduler with a step() method"),
    R(training.fit, "an unknown schedule name", lambda: training.fit(nn.Linear(4, 2), _xy(), epochs=1, progress=False, schedule="cosine"), ValueError, "schedule must be one of ('warmup_cosine', 'one_cycle', 'constant') or a factory, got 'cosine'"),
    R(attention.scaled_dot_product_attention, "dropout_p -0.1", lambda: attention.scaled_dot_product_attention(*qkv(), dropout_p=-0.1), ValueError, "dropout_p must be in [0, 1), got -0.1"),
    R(attention.fused_attention, "dropout_p -0.1", lambda: attention.fused_attention(*qkv(), dropout_p=-0.1), ValueError, "dropout_p must be in [0, 1), got -0.1"),
    R(attention.fused_attention, "dropout_p 1.0", lambda: attention.fused_attention(*qkv(), dropout_p=1.0), ValueError, "dropout_p must be in [0, 1), got 1.0"),
    R(layers.EncoderLayer, "from_torch with torch.tanh", lambda: layers.EncoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, 16, activation=torch.tanh)), ValueError, "activation must be 'relu' or 'gelu'"),
    R(layers.EncoderLayer, "from_torch with the tanh-approximated GELU", lambda: layers.EncoderLayer.from_torch(nn.TransformerEncoderLayer(8, 2, 16, activation=nn.GELU("tanh"))), ValueError, "got GELU(approximate='tanh')"),
    R(models.Decoder, "a (5, 4) tgt_mask for 5 targets", lambda: models.Decoder(decoder_layer(), 3)(floats(2, 5, 8), floats(2, 4, 8), bools(5, 4)), ValueError, "mask with shape (5, 4) does not fit attention scores of shape (2, 2, 5, 5)"),
    R(decoding.exact_match, "fewer targets than predictions", lambda: decoding.exact_match(ids(3, 4), ids(2, 3)), ValueError, "predictions and targets must have the same number of rows, got 3 and 2"),
    R(decoding.greedy_decode, "use_cache 'yes'", lambda: decoding.greedy_decode(seq2seq(), ids(2, 3), 4, 1, 2, 0, use_cache="yes"), TypeError, "use_cache must be a bool"),
    R(decoding.greedy_decode, "a model whose decode drops the positions", lambda: decoding.greedy_decode(_LastPositionOnly(6, 7, d_model=8, num_heads=2, num_encoder_layers=1, num_decoder_layers=1, d_ff=16), ids(2, 3), 3, 1, 2, 0, use_cache=False), ValueError, "model.decode must return logits of shape (batch, n_tgt, vocab) = (2, 1, vocab), got (2, 7)"),
    R(decoding.greedy_decode, "a decoder attention that cannot be cached", lambda: decoding.greedy_decode(_small_transformer(decoder_attention=_AttendChanged), ids(2, 3), 4, 1, 2, 0), TypeError, "decoder layer 0 self_attn: _AttendChanged overrides `attend`"),
    R(decoding.beam_search, "a decoder attention that cannot be cached", lambda: decoding.beam_search(_small_transformer(decoder_attention=_AttendChanged), ids(2, 3), 2, 4, 1, 2, 0), TypeError, "use_cache=False"),
    R(attention.MultiHeadAttention, "forward_cached of a subclass that overrides attend", lambda: _AttendChanged(8, 2).forward_cached(floats(1, 1, 8), floats(1, 1, 8), floats(1, 1, 8), attention.KeyValueCache()), TypeError, "_AttendChanged overrides `attend`"),
    R(plotting.plot_attention, "4-D weights", lambda: plotting.plot_attention(torch.full((2, 3, 5, 5), 0.2)), ValueError, "weights must be 2-D (n_queries, n_keys), got shape (2, 3, 5, 5)"),
    R(patterns.head_patterns, "patterns of two sizes", lambda: patterns.head_patterns([patterns.local_mask(6, 1), patterns.local_mask(5, 1)]), ValueError, "patterns[1] must have shape (6, 6)"),
    R(patterns.receptive_field, "a (3, 4) mask", lambda: patterns.receptive_field(torch.ones(3, 4, dtype=torch.bool), 1), ValueError, "mask must be square (..., n, n), got (3, 4)"),
    R(attention_free.FourierMixing, "need_weights=True", lambda: attention_free.FourierMixing(6, 2)(floats(1, 5, 6), floats(1, 5, 6), floats(1, 5, 6), need_weights=True), ValueError, "FourierMixing has no attention weights: need_weights must be False"),
    R(attention_free.FourierMixing, "x of width 4 for d_model 6", lambda: attention_free.FourierMixing(6, 2)(floats(1, 5, 4), None, None), ValueError, "query must have last dimension d_model=6, got (1, 5, 4)"),
    R(attention_free.FourierMixing, "dropout 1.5", lambda: attention_free.FourierMixing(4, 1, 1.5), ValueError, "dropout must be in [0, 1), got 1.5"),
    R(synthesizer.RandomSynthesizerAttention, "6 positions for seq_len 4", lambda: synthesizer.RandomSynthesizerAttention(8, 2, seq_len=4)(floats(1, 6, 8), floats(1, 6, 8), floats(1, 6, 8)), ValueError, "RandomSynthesizerAttention was built for seq_len=4"),
    R(digits.image_patches, "patch_size 0", lambda: digits.image_patches(torch.zeros(2, 8, 8), 0), ValueError, "patch_size must be >= 1, got 0"),
    R(listops.listops_task, "min_len past the longest expression", lambda: listops.listops_task(4, 64, min_len=11, max_depth=3, max_args=2), ValueError, "min_len must be <= 10, the longest expression of max_depth=3 and max_args=2, got min_len=11"),
    R(listops.listops_task, "a length range no draw reaches", lambda: listops.listops_task(4, 200, min_len=190, max_attempts=2), RuntimeError, "widen the range or raise max_attempts"),
]


# Issue 39: translation, tagging and classification on the real sentences.
from lectures_lib import real_sentences as rs  # noqa: E402
from lectures_lib import sentence_labels as sl  # noqa: E402

_PAIRS = sentences.load_sentences()[:3]
ROWS += [
    R(rs.check_recipe, "epochs 0", lambda: rs.check_recipe({"epochs": 0}), ValueError, "recipe['epochs'] must be in [1, 200]"),
    R(rs.check_recipe, "an unknown field", lambda: rs.check_recipe({"data": 1}), ValueError, "unknown fields ['data']"),
    R(rs.check_recipe, "a bool as an int", lambda: rs.check_recipe({"layers": True}), TypeError, "recipe['layers'] must be a int"),
    R(rs.check_pairs, "strings", lambda: rs.check_pairs(["a"]), TypeError, "pairs must hold SentencePair records"),
    R(rs.translation_data, "no pairs", lambda: rs.translation_data([], {}), TypeError, "train must be a non-empty list of SentencePair"),
    R(rs.gloss_pairs, "a string", lambda: rs.gloss_pairs("pairs"), TypeError, "train must be a non-empty list"),
    R(rs.build_translator, "tensors, not TranslationData", lambda: rs.build_translator((1, 2), {}), TypeError, "data must be a TranslationData"),
    R(rs.train_translator, "a float seed", lambda: rs.train_translator(_PAIRS, {}, 0.5), TypeError, "seed must be an int"),
    R(rs.translate, "a model, not a TrainedTranslator", lambda: rs.translate(nn.Linear(2, 2), ["Hi."]), TypeError, "trained must be a TrainedTranslator"),
    R(rs.bleu_chrf, "one reference short", lambda: rs.bleu_chrf(["a", "b"], ["a"]), ValueError, "one hypothesis per reference"),
    R(rs.retrieve, "one sentence, not a list", lambda: rs.retrieve(_PAIRS, "Hello."), TypeError, "english must be a list of English sentences"),
    R(rs.gloss, "sentences of ints", lambda: rs.gloss(_PAIRS, [1, 2]), TypeError, "english must be a list of English sentences"),
    R(sl.char_tensors, "a dict vocabulary", lambda: sl.char_tensors(_PAIRS, {"我": 4}), TypeError, "vocab must be a SentenceVocab"),
    R(sl.train_segmenter, "epochs 0", lambda: sl.train_segmenter(_PAIRS, epochs=0), ValueError, "epochs must be >= 1"),
    R(sl.segment, "a Transformer", lambda: sl.segment(models.Transformer(8, 8), sentences.build_vocab([["我"]]), _PAIRS), TypeError, "model must be an EncoderTagger"),
    R(sl.train_level_model, "no pairs", lambda: sl.train_level_model([]), TypeError, "train must be a non-empty list"),
    R(sl.predict_levels, "a list vocabulary", lambda: sl.predict_levels(models.EncoderTagger(8, 6), ["我"], _PAIRS), TypeError, "vocab must be a SentenceVocab"),
    R(sl.level_baselines, "a list, not splits", lambda: sl.level_baselines(_PAIRS), TypeError, "splits must be SentenceSplits"),
]

# Public names that need no row, with the reason. A name here is a promise, not a loophole:
# each reason says why no invalid input exists, or who owns the missing rows.
NO_ROW: dict[str, str] = {
    "lectures_lib.real_sentences.TranslationData": "a NamedTuple that translation_data returns",
    "lectures_lib.real_sentences.TrainedTranslator": "a NamedTuple that train_translator returns",
    "lectures_lib.data.digits.DigitsSplit": "a NamedTuple of two tensors that digits_splits returns",
    "lectures_lib.data.digits.load_digit_images": "takes no argument",
    "lectures_lib.data.listops.listops_vocab_size": "takes no argument",
    "lectures_lib.fonts.find_cjk_font": "takes no argument",
    "lectures_lib.fonts.use_cjk_font": "takes no argument",
    "lectures_lib.cache.KeyValueCache": "a container the decoder fills step by step; it holds "
    "what the library's own forward_cached appends",
    "lectures_lib.cache.kv_cache_problem": "accepts any object: it answers with the reason a "
    "module cannot use the cache, or None",
    "lectures_lib.cache.DecoderCache": "built by Transformer.init_cache, not by hand",
    "lectures_lib.positional.RotarySelfAttention": "the deprecated old name of RotaryAttention (a "
    "subclass that only warns): RotaryAttention's rows cover it",
    "lectures_lib.utils.at_boundary": "takes no argument",
    "lectures_lib.utils.inside_library": "takes no argument",
    "lectures_lib.layers.AttentionFactory": "a type alias, not a function",
    "lectures_lib.measure.MemoryReport": "a record the library fills; it holds what it is given",
    "lectures_lib.data.labelling.LookupData": "a record the library fills",
    "lectures_lib.data.ordering.FlipTask": "a record the library fills",
    "lectures_lib.data.relations.TwoRelationsData": "a record the library fills",
    "lectures_lib.data.translation.TranslationSplit": "a record the library fills",
    "lectures_lib.data.translation.TranslationData": "a record the library fills",
    "lectures_lib.course.course_files": "takes no arguments",
    "lectures_lib.languages.notebook_language": "takes no arguments (a bad LECTURES_LANG gives English: "
    "a setting must never break a check)",
    "course_tools.CloneRequired": "an exception class: the library raises it",
    "course_tools.grading.SandboxRefused": "an exception class: the library raises it",
    "course_tools.grading.clean_text": "accepts any object (str() of it)",
    "lectures_lib.data.sentences.SentencePair": "a record load_sentences fills",
    "lectures_lib.data.sentences.SentenceSplits": "a record split_sentences fills",
    "course_tools.publish.exercises.exercise_cells": "accepts any object: malformed cells and "
    "notebooks (hostile submissions) give no cells rather than an error",
    "course_tools.publish.exercises.MarkerError": "an exception class: the library raises it",
    "course_tools.publish.exercises.Region": "a record find_regions fills",
    "course_tools.publish.exercises.Exercise": "a record find_exercises fills",
    "course_tools.grading.sandbox.kernel.kernel_spec": "takes no arguments",
    "course_tools.grading.sandbox.kernel.main": "a command line: argparse refuses bad arguments "
    "with its usage; 'launch' and 'inner' are started by Jupyter and the launcher themselves",
    "course_tools.publish.exercises.main": "a command line: argparse refuses bad arguments with its usage "
    "and exit status 2 (tests/tooling/test_exercises.py)",
}
# Modules whose public names are checked elsewhere or owned by another issue, with the reason.
NO_ROW_MODULES: dict[str, str] = {
    "course_tools.grading.sandbox": "the grade command's sandbox and remote stand-ins: its "
    "inputs come from the grader itself (tests/tooling/test_grading_attacks.py)",
    "course_tools.grading.sandbox.wire": "the grader's plain-data protocol: malformed input is refused "
    "with WireError (tests/tooling/test_grading_attacks.py)",
    "course_tools.grading.sandbox.worker": "runs inside the sandbox, driven only by the grader",
    "lectures_lib.checks": "checkers never raise: a bad argument is reported in the CheckResult "
    "(tests/checks/)",
}


def _public_modules():
    for package in (lectures_lib, course_tools):
        yield package
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            if info.name in NO_ROW_MODULES or info.name.startswith("lectures_lib.checks."):
                continue
            yield importlib.import_module(info.name)


def _needs_a_row(obj: object) -> bool:
    """Functions and classes take input; constants (ints, strings) do not."""
    return callable(obj) and not isinstance(obj, (int, float, str, bytes))


def _raised_inside_the_library(error: BaseException) -> bool:
    frames = traceback.extract_tb(error.__traceback__)
    where = Path(frames[-1].filename).resolve() if frames else None
    return where is not None and (where.is_relative_to(LIBRARY) or where.is_relative_to(TOOLS))


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_bad_input_is_refused_with_a_clear_error(row: Row):
    with pytest.raises(Exception) as caught:
        row.call()
    error = caught.value
    assert isinstance(error, row.error), (
        f"{row.id}: expected {row.error.__name__}, got {type(error).__name__}: {error}"
    )
    assert row.phrase in str(error), f"{row.id}: message lacks {row.phrase!r}: {error}"
    assert _raised_inside_the_library(error), (
        f"{row.id}: the error came from outside lectures_lib (a bare Python/torch error): "
        f"{type(error).__name__}: {error}"
    )
    matplotlib.pyplot.close("all")


def test_every_public_name_has_a_row():
    covered = {id(row.api) for row in ROWS}
    missing = []
    for module in _public_modules():
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            qualified = f"{module.__name__}.{name}"
            if not _needs_a_row(obj) or id(obj) in covered:
                continue
            home = f"{getattr(obj, '__module__', module.__name__)}.{name}"
            if qualified in NO_ROW or home in NO_ROW:
                continue
            missing.append(qualified)
    assert not missing, (
        "public names without a row in the bad-input table (add rows to ROWS, or a reason to "
        f"NO_ROW): {sorted(set(missing))}"
    )


def test_the_table_is_well_formed():
    seen = set()
    for row in ROWS:
        assert row.phrase.strip(), f"{row.id}: empty phrase"
        assert issubclass(row.error, (TypeError, ValueError, RuntimeError)), row.id
        assert row.id not in seen, f"duplicate row {row.id}"
        seen.add(row.id)
    for name in NO_ROW:
        module, _, attribute = name.rpartition(".")
        assert hasattr(importlib.import_module(module), attribute), f"NO_ROW names {name}"


def test_no_row_reasons_do_not_hide_covered_names():
    covered = {id(row.api) for row in ROWS}
    for name in NO_ROW:
        module, _, attribute = name.rpartition(".")
        obj = getattr(importlib.import_module(module), attribute)
        assert id(obj) not in covered, f"{name} has rows: remove it from NO_ROW"


