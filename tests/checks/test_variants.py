"""The mask checkers of section 06 (stride, streaming window): accept every correct mask, name the
classic mistakes."""

import pytest
import torch

from lectures_lib.checks import check_streaming_mask, check_stride_mask
from lectures_lib.checks.variants import _streaming
from lectures_lib.masks import causal_mask
from lectures_lib.variants import local_mask, stride_mask


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


# ---- the streaming window (exercise 1 of 06) ---------------------------------------------------


def streaming_by_comparison(n, past, future):
    key_minus_query = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return (key_minus_query >= -past) & (key_minus_query <= future)


def streaming_by_loops(n, past, future):
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i in range(n):
        mask[i, max(0, i - past): i + future + 1] = True
    return mask


def streaming_by_triangles(n, past, future):
    ones = torch.ones(n, n, dtype=torch.bool)
    return torch.tril(ones, diagonal=future) & torch.triu(ones, diagonal=-past)


@pytest.mark.parametrize("fn", [streaming_by_comparison, streaming_by_loops, streaming_by_triangles])
@pytest.mark.parametrize("hidden", [False, True])
def test_streaming_accepts_correct_implementations(fn, hidden):
    result = check_streaming_mask(fn, hidden=hidden)
    assert result.passed and result.mistake is None, result


def test_streaming_reference_is_the_local_mask_when_symmetric_and_causal_when_future_is_0():
    for n, w in [(1, 0), (6, 2), (9, 20)]:
        assert torch.equal(_streaming(n, w, w), local_mask(n, w))
        assert torch.equal(_streaming(n, w, 0), local_mask(n, w) & causal_mask(n))


def _strict(n, past, future):
    key_minus_query = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return ((key_minus_query > -past) & (key_minus_query < future)) | (key_minus_query == 0)


def _strict_past_end(n, past, future):  # `>` for `>=` at the look-back end only
    key_minus_query = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    return ((key_minus_query > -past) & (key_minus_query <= future)) | (key_minus_query == 0)


@pytest.mark.parametrize(
    ("fn", "mistake"),
    [
        (lambda n, p, f: ~streaming_by_comparison(n, p, f), "inverted_polarity"),
        (lambda n, p, f: streaming_by_comparison(n, f, p), "past_future_swapped"),
        (lambda n, p, f: streaming_by_comparison(n, p, f).T.contiguous(), "past_future_swapped"),
        (_strict, "boundary_excluded"),
        (_strict_past_end, "boundary_excluded"),
        (lambda n, p, f: streaming_by_comparison(n, p, 0), "future_ignored"),
        (lambda n, p, f: streaming_by_comparison(n, p, f) & ~torch.eye(n, dtype=torch.bool),
         "diagonal_missing"),
        (lambda n, p, f: streaming_by_comparison(n, p, f).long(), "wrong_dtype"),
        (lambda n, p, f: streaming_by_comparison(n, p, f)[None], "wrong_shape"),
        (lambda n, p, f: streaming_by_comparison(n, p, f).tolist(), "wrong_return_type"),
        (lambda n, p, f: local_mask(n, max(p, f)), "wrong_values"),
        (lambda n, p, f: [][0], "raised"),
    ],
)
def test_streaming_names_the_mistake(fn, mistake):
    result = check_streaming_mask(fn)
    assert not result.passed and result.mistake == mistake, result


def test_streaming_hidden_cases_catch_what_the_shown_ones_miss():
    def only_short_rows(n, past, future):  # right on every shown case (n <= 8), wrong beyond
        mask = streaming_by_comparison(n, past, future)
        return mask if n <= 8 else mask & ~torch.eye(n, dtype=torch.bool)

    assert check_streaming_mask(only_short_rows).passed
    assert check_streaming_mask(only_short_rows, hidden=True).mistake == "diagonal_missing"
