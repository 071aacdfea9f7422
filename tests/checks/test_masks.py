"""The causal-mask checker (section 05): accepts every correct mask, names every classic mistake."""

import numpy as np
import pytest
import torch

from lectures_lib.attention import causal_mask
from lectures_lib.checks import check_causal_mask


def tril_mask(n):
    return torch.ones(n, n, dtype=torch.bool).tril()


def loop_mask(n):
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(i + 1):
            mask[i, j] = True
    return mask


def arange_mask(n):
    positions = torch.arange(n)
    return positions[:, None] >= positions[None, :]  # query i may see key j when j <= i


def not_future_mask(n):
    return ~torch.ones(n, n).triu(diagonal=1).bool()


@pytest.mark.parametrize("fn", [tril_mask, loop_mask, arange_mask, not_future_mask, causal_mask])
def test_accepts_correct_implementations(fn):
    result = check_causal_mask(fn)
    assert result.passed, result
    assert result.mistake is None


def all_true(n):
    return torch.ones(n, n, dtype=torch.bool)


def upper_triangle(n):
    return torch.ones(n, n, dtype=torch.bool).triu()


def strict_lower(n):
    return torch.ones(n, n, dtype=torch.bool).tril(diagonal=-1)


def inverted_polarity(n):  # nn.MultiheadAttention's convention: True = blocked
    return torch.ones(n, n, dtype=torch.bool).triu(diagonal=1)


def additive_float(n):
    return torch.zeros(n, n).masked_fill(~tril_mask(n), float("-inf"))


def additive_large_negative(n):
    return torch.zeros(n, n).masked_fill(~tril_mask(n), -1e9)


def int_mask(n):
    return tril_mask(n).long()


def float_01(n):
    return tril_mask(n).float()


def batched_shape(n):
    return tril_mask(n)[None]


def transposed_shape(n):  # right values for n = 4, wrong shape: (n, n + 1)
    return torch.ones(n, n + 1, dtype=torch.bool).tril()


def numpy_mask(n):
    return np.tril(np.ones((n, n), dtype=bool))


def nested_list(n):
    return tril_mask(n).tolist()


def not_implemented(n):
    raise NotImplementedError()


def crashes(n):
    return torch.ones(n, n).tril(k=0)  # wrong keyword: TypeError inside the student's code


def wrong_for_one(n):  # correct for n > 1 only
    return tril_mask(n) if n > 1 else torch.zeros(1, 1, dtype=torch.bool)


def missing_cell(n):
    mask = tril_mask(n)
    mask[-1, 0] = False
    return mask


def band_only(n):  # attends only to itself and the previous token: allowed cells missing
    return tril_mask(n) & ~torch.ones(n, n, dtype=torch.bool).tril(diagonal=-2)


@pytest.mark.parametrize(
    "fn, code",
    [
        (all_true, "future_visible"),
        (upper_triangle, "future_visible"),
        (strict_lower, "diagonal_missing"),
        (inverted_polarity, "inverted_polarity"),
        (additive_float, "additive_float_mask"),
        (additive_large_negative, "additive_float_mask"),
        (int_mask, "wrong_dtype"),
        (float_01, "wrong_dtype"),
        (batched_shape, "wrong_shape"),
        (transposed_shape, "wrong_shape"),
        (numpy_mask, "wrong_return_type"),
        (nested_list, "wrong_return_type"),
        (not_implemented, "not_implemented"),
        (crashes, "raised"),
        (wrong_for_one, "diagonal_missing"),
        (missing_cell, "wrong_values"),
        (band_only, "wrong_values"),
    ],
)
def test_names_each_mistake(fn, code):
    result = check_causal_mask(fn)
    assert not result.passed
    assert result.mistake == code, result
    assert str(result).startswith("[FAILED] causal_mask:")
