r"""Autoregressive decoding: greedy search, beam search, and how to score what they produce.

Derived in ``05_transformer_decoder.ipynb``.

An autoregressive (自回归) decoder produces its output one token at a time: it starts from
BEGIN (``<bos>``), reads everything it has produced so far, and predicts a distribution over
the next token, until it emits END (``<eos>``) or reaches a length limit. The functions here need
only the two methods of :class:`lectures_lib.models.Transformer` that split a forward pass
into its halves:

* ``model.encode(src) -> memory`` ``(batch, n_src, d_model)``, run **once** per source;
* ``model.decode(tgt, memory, src_mask) -> logits`` ``(batch, n_tgt, vocab)``, run once per step
  on the prefix produced so far (only the last position's logits are used), with the source
  padding mask ``src_mask = make_src_mask(src, model.pad_id)`` built **once**, next to
  ``encode`` (as the Annotated Transformer does). A duck-typed model (only ``encode`` and
  ``decode(tgt, memory, src=None)``) is called with ``src=src`` instead.

Every sequence of a batch is decoded at the same time; a sequence that has emitted END is
*finished*: from then on it receives ``<pad>`` tokens, which change neither its score nor the
other sequences. Returned sequences start *after* BEGIN, contain END when the model emitted it,
and are padded with ``pad_id`` after it: the same layout as ``tgt_out`` in
:mod:`lectures_lib.data.translation`.

The decoders never emit ``pad_id``, and by default never ``bos_id``: their logits are set to
:math:`-\infty` before the softmax, so every step chooses among the tokens a sequence may
contain, and scores are log-probabilities under that distribution (:func:`sequence_log_prob`
uses the same). **When BEGIN is also a data token** (the Annotated Transformer's copy task uses
token 1 both to start decoding and inside the sequences), pass ``suppress_bos=False``: BEGIN may
then be emitted like any other token. With the default, such a task is capped (every output that
should contain BEGIN is wrong): ``suppress_bos`` is the learner's choice, not a hidden rule.

**Two ways to run the decoder** (``use_cache``). The form ``05`` teaches first recomputes the
decoder over the whole prefix at every step (``use_cache=False``: O(n²) decoder work for n output
tokens). What production decoders do, and the default here (``use_cache=True``): a key/value
cache (键值缓存): the decoder is fed only the newest token, ``model.decode_step(token, memory,
cache)``, and each layer keeps the keys and values of the earlier positions (and the memory's
projected keys and values), so a step costs O(n). Both give the same tokens and scores. A model
without ``init_cache``/``decode_step`` (only ``encode``/``decode``) has no cache to use and is
decoded by recomputing the prefix; a :class:`~lectures_lib.models.Transformer` whose decoder
attention cannot be cached exactly refuses ``use_cache=True`` with an error that says so.
"""

from __future__ import annotations

import contextlib
import math
from collections import Counter
from collections.abc import Sequence

import torch
from torch import nn

from ._validate import decoding as rules
from .utils import eval_mode, validated

__all__ = [
    "greedy_decode",
    "sample_decode",
    "beam_search",
    "sequence_log_prob",
    "exact_match",
    "sentence_bleu",
]


def _log_probs(logits: torch.Tensor, ids: tuple[int, ...], suppress_bos: bool) -> torch.Tensor:
    r"""Log-softmax over the tokens a decoder may emit: ``<pad>`` (and BEGIN when
    ``suppress_bos``; ``ids = (bos, eos, pad)``) get :math:`-\infty` logits, so they are never
    chosen and never take probability."""
    bos_id, _, pad_id = ids
    logits = logits.float().clone()
    logits[..., [bos_id, pad_id] if suppress_bos else [pad_id]] = -math.inf
    return torch.log_softmax(logits, dim=-1)


def _encode(model, src: torch.Tensor):
    """``(memory, source mask)``: the encoder runs once, and the source padding mask is built
    once for every decoding step (``None`` for a duck-typed model, which is given ``src``)."""
    from .models import Transformer, make_src_mask

    if not isinstance(model, Transformer):
        return model.encode(src), None
    src_mask = make_src_mask(src, model.pad_id)  # (batch, 1, 1, n_src)
    return model.encode(src, src_mask), src_mask


def _decode(model, tokens, memory, src, src_mask):
    """``model.decode`` with the source mask built once (or ``src=`` for a duck-typed model)."""
    if src_mask is None:
        return model.decode(tokens, memory, src=src)
    return model.decode(tokens, memory, src_mask)


class _Steps:
    """Feeds a model one decoding step at a time: the newest token with a key/value cache
    (``model.decode_step``), or the whole prefix (``model.decode``) without one."""

    def __init__(self, model, memory, src, src_mask, ids, use_cache, suppress_bos) -> None:
        self.model, self.memory, self.src, self.src_mask = model, memory, src, src_mask
        self.ids, self.suppress_bos = ids, suppress_bos
        has_cache = callable(getattr(model, "init_cache", None)) and callable(
            getattr(model, "decode_step", None)
        )
        self.cache = model.init_cache() if use_cache and has_cache else None

    def next_log_probs(self, tokens: torch.Tensor) -> torch.Tensor:
        """``(batch, vocab)`` log-probabilities of the token after ``tokens`` ``(batch, t)``."""
        if self.cache is None:  # recompute the decoder over the whole prefix
            newest = tokens
            logits = _decode(self.model, tokens, self.memory, self.src, self.src_mask)
        else:  # the newest token only: the cache holds the rest
            newest = tokens[:, len(self.cache) :]  # (batch, 1)
            if self.src_mask is None:
                logits = self.model.decode_step(newest, self.memory, self.cache, src=self.src)
            else:
                logits = self.model.decode_step(newest, self.memory, self.cache, self.src_mask)
        rules.decoded_logits(logits, newest, self.ids, "decode" if self.cache is None else "decode_step")
        return _log_probs(logits[:, -1], self.ids, self.suppress_bos)  # (batch, vocab)

    def reorder_mask(self, rows: torch.Tensor) -> None:
        """Beam search repeats each source ``beam_width`` times: so does its mask."""
        if self.src_mask is not None:
            self.src_mask = self.src_mask.index_select(0, rows)

    def reorder(self, rows: torch.Tensor) -> None:
        """Beam search kept hypotheses ``rows``: keep their caches too."""
        if self.cache is not None:
            self.cache.reorder(rows)


def _eval_mode(model):
    """``eval_mode(model)`` for a module; a duck-typed model (encode/decode only) has no mode."""
    return eval_mode(model) if isinstance(model, nn.Module) else contextlib.nullcontext()


# ---------------------------------------------------------------------------------------------
# Greedy decoding
# ---------------------------------------------------------------------------------------------


def _append_token(tokens, scores, finished, next_token, log_probs, eos_id, pad_id):
    """One step of greedy or sampled decoding: append ``next_token`` (``pad_id`` for sequences
    already finished, at no cost) and its log-probability; mark the sequences that said END."""
    next_token = next_token.masked_fill(finished, pad_id)  # (batch,)
    token_log_prob = log_probs.gather(1, next_token[:, None]).squeeze(1)  # (batch,)
    scores = scores + token_log_prob.masked_fill(finished, 0.0)
    tokens = torch.cat([tokens, next_token[:, None]], dim=1)  # (batch, t + 1)
    return tokens, scores, finished | (next_token == eos_id)


@torch.no_grad()
@validated(rules.greedy_args, trusted=False)
def greedy_decode(
    model,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    *,
    return_scores: bool = False,
    use_cache: bool = True,
    suppress_bos: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Decode every source of the batch by taking the most likely token at each step.

    .. math:: y_t = \arg\max_{w} P(w \mid y_{<t}, x), \qquad y_0 = \text{BEGIN}

    Args:
        model: has ``encode(src)`` and ``decode(tgt, memory, src_mask)`` (see the module
            docstring).
        src: source token ids ``(batch, n_src)``, padded with ``pad_id``.
        max_len: the most tokens to generate per sequence, END included.
        bos_id, eos_id, pad_id: the BEGIN, END and padding token ids.
        return_scores: also return the log-probability :math:`\sum_t \log P(y_t \mid y_{<t}, x)`
            of each output (END included).
        use_cache: feed the decoder only the newest token and keep the keys and values of the
            earlier ones (see the module docstring); ``False`` recomputes the whole prefix at
            every step. Same tokens and scores either way.
        suppress_bos: never emit ``bos_id`` (the default: BEGIN only starts a sequence).
            ``False`` when BEGIN is also a data token (the Annotated Transformer's copy task).

    Returns:
        ``(batch, n_out)`` token ids with ``n_out <= max_len``: BEGIN dropped, END kept, ``pad_id``
        after END. Decoding stops early once every sequence has emitted END. With
        ``return_scores``: ``(tokens, scores)``, ``scores`` ``(batch,)``.
    """
    batch, ids = src.shape[0], (bos_id, eos_id, pad_id)
    with _eval_mode(model):
        memory, src_mask = _encode(model, src)  # (batch, n_src, d_model): the encoder runs once
        steps = _Steps(model, memory, src, src_mask, ids, use_cache, suppress_bos)
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)  # BEGIN
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        scores = torch.zeros(batch, device=src.device)
        for _ in range(max_len):
            log_probs = steps.next_log_probs(tokens)  # (batch, vocab)
            next_token = log_probs.argmax(dim=-1)  # (batch,)
            tokens, scores, finished = _append_token(
                tokens, scores, finished, next_token, log_probs, eos_id, pad_id
            )
            if bool(finished.all()):
                break
    output = tokens[:, 1:]  # (batch, n_out): drop BEGIN
    return (output, scores) if return_scores else output


@torch.no_grad()
@validated(rules.sampling_args, trusted=False)
def sample_decode(
    model,
    src: torch.Tensor,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    generator: torch.Generator | None = None,
    return_scores: bool = False,
    suppress_bos: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Decode every source of the batch by *drawing* each token from the model's distribution.

    .. math:: y_t \sim \operatorname{softmax}\big(\ell_t / T\big)
        \ \text{restricted to the } k \text{ most likely tokens}, \qquad y_0 = \text{BEGIN}

    with :math:`\ell_t` the log-probabilities of the model at step :math:`t`. Greedy and beam
    search look for *the* most probable output; sampling gives a different output on every call,
    which tasks with many right answers need (speech synthesis, story writing: the lecture's
    "decoding needs some randomness"). ``temperature`` :math:`T < 1` sharpens the distribution
    (towards greedy), :math:`T > 1` flattens it; ``top_k`` draws only among the :math:`k` most
    likely tokens (``top_k=1`` is greedy decoding). Derived in ``05_transformer_decoder.ipynb``.

    Args:
        model, src, max_len, bos_id, eos_id, pad_id, return_scores, suppress_bos: as in
            :func:`greedy_decode`.
        temperature: a finite number > 0 dividing the log-probabilities before the softmax.
        top_k: ``None`` (every token may be drawn) or an int >= 1 (tokens tied with the k-th most
            likely one are kept too).
        generator: an optional ``torch.Generator`` (on ``src``'s device), for reproducible draws.

    Returns:
        ``(batch, n_out)`` token ids laid out as in :func:`greedy_decode`; with ``return_scores``
        also the log-probability ``(batch,)`` of each output under the model itself (temperature 1,
        no top-k), END included.
    """
    batch, ids = src.shape[0], (bos_id, eos_id, pad_id)
    with _eval_mode(model):
        memory, src_mask = _encode(model, src)  # (batch, n_src, d_model): the encoder runs once
        steps = _Steps(model, memory, src, src_mask, ids, False, suppress_bos)  # no cache
        tokens = torch.full((batch, 1), bos_id, dtype=torch.long, device=src.device)  # BEGIN
        finished = torch.zeros(batch, dtype=torch.bool, device=src.device)
        scores = torch.zeros(batch, device=src.device)
        for _ in range(max_len):
            log_probs = steps.next_log_probs(tokens)  # (batch, vocab)
            scaled = log_probs / temperature  # (batch, vocab)
            if top_k is not None and top_k < scaled.shape[-1]:
                kth_best = scaled.topk(top_k, dim=-1).values[:, -1:]  # (batch, 1)
                scaled = scaled.masked_fill(scaled < kth_best, -math.inf)  # only the k best
            probs = torch.softmax(scaled, dim=-1)  # (batch, vocab)
            next_token = torch.multinomial(probs, 1, generator=generator).squeeze(1)  # (batch,)
            tokens, scores, finished = _append_token(
                tokens, scores, finished, next_token, log_probs, eos_id, pad_id
            )
            if bool(finished.all()):
                break
    output = tokens[:, 1:]  # (batch, n_out): drop BEGIN
    return (output, scores) if return_scores else output


# ---------------------------------------------------------------------------------------------
# Beam search
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
@validated(rules.beam_args, trusted=False)
def beam_search(
    model,
    src: torch.Tensor,
    beam_width: int,
    max_len: int,
    bos_id: int,
    eos_id: int,
    pad_id: int,
    length_penalty: float = 0.0,
    *,
    return_scores: bool = False,
    use_cache: bool = True,
    suppress_bos: bool = True,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    r"""Keep the ``beam_width`` most probable prefixes at every step instead of only the best one.

    Each step extends every kept prefix (hypothesis) by every token, scores the extensions by
    their total log-probability :math:`\sum_t \log P(y_t \mid y_{<t}, x)`, and keeps the
    ``beam_width`` best of them per source. Greedy decoding is the case ``beam_width = 1``.

    A hypothesis that has emitted END is *finished*: it keeps its slot in the beam with an
    unchanged score (it may only be continued by ``<pad>``, at no cost), so it competes with the
    still-growing ones, whose score can only decrease. The search stops when every hypothesis of
    every source has finished, or after ``max_len`` tokens. The output is the hypothesis with the
    best ``score / length ** length_penalty`` (``length`` = generated tokens, END included):
    ``length_penalty = 0`` picks the most probable sequence, larger values favour longer ones
    (raw log-probabilities favour short outputs; Wu et al. 2016 use a similar normalisation).
    The penalty is applied to the final choice only, not to the pruning during the search.

    Args:
        model, src, max_len, bos_id, eos_id, pad_id, return_scores, use_cache, suppress_bos: as in
            :func:`greedy_decode` (the cache of each kept hypothesis follows it).
        beam_width: number of hypotheses kept per source (>= 1).
        length_penalty: exponent of the length normalisation of the final choice (>= 0).

    Returns:
        ``(batch, n_out)`` token ids laid out as in :func:`greedy_decode` (end columns that hold
        only padding are dropped); with ``return_scores`` also the total log-probability
        ``(batch,)`` of each returned sequence (not normalised).
    """
    batch, device, ids = src.shape[0], src.device, (bos_id, eos_id, pad_id)
    with _eval_mode(model):
        memory, src_mask = _encode(model, src)  # (batch, n_src, d_model)
        # Every hypothesis needs its own copy of its source: rows b*beam ... b*beam + beam - 1.
        copies = torch.arange(batch, device=device).repeat_interleave(beam_width)  # (b*beam,)
        memory = memory.index_select(0, copies)  # (batch * beam, n_src, d_model)
        beam_src = src.index_select(0, copies)  # (batch * beam, n_src)
        steps = _Steps(model, memory, beam_src, src_mask, ids, use_cache, suppress_bos)
        steps.reorder_mask(copies)  # (batch * beam, 1, 1, n_src)
        tokens = torch.full((batch * beam_width, 1), bos_id, dtype=torch.long, device=device)
        # At the start all hypotheses are the same "BEGIN": keep only one alive (score 0),
        # or the first step would fill the beam with beam_width copies of the same extension.
        scores = torch.full((batch, beam_width), -math.inf, device=device)
        scores[:, 0] = 0.0  # (batch, beam)
        finished = torch.zeros(batch, beam_width, dtype=torch.bool, device=device)
        lengths = torch.zeros(batch, beam_width, dtype=torch.long, device=device)
        offsets = torch.arange(batch, device=device)[:, None] * beam_width  # (batch, 1)
        for _ in range(max_len):
            log_probs = steps.next_log_probs(tokens)  # (batch * beam, vocab)
            vocab = log_probs.shape[-1]
            log_probs = log_probs.view(batch, beam_width, vocab)  # (batch, beam, vocab)
            # A finished hypothesis has exactly one continuation, <pad>, with log-probability 0.
            pad_only = torch.full((vocab,), -math.inf, device=device)
            pad_only[pad_id] = 0.0
            log_probs = torch.where(finished[..., None], pad_only, log_probs)
            candidates = scores[..., None] + log_probs  # (batch, beam, vocab)
            # the beam_width best of all beam * vocab extensions of each source:
            scores, flat_index = candidates.view(batch, -1).topk(beam_width, dim=-1)  # (batch,beam)
            parent = flat_index // vocab  # (batch, beam): which hypothesis was extended
            next_token = flat_index % vocab  # (batch, beam): by which token
            rows = (parent + offsets).view(-1)  # (batch * beam,) rows of the parents
            tokens = torch.cat([tokens[rows], next_token.view(-1, 1)], dim=1)  # (batch*beam, t+1)
            steps.reorder(rows)  # each kept hypothesis takes its parent's keys and values
            was_finished = finished.gather(1, parent)  # (batch, beam)
            lengths = lengths.gather(1, parent) + (~was_finished).long()
            # A hypothesis of probability 0 (only when the beam is wider than the choices) is dead.
            finished = was_finished | (next_token == eos_id) | (scores == -math.inf)
            if bool(finished.all()):
                break
        normalised = scores / lengths.clamp(min=1).float() ** length_penalty  # (batch, beam)
        best = normalised.argmax(dim=-1)  # (batch,)
    hypotheses = tokens[:, 1:].view(batch, beam_width, -1)  # (batch, beam, n_out): drop BEGIN
    output = hypotheses[torch.arange(batch, device=device), best]  # (batch, n_out)
    # Other hypotheses may have run longer than the chosen ones: drop all-padding end columns.
    used = (output != pad_id).any(dim=0).nonzero()  # columns where some output has a token
    output = output[:, : int(used.max()) + 1] if len(used) else output[:, :1]
    best_scores = scores.gather(1, best[:, None]).squeeze(1)  # (batch,)
    return (output, best_scores) if return_scores else output


# ---------------------------------------------------------------------------------------------
# Scoring outputs
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
@validated(rules.scoring_args, trusted=False)
def sequence_log_prob(
    model, src: torch.Tensor, output: torch.Tensor, bos_id: int, eos_id: int, pad_id: int, *,
    suppress_bos: bool = True,
) -> torch.Tensor:
    r"""Total log-probability :math:`\sum_t \log P(y_t \mid y_{<t}, x)` of given outputs.

    ``output`` ``(batch, n_out)`` is laid out like the decoders' results (no BEGIN; END, then
    ``pad_id``). One teacher-forced pass: the decoder reads BEGIN + ``output[:, :-1]``. Tokens
    after the first END, and padding, are not counted. Probabilities are those the decoders use
    (``<pad>`` and, with ``suppress_bos``, BEGIN masked out, see the module docstring).
    Returns ``(batch,)``.
    """
    counted = _real_tokens(output, eos_id, pad_id)  # (batch, n_out) bool
    # BEGIN + output[:, :-1]; what follows END cannot change earlier positions (causal mask).
    decoder_input = torch.cat([torch.full_like(output[:, :1], bos_id), output[:, :-1]], dim=1)
    with _eval_mode(model):
        memory, src_mask = _encode(model, src)
        logits = _decode(model, decoder_input, memory, src, src_mask)  # (batch, n_out, vocab)
    log_probs = _log_probs(logits, (bos_id, eos_id, pad_id), suppress_bos)  # as the decoders
    token_log_probs = log_probs.gather(-1, output[..., None]).squeeze(-1)  # (batch, n_out)
    return token_log_probs.masked_fill(~counted, 0.0).sum(dim=-1)


def _real_tokens(sequences: torch.Tensor, eos_id: int, pad_id: int) -> torch.Tensor:
    """Bool ``(batch, n)``: True up to and including the first END; padding never counts."""
    is_eos = sequences == eos_id
    eos_before = (is_eos.long().cumsum(dim=1) - is_eos.long()) > 0  # an END came earlier
    return ~eos_before & (sequences != pad_id)


def _as_token_lists(sequences) -> list[list]:
    if isinstance(sequences, torch.Tensor):
        return sequences.tolist()
    return [row.tolist() if isinstance(row, torch.Tensor) else list(row) for row in sequences]


def _trim(row: list, eos_id, pad_id) -> list:
    if eos_id is not None and eos_id in row:
        row = row[: row.index(eos_id) + 1]  # keep END: stopping is part of the output
    while row and pad_id is not None and row[-1] == pad_id:
        row = row[:-1]
    return row


@validated(rules.prediction_rows)
def exact_match(
    predictions, targets, *, eos_id: int | None = None, pad_id: int | None = 0, reduce: bool = True
) -> float | torch.Tensor:
    """Fraction of outputs equal to their target, token for token (END included).

    ``predictions`` and ``targets``: 2-D tensors (of possibly different widths) or lists of token
    sequences, one row per example. Trailing ``pad_id`` are ignored; with ``eos_id`` everything
    after the first END is ignored too (END itself counts: an output that never stops is wrong).
    ``reduce=False`` returns a bool tensor ``(n_examples,)`` instead of the fraction.
    """
    predicted_rows, target_rows = _as_token_lists(predictions), _as_token_lists(targets)
    matches = torch.tensor(
        [
            _trim(predicted, eos_id, pad_id) == _trim(target, eos_id, pad_id)
            for predicted, target in zip(predicted_rows, target_rows, strict=True)
        ]
    )
    return matches.float().mean().item() if reduce else matches


# ---------------------------------------------------------------------------------------------
# BLEU
# ---------------------------------------------------------------------------------------------


def _ngrams(tokens: Sequence, n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


@validated(rules.bleu_args)
def sentence_bleu(
    candidate: Sequence, reference: Sequence, max_n: int = 4, smooth: bool = True
) -> float:
    r"""BLEU of one candidate against one reference (Papineni et al. 2002), in [0, 1].

    .. math::
        \text{BLEU} = \text{BP} \cdot \exp\Big(\frac{1}{N}\sum_{n=1}^{N} \log p_n\Big), \qquad
        \text{BP} = \min\big(1,\; e^{\,1 - |r| / |c|}\big)

    where :math:`p_n` is the *clipped* n-gram precision: each candidate n-gram counts at most as
    often as it occurs in the reference. ``smooth=True`` adds one to the numerator and
    denominator of :math:`p_n` for ``n > 1`` ("add-one" smoothing, Lin & Och 2004), so one
    missing 4-gram in a short sentence does not make the score 0. Tokens can be anything
    hashable (strings or ids); strip BEGIN/END/padding first.
    """
    candidate, reference = list(candidate), list(reference)
    if not candidate or not reference:
        return 0.0
    log_precision = 0.0
    for n in range(1, max_n + 1):
        candidate_ngrams, reference_ngrams = _ngrams(candidate, n), _ngrams(reference, n)
        matched = sum(min(count, reference_ngrams[g]) for g, count in candidate_ngrams.items())
        total = sum(candidate_ngrams.values())
        if smooth and n > 1:
            matched, total = matched + 1, total + 1
        if matched == 0:
            return 0.0
        log_precision += math.log(matched / total) / max_n
    brevity_penalty = min(1.0, math.exp(1 - len(reference) / len(candidate)))
    return brevity_penalty * math.exp(log_precision)
