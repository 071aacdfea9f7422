"""The stride-mask checker (section 06): accepts every correct mask, names the classic mistakes."""

import pytest
import torch

from lectures_lib.checks import check_stride_mask
from lectures_lib.variants import stride_mask


def loop_mask(n, stride):
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        for j in range(n):
            mask[i, j] = (i - j) % stride == 0
    return mask


def remainder_mask(n, stride):
    residue = torch.arange(n) % stride
    return residue[:, None] == residue[None, :]  # same remainder = a multiple of s apart


@pytest.mark.parametrize("fn", [loop_mask, remainder_mask, stride_mask])
def test_accepts_correct_implementations(fn):
    result = check_stride_mask(fn)
    assert result.passed and result.mistake is None, result


def _offsets(n):
    return torch.arange(n)[:, None] - torch.arange(n)[None, :]


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda n, s: ~remainder_mask(n, s), "inverted_polarity"),
        (lambda n, s: (_offsets(n) % s == 0) & (_offsets(n) >= 0), "one_direction"),
        (lambda n, s: (torch.arange(n)[None, :] % s == 0).expand(n, n).clone(), "absolute_positions"),
        (lambda n, s: remainder_mask(n, s) & ~torch.eye(n, dtype=torch.bool), "diagonal_missing"),
        (lambda n, s: remainder_mask(n, s).float(), "wrong_dtype"),
        (lambda n, s: remainder_mask(n, s)[None], "wrong_shape"),
        (lambda n, s: remainder_mask(n, s).tolist(), "wrong_return_type"),
        (lambda n, s: _offsets(n).abs() <= s, "wrong_values"),
        (lambda n, s: 1 / 0, "raised"),
    ],
)
def test_names_the_mistake(fn, mistake):
    result = check_stride_mask(fn)
    assert not result.passed and result.mistake == mistake, result


def test_not_implemented():
    def todo(n, stride):
        raise NotImplementedError()

    assert check_stride_mask(todo).mistake == "not_implemented"
