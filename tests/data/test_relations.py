"""The successor-and-neighbour task of section 02: what it generates is what its docstring says."""

import pytest
import torch

from lectures_lib.data import (
    format_two_relations,
    make_two_relations,
    two_relations_vocab_size,
)


def test_shapes_dtypes_and_determinism():
    data = make_two_relations(50, num_letters=6, num_digits=3, seed=7)
    for name in ("tokens", "successor", "previous", "letters", "digits"):
        tensor = getattr(data, name)
        assert tensor.shape == (50, 6) and tensor.dtype == torch.long, name
    assert data.labels.shape == (50, 6, 2) and data.labels.dtype == torch.long
    again = make_two_relations(50, num_letters=6, num_digits=3, seed=7)
    other = make_two_relations(50, num_letters=6, num_digits=3, seed=8)
    assert all(torch.equal(a, b) for a, b in zip(data, again, strict=True))
    assert not torch.equal(data.tokens, other.tokens)


def test_tokens_are_a_permutation_of_letters_with_digits():
    num_letters, num_digits = 5, 4
    data = make_two_relations(40, num_letters, num_digits, seed=1)
    assert int(data.tokens.max()) < two_relations_vocab_size(num_letters, num_digits)
    assert torch.equal(data.tokens, data.letters * num_digits + data.digits)
    for row in data.letters:
        assert sorted(row.tolist()) == list(range(num_letters)), "each letter exactly once"
    assert set(data.digits.unique().tolist()) == set(range(num_digits))


def test_labels_follow_the_two_relations_computed_by_loops():
    num_letters, num_digits = 5, 3
    data = make_two_relations(30, num_letters, num_digits, seed=2)
    for b in range(30):
        letters, digits = data.letters[b].tolist(), data.digits[b].tolist()
        for i in range(num_letters):
            succ = letters.index((letters[i] + 1) % num_letters)  # next letter of the alphabet
            prev = (i - 1) % num_letters  # previous position, cyclic
            assert data.successor[b, i] == succ and data.previous[b, i] == prev
            assert data.labels[b, i].tolist() == [digits[succ], digits[prev]]
            assert succ != i, "a letter is never its own successor"


def test_the_two_relations_mostly_point_to_different_positions():
    data = make_two_relations(2000, num_letters=8, num_digits=4, seed=3)
    same = (data.successor == data.previous).float().mean().item()
    # The successor is uniform over the 7 other positions, so it is the previous one 1/7 of the
    # time; the two relations really are different.
    assert abs(same - 1 / 7) < 0.02


def test_format_two_relations():
    tokens = torch.tensor([2 * 4 + 3, 0 * 4 + 1, 3 * 4 + 0, 1 * 4 + 2])
    assert format_two_relations(tokens, 4) == ["C3", "A1", "D0", "B2"]
    data = make_two_relations(1, num_letters=4, num_digits=4, seed=0)
    names = format_two_relations(data.tokens[0], 4)
    assert sorted(name[0] for name in names) == ["A", "B", "C", "D"]


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(num_sequences=0), ValueError, "num_sequences must be >= 1, got 0"),
        (dict(num_sequences=2.5), TypeError, "num_sequences must be an int"),
        (dict(num_sequences=3, num_letters=2), ValueError, "num_letters must be >= 3.*got 2"),
        (dict(num_sequences=3, num_digits=1), ValueError, "num_digits must be >= 2.*got 1"),
        (dict(num_sequences=3, seed=True), TypeError, "seed must be an int"),
    ],
)
def test_bad_arguments_are_rejected(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        make_two_relations(**kwargs)
