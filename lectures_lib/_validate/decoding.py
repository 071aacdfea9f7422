"""The rules of :mod:`lectures_lib.decoding`: the model, the source, the special ids, the
decoders' settings, what a model returned, the metrics' inputs.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import torch

from ..utils import check_non_negative_int, check_tensor
from .settings import check_settings, finite_number


def model_and_source(model: object, src: object) -> None:
    """A model with ``encode`` and ``decode`` (as the Transformer), and token ids ``src``
    ``(batch >= 1, n_src >= 1)``."""
    for method in ("encode", "decode"):
        if not callable(getattr(model, method, None)):
            raise TypeError(
                f"model must have an `{method}` method (like "
                f"lectures_lib.models.Transformer), got {type(model).__name__}"
            )
    check_tensor(src, "src", ndim=2, dtype="integer")
    if src.shape[0] == 0:
        raise ValueError(f"src must hold at least one sequence (batch >= 1), got shape {tuple(src.shape)}")
    if src.shape[1] == 0:
        raise ValueError(
            f"src must hold at least one token per sequence, got shape {tuple(src.shape)}"
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


def decoded_logits(logits: object, tokens: torch.Tensor, ids: tuple[int, ...], method: str) -> None:
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


def greedy_args(model, src, max_len, bos_id, eos_id, pad_id, *, return_scores=False,
                use_cache=True, suppress_bos=True) -> None:
    """The door of every decoder: the model, the source, the special ids, the settings."""
    model_and_source(model, src)
    check_settings(max_len=max_len)
    special_ids(bos_id, eos_id, pad_id, model)
    check_settings(return_scores=return_scores, suppress_bos=suppress_bos, use_cache=use_cache)


def sampling_args(model, src, max_len, bos_id, eos_id, pad_id, *, temperature=1.0, top_k=None,
                  generator=None, return_scores=False, suppress_bos=True) -> None:
    greedy_args(model, src, max_len, bos_id, eos_id, pad_id, return_scores=return_scores,
                suppress_bos=suppress_bos)
    finite_number(temperature, "temperature", terse=True)
    check_settings(top_k=top_k, generator=generator)


def beam_args(model, src, beam_width, max_len, bos_id, eos_id, pad_id, length_penalty=0.0, *,
              return_scores=False, use_cache=True, suppress_bos=True) -> None:
    greedy_args(model, src, max_len, bos_id, eos_id, pad_id, return_scores=return_scores,
                use_cache=use_cache, suppress_bos=suppress_bos)
    check_settings(beam_width=beam_width)
    finite_number(length_penalty, "length_penalty", inclusive=True, terse=True)


def scoring_args(model, src, output, bos_id, eos_id, pad_id, *, suppress_bos=True) -> None:
    model_and_source(model, src)
    check_tensor(output, "output", ndim=2, dtype="integer")
    special_ids(bos_id, eos_id, pad_id, model)
    check_settings(suppress_bos=suppress_bos)
    if output.shape[0] != src.shape[0] or output.shape[1] == 0:
        raise ValueError(
            f"output must have shape (batch={src.shape[0]}, n_out >= 1), got {tuple(output.shape)}"
        )


def token_lists(sequences: object, name: str) -> None:
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


def prediction_rows(predictions, targets, *, eos_id=None, pad_id=0, reduce=True) -> None:
    token_lists(predictions, "predictions")
    token_lists(targets, "targets")
    if len(predictions) != len(targets):
        raise ValueError(
            f"predictions and targets must have the same number of rows, got "
            f"{len(predictions)} and {len(targets)}"
        )
    if not len(targets):
        raise ValueError("exact_match needs at least one example, got none")
    check_settings(reduce=reduce)


def bleu_args(candidate, reference, max_n=4, smooth=True) -> None:
    check_settings(max_n=max_n, smooth=smooth)
    for name, tokens in (("candidate", candidate), ("reference", reference)):
        if isinstance(tokens, (str, torch.Tensor)) or not isinstance(tokens, Sequence):
            raise TypeError(f"{name} must be a list of tokens, got {type(tokens).__name__}")
        for position, token in enumerate(tokens):
            if not isinstance(token, Hashable):
                raise TypeError(
                    f"{name}[{position}] is a {type(token).__name__}: tokens must be hashable "
                    "(strings or ints) so that n-grams can be counted"
                )
