"""Tests of section 01's toy task, ``lectures_lib.data.labelling`` (dictionary lookup).

The labels are recomputed from the task's definition with plain loops, so the generator's
vectorised code is checked against the words of its docstring.
"""

import pytest
import torch

from lectures_lib.data import labelling
from lectures_lib.data.labelling import (
    LOOKUP_IGNORE_INDEX,
    lookup_labelling,
    lookup_labelling_splits,
    lookup_num_features,
    lookup_pad_id,
    lookup_token_names,
    lookup_vocab_size,
)


def reference_labels(tokens, n_symbols, n_values, min_distance):
    """Labels straight from the definition, one sequence and one token at a time."""
    pad = n_symbols + n_symbols * n_values
    labels = []
    for row in tokens.tolist():
        definitions = {}  # letter -> (position, value)
        for position, token in enumerate(row):
            if n_symbols <= token < pad:
                letter, value = divmod(token - n_symbols, n_values)
                assert letter not in definitions, "a letter is defined twice in one sequence"
                definitions[letter] = (position, value)
        assert sorted(definitions) == list(range(n_symbols)), "every letter needs a definition"
        row_labels = []
        for position, token in enumerate(row):
            label = LOOKUP_IGNORE_INDEX
            if token < n_symbols:
                where, value = definitions[token]
                if abs(position - where) > min_distance:
                    label = value
            row_labels.append(label)
        labels.append(row_labels)
    return torch.tensor(labels)


def reference_features(tokens, n_symbols, n_values):
    pad = n_symbols + n_symbols * n_values
    rows = []
    for token in tokens.reshape(-1).tolist():
        vector = [0.0] * (n_symbols + n_values + 2)
        if token < n_symbols:
            vector[token] = 1.0
        elif token < pad:
            letter, value = divmod(token - n_symbols, n_values)
            vector[letter] = vector[n_symbols + value] = vector[-2] = 1.0
        else:
            vector[-1] = 1.0
        rows.append(vector)
    return torch.tensor(rows).reshape(*tokens.shape, n_symbols + n_values + 2)


SIZES = [
    dict(),  # the defaults the notebook uses
    dict(n_symbols=3, n_values=5, min_len=7, max_len=9, min_distance=0),
    dict(n_symbols=2, n_values=2, min_len=20, max_len=20, min_distance=6),
    dict(n_symbols=5, n_values=3, min_len=6, max_len=30, min_distance=2),
]


@pytest.mark.parametrize("sizes", SIZES)
def test_labels_follow_the_definition(sizes):
    data = lookup_labelling(60, seed=3, **sizes)
    n_symbols, n_values = sizes.get("n_symbols", 4), sizes.get("n_values", 4)
    expected = reference_labels(data.tokens, n_symbols, n_values, sizes.get("min_distance", 3))
    assert torch.equal(data.labels, expected)


@pytest.mark.parametrize("sizes", SIZES)
def test_shapes_dtypes_and_ranges(sizes):
    n = 50
    data = lookup_labelling(n, seed=1, **sizes)
    n_symbols, n_values = sizes.get("n_symbols", 4), sizes.get("n_values", 4)
    min_len, max_len = sizes.get("min_len", 12), sizes.get("max_len", 24)
    assert data.tokens.shape == data.labels.shape == (n, max_len)
    assert data.features.shape == (n, max_len, lookup_num_features(n_symbols, n_values))
    assert data.lengths.shape == (n,)
    assert data.definition_positions.shape == data.values.shape == (n, n_symbols)
    for name in ("tokens", "labels", "lengths", "definition_positions", "values"):
        assert getattr(data, name).dtype == torch.long, name
    assert data.features.dtype == torch.float32
    assert int(data.lengths.min()) >= min_len and int(data.lengths.max()) <= max_len
    assert int(data.tokens.min()) >= 0
    assert int(data.tokens.max()) <= lookup_pad_id(n_symbols, n_values)
    labelled = data.labels[data.labels != LOOKUP_IGNORE_INDEX]
    assert int(labelled.min()) >= 0 and int(labelled.max()) < n_values
    # Padding exactly after each sequence's length, and never labelled.
    positions = torch.arange(max_len)[None, :]
    is_pad = data.tokens == lookup_pad_id(n_symbols, n_values)
    assert torch.equal(is_pad, positions >= data.lengths[:, None])
    assert (data.labels[is_pad] == LOOKUP_IGNORE_INDEX).all()
    # Definitions stand where definition_positions says, with the stored values.
    at_definitions = data.tokens.gather(1, data.definition_positions)
    expected = n_symbols + torch.arange(n_symbols) * n_values + data.values
    assert torch.equal(at_definitions, expected)
    assert (data.definition_positions < data.lengths[:, None]).all()
    assert torch.equal(data.features, reference_features(data.tokens, n_symbols, n_values))


def test_same_seed_same_data_other_seed_other_data():
    first, again = lookup_labelling(30, seed=5), lookup_labelling(30, seed=5)
    for a, b in zip(first, again):
        assert torch.equal(a, b)
    other = lookup_labelling(30, seed=6)
    assert not torch.equal(first.tokens, other.tokens)
    assert not torch.equal(first.labels, other.labels)


def test_labels_are_balanced_and_not_a_function_of_the_letter():
    n_values = 4
    data = lookup_labelling(2000, n_values=n_values, seed=0)
    labelled = data.labels != LOOKUP_IGNORE_INDEX
    frequencies = torch.bincount(data.labels[labelled], minlength=n_values).float()
    frequencies /= frequencies.sum()
    # ~8000 independent values: the standard error of a frequency is ~0.005.
    assert (frequencies - 1 / n_values).abs().max() < 0.03, frequencies
    # Given the letter alone, every value is (nearly) equally likely: a per-token model is
    # at chance. Best per-letter guess = most frequent value of that letter.
    best_per_letter = 0
    for letter in range(4):
        of_letter = data.labels[labelled & (data.tokens == letter)]
        best_per_letter += int(torch.bincount(of_letter, minlength=n_values).max())
    assert best_per_letter / int(labelled.sum()) < 1 / n_values + 0.03
    # Roughly half the real tokens carry a label with the defaults, as documented.
    fraction = int(labelled.sum()) / int(data.lengths.sum())
    assert 0.35 < fraction < 0.7, fraction


@pytest.mark.parametrize("min_distance", [0, 2, 3, 5])
def test_the_definition_is_far_from_every_labelled_letter(min_distance):
    data = lookup_labelling(300, min_len=14, max_len=24, min_distance=min_distance, seed=2)
    labelled = data.labels != LOOKUP_IGNORE_INDEX
    for row, column in labelled.nonzero().tolist():
        letter = int(data.tokens[row, column])
        where = int(data.definition_positions[row, letter])
        assert abs(column - where) > min_distance
        # No window of width 2 * min_distance + 1 centred on the letter holds its definition.
        window = data.tokens[row, max(column - min_distance, 0) : column + min_distance + 1]
        own_definitions = 4 + letter * 4 + torch.arange(4)
        assert not torch.isin(window, own_definitions).any()
    # The definitions move around: each of the first min_len positions holds one somewhere.
    assert set(data.definition_positions.flatten().tolist()) >= set(range(14))


def test_changing_a_definition_changes_the_labels_that_depend_on_it():
    data = lookup_labelling(1, seed=4)
    tokens = data.tokens.clone()
    labelled = (data.labels[0] != LOOKUP_IGNORE_INDEX).nonzero().flatten()
    position = int(labelled[0])
    letter = int(tokens[0, position])
    where = int(data.definition_positions[0, letter])
    new_value = (int(data.values[0, letter]) + 1) % 4
    tokens[0, where] = 4 + letter * 4 + new_value
    relabelled = reference_labels(tokens, 4, 4, 3)
    assert int(relabelled[0, position]) == new_value != int(data.labels[0, position])


def test_splits_do_not_overlap_and_are_deterministic():
    train, test = lookup_labelling_splits(300, 100, min_len=6, max_len=7, n_symbols=3,
                                          n_values=2, seed=0)
    assert train.tokens.shape[0] == 300 and test.tokens.shape[0] == 100
    train_rows = {tuple(row) for row in train.tokens.tolist()}
    test_rows = {tuple(row) for row in test.tokens.tolist()}
    assert len(train_rows) == 300 and len(test_rows) == 100, "duplicates inside a split"
    assert not train_rows & test_rows, "a test sequence also occurs in training"
    again = lookup_labelling_splits(300, 100, min_len=6, max_len=7, n_symbols=3, n_values=2,
                                    seed=0)
    for a, b in zip(train + test, again[0] + again[1]):
        assert torch.equal(a, b)
    for split in (train, test):
        assert torch.equal(split.labels, reference_labels(split.tokens, 3, 2, 3))


def test_vocabulary_helpers():
    assert lookup_vocab_size(4, 4) == 21 and lookup_pad_id(4, 4) == 20
    assert lookup_num_features(3, 5) == 10
    assert lookup_token_names([0, 3, 4 + 1 * 4 + 3, 20], 4, 4) == ["a", "d", "b=3", "_"]
    data = lookup_labelling(5, seed=0)
    assert len(lookup_token_names(data.tokens[0], 4, 4)) == data.tokens.shape[1]
    exported = {"lookup_labelling", "lookup_labelling_splits", "LOOKUP_IGNORE_INDEX"}
    assert set(labelling.__all__) >= exported


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        (dict(n_sequences=0), ValueError, "n_sequences must be >= 1"),
        (dict(n_sequences=2.0), TypeError, "n_sequences must be an int"),
        (dict(n_sequences=True), TypeError, "n_sequences must be an int"),
        (dict(min_len=20, max_len=10), ValueError, "min_len must be <= max_len"),
        (dict(min_len=4, max_len=10), ValueError, "min_len=4 leaves no room"),
        (dict(n_values=1), ValueError, "n_values must be >= 2"),
        (dict(n_symbols=0), ValueError, "n_symbols must be >= 1"),
        (dict(min_distance=-1), ValueError, "min_distance must be >= 0"),
        (dict(seed=1.5), TypeError, "seed must be an int"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, error, pattern):
    kwargs = {"n_sequences": 10, **kwargs}
    with pytest.raises(error, match=pattern):
        lookup_labelling(**kwargs)
