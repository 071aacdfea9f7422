"""lectures_lib.data.long_range: the long-range retrieval task is what its docstring says."""

from __future__ import annotations

import pytest
import torch

from lectures_lib.data import retrieval_task, retrieval_vocab_size


@pytest.mark.parametrize(("seq_len", "n_keys", "n_values", "n_filler"), [(16, 4, 4, 8), (64, 3, 5, 2),
                                                                         (8, 4, 2, 1)])
def test_every_row_holds_one_pair_per_key_in_the_first_half_and_a_query(seq_len, n_keys, n_values,
                                                                          n_filler):
    tokens, labels = retrieval_task(300, seq_len, n_keys=n_keys, n_values=n_values,
                                    n_filler=n_filler, seed=3)
    assert tokens.shape == (300, seq_len) and labels.shape == (300,)
    assert tokens.dtype == labels.dtype == torch.int64
    vocab = retrieval_vocab_size(n_keys, n_values, n_filler)
    assert int(tokens.min()) >= 1 and int(tokens.max()) < vocab
    first_query, first_pair = 1 + n_filler, 1 + n_filler + n_keys
    for row, label in zip(tokens.tolist(), labels.tolist()):
        query = row[-1]
        assert first_query <= query < first_pair
        pairs = [(i, t) for i, t in enumerate(row) if t >= first_pair]
        assert len(pairs) == n_keys and all(i < seq_len // 2 for i, _ in pairs)
        keys = sorted((t - first_pair) // n_values for _, t in pairs)
        assert keys == list(range(n_keys)), "one pair per key"
        asked = [t for _, t in pairs if (t - first_pair) // n_values == query - first_query]
        assert label == (asked[0] - first_pair) % n_values, "the label is the asked key's value"
        assert all(1 <= t <= n_filler for t in row[seq_len // 2:-1]), "the second half is filler"


def test_deterministic_and_balanced_enough():
    a, b = retrieval_task(2000, 32, seed=5), retrieval_task(2000, 32, seed=5)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(retrieval_task(2000, 32, seed=6)[0], a[0])
    counts = torch.bincount(a[1], minlength=4)
    assert bool((counts > 400).all()), counts
