"""The toy translation of section 05: number words <-> digits."""

import pytest
import torch

from lectures_lib.data import translation
from lectures_lib.data.translation import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    Vocab,
    make_translation_data,
    number_to_digits,
    number_to_words,
    sentence_shape,
)


@pytest.mark.parametrize(
    "n, words",
    [
        (0, "zero"),
        (7, "seven"),
        (13, "thirteen"),
        (20, "twenty"),
        (42, "forty two"),
        (100, "one hundred"),
        (115, "one hundred fifteen"),
        (1000, "one thousand"),
        (3042, "three thousand forty two"),
        (7777, "seven thousand seven hundred seventy seven"),
        (90210, "ninety thousand two hundred ten"),
        (999_999, "nine hundred ninety nine thousand nine hundred ninety nine"),
    ],
)
def test_number_to_words(n, words):
    assert number_to_words(n) == words


def _words_to_number(words: str) -> int:
    """An independent parser (the inverse of number_to_words), to test every number."""
    values = {w: i for i, w in enumerate(translation._ONES)}
    values.update({w: 10 * (i + 2) for i, w in enumerate(translation._TENS)})
    total, current = 0, 0
    for word in words.split():
        if word == "thousand":
            total, current = total + current * 1000, 0
        elif word == "hundred":
            current *= 100
        else:
            current += values[word]
    return total + current


def test_number_words_are_distinct_and_parse_back_for_every_number():
    sentences = [number_to_words(n) for n in range(10_000)]
    assert len(set(sentences)) == 10_000
    assert all(_words_to_number(s) == n for n, s in enumerate(sentences))
    assert number_to_digits(3042) == "3 0 4 2"
    assert number_to_digits(42, width=4) == "0 0 4 2" and number_to_digits(0, width=2) == "0 0"


def test_sentence_shape():
    assert sentence_shape(3042) == "U thousand T U"
    assert sentence_shape(7000) == "U thousand"
    assert sentence_shape(615) == "U hundred E"
    assert sentence_shape(0) == "zero"
    assert len({sentence_shape(n) for n in range(1, 10_000)}) == 19


@pytest.mark.parametrize(
    "bad, error", [(-1, ValueError), (1_000_000, ValueError), (2.0, TypeError)]
)
def test_number_to_words_rejects_bad_input(bad, error):
    with pytest.raises(error):
        number_to_words(bad)


def test_vocab_round_trip_and_special_ids():
    vocab = Vocab(["a", "b", "c"])
    assert (vocab.pad_id, vocab.bos_id, vocab.eos_id) == (PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2)
    assert len(vocab) == 6 and "b" in vocab and "<pad>" in vocab
    ids = vocab.encode("c a b", add_bos=True, add_eos=True)
    assert ids == [BOS_ID, 5, 3, 4, EOS_ID]
    assert vocab.decode(ids + [PAD_ID, PAD_ID]) == ["c", "a", "b"]
    assert vocab.decode(torch.tensor([5, EOS_ID, 3])) == ["c"]  # cut at END
    assert vocab.decode([5, EOS_ID, 3], stop_at_eos=False) == ["c", "<eos>", "a"]
    assert vocab.to_string([3, 4]) == "a b"


@pytest.mark.parametrize("direction", ["words_to_digits", "digits_to_words"])
@pytest.mark.parametrize("leading_zeros", [True, False])
def test_splits_are_disjoint_deterministic_and_decode_to_the_numbers(direction, leading_zeros):
    kwargs = dict(n_train=300, n_test=100, max_number=999, direction=direction,
                  leading_zeros=leading_zeros)
    data = make_translation_data(seed=3, **kwargs)
    again = make_translation_data(seed=3, **kwargs)
    other = make_translation_data(seed=4, **kwargs)
    for split, same in ((data.train, again.train), (data.test, again.test)):
        for a, b in zip(split.tensors(), same.tensors(), strict=True):
            assert torch.equal(a, b)
        assert torch.equal(split.numbers, same.numbers)
    assert not torch.equal(data.test.numbers, other.test.numbers)
    train_numbers, test_numbers = set(data.train.numbers.tolist()), set(data.test.numbers.tolist())
    assert len(train_numbers) == 300 and len(test_numbers) == 100
    assert not train_numbers & test_numbers
    single_words = {n for n in range(100) if len(number_to_words(n).split()) == 1}
    assert len(single_words) == 28 and single_words <= train_numbers
    width = 3 if leading_zeros else None
    for split in (data.train, data.test):
        for n, src, tgt_out in zip(split.numbers, split.src, split.tgt_out, strict=True):
            words, digits = number_to_words(int(n)), number_to_digits(int(n), width)
            source, target = (words, digits) if direction == "words_to_digits" else (digits, words)
            assert data.src_vocab.to_string(src) == source
            assert data.tgt_vocab.to_string(tgt_out) == target
    words_vocab = data.src_vocab if direction == "words_to_digits" else data.tgt_vocab
    digits_vocab = data.tgt_vocab if direction == "words_to_digits" else data.src_vocab
    assert len(words_vocab) == 3 + 30 and "thousand" in words_vocab and "0" not in words_vocab
    assert len(digits_vocab) == 3 + 10 and "7" in digits_vocab and "seven" not in digits_vocab


def test_default_task_shapes():
    data = make_translation_data(n_train=500, n_test=200)
    assert data.direction == "digits_to_words"
    assert data.train.src.shape == (500, 4), "four digits, with leading zeros"
    assert (data.train.src != PAD_ID).all()
    assert data.test.tgt_out.shape[1] <= 7, "at most six words and END"


def test_teacher_forcing_shift_and_padding():
    data = make_translation_data(n_train=500, n_test=200, seed=0)
    for split in (data.train, data.test):
        src, tgt_in, tgt_out = split.tensors()
        assert src.dtype == tgt_in.dtype == tgt_out.dtype == torch.long
        assert tgt_in.shape == tgt_out.shape and src.shape[0] == tgt_in.shape[0] == len(split)
        assert (tgt_in[:, 0] == BOS_ID).all(), "the decoder always starts from BEGIN"
        real = tgt_out != PAD_ID
        assert torch.equal(tgt_in != PAD_ID, real), "tgt_in and tgt_out have the same length"
        # tgt_out is tgt_in shifted one step left (the token after), with END at the end.
        follows = tgt_in[:, 1:] != PAD_ID  # real tokens of tgt_in after BEGIN
        assert torch.equal(tgt_in[:, 1:][follows], tgt_out[:, :-1][follows])
        lengths = real.sum(dim=1)
        assert (tgt_out.gather(1, (lengths - 1)[:, None]) == EOS_ID).all()
        assert ((tgt_out == EOS_ID).sum(dim=1) == 1).all() and not (tgt_in == EOS_ID).any()
        # padding only at the end of each row
        assert torch.equal(real, real.cumprod(dim=1).bool())
        src_real = src != PAD_ID
        assert torch.equal(src_real, src_real.cumprod(dim=1).bool()) and src_real[:, 0].all()
    assert data.train.src.shape[1] == data.test.src.shape[1]


@pytest.mark.parametrize("leading_zeros", [True, False])
def test_output_length_differs_from_input_length(leading_zeros):
    data = make_translation_data(n_train=2000, n_test=500, leading_zeros=leading_zeros)
    src_lengths = (data.train.src != PAD_ID).sum(dim=1)
    tgt_lengths = (data.train.tgt_out != PAD_ID).sum(dim=1) - 1  # without END
    assert (src_lengths != tgt_lengths).float().mean() > 0.5
    assert set(tgt_lengths.tolist()) == {1, 2, 3, 4, 5, 6}
    expected_src_lengths = {4} if leading_zeros else {1, 2, 3, 4}
    assert set(src_lengths.tolist()) == expected_src_lengths


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"n_train": 0}, ValueError),
        ({"n_test": -1}, ValueError),
        ({"n_train": 900, "n_test": 200, "max_number": 999}, ValueError),
        ({"max_number": 1_000_000}, ValueError),
        ({"direction": "french"}, ValueError),
        ({"n_train": 27}, ValueError),
        ({"n_train": 10, "n_test": 5, "max_number": 20}, ValueError),
        ({"seed": 1.5}, TypeError),
        ({"n_train": 10.0}, TypeError),
    ],
)
def test_make_translation_data_validates(kwargs, error):
    with pytest.raises(error):
        make_translation_data(**kwargs)
