"""The data of the training exercises (03's skip-flip, 04's sort, 05's reversal) and their graded
*variants*: :mod:`lectures_lib.checks.trained` re-exports every public name here (the notebooks
import them from there); the module docstring there says how variants keep pasted weights out."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ._base import task_variant_generator

SKIP_FLIP_PAD_ID, SKIP_FLIP_IGNORE_INDEX = 2, -100
_HELD_OUT_SEED = 90210  # never used by a notebook


def make_skip_flip_task(n_sequences: int, min_len: int = 8, max_len: int = 16, *, seed: int = 0):
    """``(tokens, labels)``: random bits then padding (``SKIP_FLIP_PAD_ID``); ``labels[b, i] =
    1`` when bit ``i`` differs from bit ``i - 2`` (two to the left), else 0;
    ``SKIP_FLIP_IGNORE_INDEX`` on the first two tokens and on padding. Deterministic in ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(min_len, max_len + 1, (n_sequences,), generator=generator)
    real = torch.arange(max_len)[None, :] < lengths[:, None]  # (n, max_len)
    bits = torch.randint(0, 2, (n_sequences, max_len), generator=generator)
    tokens = bits.masked_fill(~real, SKIP_FLIP_PAD_ID)
    labels = torch.full_like(tokens, SKIP_FLIP_IGNORE_INDEX)
    labels[:, 2:] = (bits[:, 2:] != bits[:, :-2]).long().masked_fill(~real[:, 2:],
                                                                      SKIP_FLIP_IGNORE_INDEX)
    return tokens, labels


SORT_SEQ_LEN, SORT_VOCAB_SIZE = 6, 8
# A graded variant of a task is kept only if weights trained on the public task, unchanged,
# score at most this on it (on a fixed sample of the task).
VARIANT_MAX_OVERLAP = 0.5


def sort_variant():
    """The sort task's graded variant: None (the public task), or ``relabel`` ``(vocab,)``.

    When graded (:func:`~lectures_lib.checks._base.task_variant`, set from the instructor's
    secret and the submission), ``relabel[r]`` is the token shown for rank ``r`` (0 stays 0):
    the tokens are sorted in a secret order, so a sorter trained on the public task is below the
    target (the variant is kept only if it scores at most :data:`VARIANT_MAX_OVERLAP`). Learning
    it is exactly as hard: it is the public task with the embedding's and the output's rows in
    another order, and those rows are learned from the same initial distribution."""
    generator = task_variant_generator("sort")
    if generator is None:
        return None
    ranks = torch.randint(1, SORT_VOCAB_SIZE, (2000, SORT_SEQ_LEN),
                          generator=torch.Generator().manual_seed(0))
    while True:
        relabel = torch.cat([torch.zeros(1, dtype=torch.long),
                             1 + torch.randperm(SORT_VOCAB_SIZE - 1, generator=generator)])
        tokens, targets = sort_task(ranks, relabel)
        if float((tokens.sort(dim=-1).values == targets).float().mean()) <= VARIANT_MAX_OVERLAP:
            return relabel


def sort_task(ranks: torch.Tensor, relabel=None):
    """``(tokens, targets)`` of the sort task for ``ranks`` (ints in ``1 .. SORT_VOCAB_SIZE-1``)
    under the variant ``relabel`` (:func:`sort_variant`; None: tokens = ranks, sorted)."""
    targets = ranks.sort(dim=-1).values
    if relabel is None:
        return ranks, targets
    return relabel[ranks], relabel[targets]


def make_sort_data(n_examples: int, *, seed: int = 0):
    """``(tokens, targets)`` int64 ``(n, SORT_SEQ_LEN)``: tokens in ``1 .. SORT_VOCAB_SIZE-1``,
    targets the tokens sorted ascending. Deterministic in ``seed``.

    When graded, the same draws follow the submission's own variant of the task
    (:func:`sort_variant`), and so does the checker's held-out data: a model trained on this
    function's data passes, weights trained elsewhere do not."""
    generator = torch.Generator().manual_seed(seed)
    ranks = torch.randint(1, SORT_VOCAB_SIZE, (n_examples, SORT_SEQ_LEN), generator=generator)
    return sort_task(ranks, sort_variant())


REVERSE_LEN, REVERSE_VOCAB_SIZE = 5, 10
REVERSE_PAD_ID, REVERSE_BOS_ID, REVERSE_EOS_ID = 0, 1, 2


class ReversePairs(NamedTuple):
    """``src (n, REVERSE_LEN)`` in ``3 .. REVERSE_VOCAB_SIZE-1``; ``tgt_in = [BOS] + reversed``
    and ``tgt_out = reversed + [EOS]``, both ``(n, REVERSE_LEN + 1)``."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor


def reverse_variant():
    """The reversal task's graded variant: None (the public task), or ``relabel`` ``(vocab,)``.

    When graded, the target is ``relabel[src.flip(-1)]``: the reversed source in a secret
    relabelling of the target vocabulary with at most 2 tokens left in place (``BOS``, ``EOS``,
    ``PAD`` unchanged), so a reverser trained on the public task gets almost no sequence right.
    Learning it is exactly as hard (the target embedding's and output's rows in another order)."""
    generator = task_variant_generator("reverse")
    if generator is None:
        return None
    while True:
        relabel = torch.arange(REVERSE_VOCAB_SIZE)
        relabel[3:] = 3 + torch.randperm(REVERSE_VOCAB_SIZE - 3, generator=generator)
        if int((relabel[3:] == torch.arange(3, REVERSE_VOCAB_SIZE)).sum()) <= 2:
            return relabel


def reverse_task(src: torch.Tensor, relabel=None) -> ReversePairs:
    """The pairs for sources ``src`` under the variant ``relabel`` (:func:`reverse_variant`;
    None: the plain reversal)."""
    out = src.flip(-1) if relabel is None else relabel[src.flip(-1)]
    n_examples = src.shape[0]
    bos = torch.full((n_examples, 1), REVERSE_BOS_ID)
    eos = torch.full((n_examples, 1), REVERSE_EOS_ID)
    return ReversePairs(src, torch.cat([bos, out], 1), torch.cat([out, eos], 1))


def make_reverse_pairs(n_examples: int, *, seed: int = 0) -> ReversePairs:
    """Source sequences and their reversal, for a seq2seq model. Deterministic in ``seed``.

    When graded, the targets follow the submission's own variant of the task
    (:func:`reverse_variant`), and so does the checker's held-out data."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(3, REVERSE_VOCAB_SIZE, (n_examples, REVERSE_LEN), generator=generator)
    return reverse_task(src, reverse_variant())
