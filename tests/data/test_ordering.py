"""The section-03 toy task "did the bit flip here?": deterministic, labels as defined."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.data import (
    FLIP_IGNORE_INDEX,
    FLIP_PAD_ID,
    FlipTask,
    best_order_blind_accuracy,
    make_flip_task,
)


def test_deterministic_for_a_seed():
    a = make_flip_task(50, 4, 12, seed=3)
    b = make_flip_task(50, 4, 12, seed=3)
    c = make_flip_task(50, 4, 12, seed=4)
    assert isinstance(a, FlipTask)
    assert torch.equal(a.tokens, b.tokens) and torch.equal(a.labels, b.labels)
    assert not torch.equal(a.tokens, c.tokens)


def test_shapes_lengths_and_balance():
    data = make_flip_task(400, 5, 11, seed=0)
    assert data.tokens.shape == data.labels.shape == (400, 11)
    assert data.tokens.dtype == data.labels.dtype == torch.int64
    real = data.tokens != FLIP_PAD_ID
    lengths = real.sum(dim=1)
    assert lengths.min() == 5 and lengths.max() == 11, "lengths cover min_len ... max_len"
    for row, n in zip(data.tokens, lengths.tolist(), strict=True):
        assert bool((row[:n] != FLIP_PAD_ID).all()), "real tokens first"
        assert bool((row[n:] == FLIP_PAD_ID).all()), "padding at the end"
        ones = int((row == 1).sum())
        assert ones in (n // 2, n - n // 2), "half 0s, half 1s"
    odd = lengths % 2 == 1
    majority_one = (data.tokens == 1).sum(dim=1) > lengths // 2
    assert 0 < int((majority_one & odd).sum()) < int(odd.sum()), "either bit may get the extra one"


def test_labels_follow_the_definition():
    data = make_flip_task(200, 2, 9, seed=1)
    for tokens, labels in zip(data.tokens.tolist(), data.labels.tolist(), strict=True):
        for i, (token, label) in enumerate(zip(tokens, labels, strict=True)):
            if i == 0 or token == FLIP_PAD_ID:
                assert label == FLIP_IGNORE_INDEX
            else:
                assert label == int(token != tokens[i - 1])


def test_labels_are_nearly_balanced():
    data = make_flip_task(2000, 8, 16, seed=0)
    labelled = data.labels != FLIP_IGNORE_INDEX
    flip_rate = data.labels[labelled].float().mean().item()
    assert 0.5 < flip_rate < 0.56, "P(flip) = (n/2) / (n - 1): a little above one half"


def test_best_order_blind_accuracy_formula():
    data = make_flip_task(300, 8, 8, seed=2)
    assert best_order_blind_accuracy(*data) == pytest.approx(4 / 7), "n = 8: max(4/7, 3/7)"
    data = make_flip_task(300, 3, 3, seed=2)
    # n = 3 with bits (a, a, b): a token a has 1 other-valued token among 2 -> 1/2; a token b
    # has 2 -> 1. Labelled tokens are positions 1 and 2, averaged over the arrangements.
    expected = 0.0
    count = 0
    for tokens, labels in zip(data.tokens.tolist(), data.labels.tolist(), strict=True):
        for token, label in zip(tokens, labels, strict=True):
            if label != FLIP_IGNORE_INDEX:
                other = sum(t != token for t in tokens)
                p = other / 2
                expected += max(p, 1 - p)
                count += 1
    assert best_order_blind_accuracy(*data) == pytest.approx(expected / count)


def test_best_order_blind_accuracy_is_achieved_by_the_bag_rule():
    """The Bayes rule that sees a token and the bag reaches the bound on a large sample."""
    data = make_flip_task(4000, 6, 13, seed=5)
    real = data.tokens != FLIP_PAD_ID
    lengths = real.sum(dim=1, keepdim=True)
    ones = (data.tokens == 1).sum(dim=1, keepdim=True)
    other = torch.where(data.tokens == 1, lengths - ones, ones)
    guess_flip = (other / (lengths - 1) > 0.5).long()  # predict the likelier label
    labelled = data.labels != FLIP_IGNORE_INDEX
    empirical = (guess_flip == data.labels)[labelled].float().mean().item()
    assert empirical == pytest.approx(best_order_blind_accuracy(*data), abs=0.01)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "words"),
    [
        ((0, 4, 8), {}, ValueError, "n_sequences must be >= 1"),
        ((5, 1, 8), {}, ValueError, "min_len must be >= 2"),
        ((5, 9, 8), {}, ValueError, "min_len must be <= max_len"),
        ((5, 4, 8.0), {}, TypeError, "max_len must be an int"),
        ((5, 4, 8), {"seed": 1.5}, TypeError, "seed must be an int"),
    ],
)
def test_generator_validates_its_arguments(args, kwargs, error, words):
    with pytest.raises(error, match=words):
        make_flip_task(*args, **kwargs)
