"""Sequence-to-sequence toy tasks of equal input and output length, for an encoder (section 04).

* **reverse**: the target is the input read backwards: ``[3, 7, 5] -> [5, 7, 3]``;
* **sort**: the target is the input sorted in ascending order: ``[3, 7, 5] -> [3, 5, 7]``.

Both give a label per input position (sequence labelling), so an encoder alone can solve them: in
the reverse task the answer at output position ``i`` is the token at input position
``n - 1 - i``, a position the model can find from the positional encoding, and its attention map
shows the anti-diagonal. Tiny, synthetic and CPU-friendly (the classic toy of the UvA tutorial).

Token id ``pad_id`` (0 by default) is reserved for padding; real tokens are ``1 ... vocab_size-1``.
With ``min_len`` < ``seq_len`` the sequences have different lengths and are padded at the end,
and the targets hold ``pad_id`` there (train with ``ignore_index=pad_id``).
Every example of one call is a distinct sequence, so the train and test splits of
:func:`sequence_task_splits` never share a sequence. Derived in ``04_transformer_encoder.ipynb``.
"""

from __future__ import annotations

import torch

from ..utils import check_non_negative_int, check_positive_int, check_seed

__all__ = ["reverse_task", "sort_task", "sequence_task", "sequence_task_splits"]

TASKS = ("reverse", "sort")


def _check_sizes(n_examples, seq_len, vocab_size, min_len, pad_id) -> tuple[int, int, int, int]:
    n_examples = check_positive_int(n_examples, "n_examples")
    seq_len = check_positive_int(seq_len, "seq_len")
    vocab_size = check_positive_int(vocab_size, "vocab_size")
    min_len = seq_len if min_len is None else check_positive_int(min_len, "min_len")
    if min_len > seq_len:
        raise ValueError(f"min_len={min_len} is larger than seq_len={seq_len}")
    pad_id = check_non_negative_int(pad_id, "pad_id")
    if pad_id >= vocab_size:
        raise ValueError(f"pad_id={pad_id} must be a token id below vocab_size={vocab_size}")
    if vocab_size < 2:
        raise ValueError(f"vocab_size must be >= 2 (padding plus one real token), got {vocab_size}")
    n_symbols = vocab_size - 1
    n_distinct = sum(n_symbols**length for length in range(min_len, seq_len + 1))
    if n_examples > n_distinct // 2:
        raise ValueError(
            f"asked for {n_examples} distinct sequences, but only {n_distinct} exist with "
            f"{n_symbols} symbols and lengths {min_len}..{seq_len}; keep n_examples below half "
            "of that (use a longer seq_len or a larger vocab_size)"
        )
    return n_examples, seq_len, vocab_size, min_len


def _distinct_sequences(
    n_examples: int, seq_len: int, vocab_size: int, min_len: int, pad_id: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n_examples`` distinct padded sequences ``(n, seq_len)`` and their lengths ``(n,)``."""
    generator = torch.Generator().manual_seed(seed)
    symbols = torch.tensor([t for t in range(vocab_size) if t != pad_id])  # real token ids
    seen: set[tuple[int, ...]] = set()
    kept_rows: list[torch.Tensor] = []
    kept_lengths: list[torch.Tensor] = []
    count = 0
    while count < n_examples:
        batch = 2 * (n_examples - count) + 16
        draws = symbols[torch.randint(len(symbols), (batch, seq_len), generator=generator)]
        lengths = torch.randint(min_len, seq_len + 1, (batch,), generator=generator)
        keep = []
        for index, (row, length) in enumerate(zip(draws.tolist(), lengths.tolist(), strict=True)):
            key = tuple(row[:length])
            if key in seen:
                continue  # keep every sequence unique: train and test never overlap
            seen.add(key)
            keep.append(index)
            count += 1
            if count == n_examples:
                break
        kept_rows.append(draws[keep])
        kept_lengths.append(lengths[keep])
    tokens, lengths = torch.cat(kept_rows), torch.cat(kept_lengths)  # (n, seq_len), (n,)
    padding = torch.arange(seq_len)[None, :] >= lengths[:, None]  # (n, seq_len)
    return tokens.masked_fill(padding, pad_id), lengths


def sequence_task(
    task: str,
    n_examples: int,
    seq_len: int,
    vocab_size: int,
    *,
    seed: int = 0,
    min_len: int | None = None,
    pad_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens, targets)``, both int64 ``(n_examples, seq_len)``, for ``task`` "reverse"/"sort".

    ``tokens[b, :length]`` are real tokens in ``1 ... vocab_size-1`` (when ``pad_id=0``),
    ``tokens[b, length:]`` is padding; ``targets[b, :length]`` is the reversed (or sorted) real
    part and ``targets[b, length:] == pad_id``. All rows are distinct sequences. Deterministic:
    the same arguments give the same tensors.
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    n_examples, seq_len, vocab_size, min_len = _check_sizes(
        n_examples, seq_len, vocab_size, min_len, pad_id
    )
    seed = check_seed(seed)
    tokens, lengths = _distinct_sequences(n_examples, seq_len, vocab_size, min_len, pad_id, seed)
    targets = torch.full_like(tokens, pad_id)
    for length in lengths.unique().tolist():
        rows = lengths == length  # all sequences of this length at once
        real = tokens[rows, :length]  # (count, length)
        if task == "reverse":
            targets[rows, :length] = real.flip(-1)
        else:
            targets[rows, :length] = real.sort(dim=-1).values
    return tokens, targets


def reverse_task(
    n_examples: int,
    seq_len: int,
    vocab_size: int,
    *,
    seed: int = 0,
    min_len: int | None = None,
    pad_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The reverse task: ``targets[b, i] = tokens[b, length - 1 - i]``. See :func:`sequence_task`."""
    return sequence_task(
        "reverse", n_examples, seq_len, vocab_size, seed=seed, min_len=min_len, pad_id=pad_id
    )


def sort_task(
    n_examples: int,
    seq_len: int,
    vocab_size: int,
    *,
    seed: int = 0,
    min_len: int | None = None,
    pad_id: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The sort task: ``targets[b]`` is ``tokens[b]`` sorted ascending. See :func:`sequence_task`."""
    return sequence_task(
        "sort", n_examples, seq_len, vocab_size, seed=seed, min_len=min_len, pad_id=pad_id
    )


def sequence_task_splits(
    task: str,
    n_train: int,
    n_test: int,
    seq_len: int,
    vocab_size: int,
    *,
    seed: int = 0,
    min_len: int | None = None,
    pad_id: int = 0,
) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """``((train_tokens, train_targets), (test_tokens, test_targets))`` with no shared sequence.

    Draws ``n_train + n_test`` distinct sequences at once and splits them, so every test
    sequence is held out: a model must generalise, not remember.
    """
    n_train = check_positive_int(n_train, "n_train")
    n_test = check_positive_int(n_test, "n_test")
    tokens, targets = sequence_task(
        task, n_train + n_test, seq_len, vocab_size, seed=seed, min_len=min_len, pad_id=pad_id
    )
    return (tokens[:n_train], targets[:n_train]), (tokens[n_train:], targets[n_train:])
