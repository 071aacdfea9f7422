"""Tests of section 07's long-range task, ``lectures_lib.data.binding`` (bind a value to its key).

The labels are recomputed from the docstring's words with plain loops, and the property the
comparison rests on (the bag of tokens does not depend on the label) is checked on the data.
"""

from collections import Counter

import pytest
import torch

from lectures_lib.data import binding_task, binding_tokens, binding_vocab_size


def reference(tokens, n_pairs, n_values, n_filler):
    """Labels from the definition, one row at a time; asserts the layout on the way."""
    ids = binding_tokens(n_pairs, n_values, n_filler)
    labels = []
    for row in tokens.tolist():
        n = len(row)
        half = n // 2
        assert row[-1] in ids["query"], "the last token is a query"
        asked = row[-1] - ids["query"].start
        true, distractors = {}, Counter()
        for position, token in enumerate(row[:-1]):
            assert token not in ids["query"] and token != 0, "only the last token is a query"
            if token in ids["pair"]:
                key, value = divmod(token - ids["pair"].start, n_values)
                if position < half:
                    assert key not in true, "one true pair per key"
                    true[key] = value
                else:
                    distractors[key] += 1
        assert sorted(true) == list(range(n_pairs)), "every key has its true pair in the first half"
        assert all(distractors[key] == n_values - 1 for key in range(n_pairs))
        labels.append(true[asked])
    return torch.tensor(labels)


@pytest.mark.parametrize("seq_len, n_pairs, n_values, n_filler", [(32, 4, 4, 8), (27, 3, 5, 2),
                                                                   (64, 8, 2, 1), (256, 4, 4, 8)])
def test_labels_follow_the_definition(seq_len, n_pairs, n_values, n_filler):
    tokens, labels = binding_task(50, seq_len, n_pairs=n_pairs, n_values=n_values,
                                  n_filler=n_filler, seed=3)
    assert tokens.shape == (50, seq_len) and labels.shape == (50,)
    assert tokens.dtype == labels.dtype == torch.int64
    assert int(tokens.max()) < binding_vocab_size(n_pairs, n_values, n_filler)
    torch.testing.assert_close(labels, reference(tokens, n_pairs, n_values, n_filler))


def test_the_bag_of_tokens_does_not_depend_on_the_label():
    # Every pair token occurs exactly once in every row: what a bag sees of the pairs is constant.
    tokens, labels = binding_task(400, 48, seed=0)
    pairs = binding_tokens()["pair"]
    for row in tokens:
        assert sorted(t for t in row.tolist() if t in pairs) == list(pairs)
    # and the labels are balanced, so that chance is 1 / n_values
    counts = torch.bincount(labels, minlength=4).float() / len(labels)
    assert (counts - 0.25).abs().max() < 0.06


def test_deterministic_and_seeded():
    a, b = binding_task(20, 32, seed=5), binding_task(20, 32, seed=5)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], binding_task(20, 32, seed=6)[0])


def test_positions_are_spread():
    tokens, _ = binding_task(500, 64, seed=1)
    pairs = binding_tokens()["pair"]
    is_pair = (tokens >= pairs.start) & (tokens < pairs.stop)
    seen = is_pair.any(0)
    assert bool(seen[:63].all()), "every position but the query's holds a pair in some row"
