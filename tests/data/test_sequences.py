"""lectures_lib.data.sequences: the reverse and sort tasks of section 04."""

from __future__ import annotations

import torch

from lectures_lib.data import reverse_task, sequence_task_splits, sort_task


def test_reverse_targets_are_the_reversed_inputs():
    tokens, targets = reverse_task(50, 6, 10, seed=3)
    assert tokens.shape == targets.shape == (50, 6) and tokens.dtype == torch.long
    assert torch.equal(targets, tokens.flip(-1))
    assert tokens.min() >= 1 and tokens.max() <= 9, "0 is reserved for padding"


def test_sort_targets_are_sorted_inputs():
    tokens, targets = sort_task(40, 5, 7, seed=1)
    assert torch.equal(targets, tokens.sort(-1).values)
    assert not torch.equal(targets, tokens)


def test_variable_lengths_are_padded_at_the_end():
    tokens, targets = reverse_task(200, 7, 6, seed=0, min_len=3, pad_id=0)
    lengths = (tokens != 0).sum(-1)
    assert lengths.min() >= 3 and lengths.max() <= 7 and len(lengths.unique()) > 1
    for row, target, length in zip(tokens, targets, lengths.tolist(), strict=True):
        assert (row[length:] == 0).all() and (row[:length] != 0).all()
        assert torch.equal(target[:length], row[:length].flip(0))
        assert (target[length:] == 0).all()


def test_deterministic_and_seed_dependent():
    first = reverse_task(30, 5, 8, seed=7)
    again = reverse_task(30, 5, 8, seed=7)
    other = reverse_task(30, 5, 8, seed=8)
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert not torch.equal(first[0], other[0])


def test_splits_do_not_overlap():
    (train_x, train_y), (test_x, test_y) = sequence_task_splits("reverse", 300, 100, 5, 5, seed=0)
    assert train_x.shape == (300, 5) and test_x.shape == (100, 5)
    train_rows = {tuple(row) for row in train_x.tolist()}
    assert len(train_rows) == 300, "every training sequence is distinct"
    assert not train_rows & {tuple(row) for row in test_x.tolist()}
    assert torch.equal(test_y, test_x.flip(-1))
