"""check_causal_window_attention (06, exercise 2): accepts every correct form, names each
classic mistake, and fails a solution that builds the N x N matrix."""

import math

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.checks.windows import check_causal_window_attention


def unfold_solution(q, k, v, past):
    n, d = q.shape[-2], q.shape[-1]
    keys = F.pad(k, (0, 0, past, 0)).unfold(-2, past + 1, 1)  # (..., n, d, past + 1)
    values = F.pad(v, (0, 0, past, 0)).unfold(-2, past + 1, 1)
    scores = (q.unsqueeze(-2) @ keys).squeeze(-2) / math.sqrt(d)  # (..., n, past + 1)
    slot_key = torch.arange(n)[:, None] - past + torch.arange(past + 1)  # (n, past + 1)
    weights = scores.masked_fill(slot_key < 0, float("-inf")).softmax(-1)
    return (values @ weights.unsqueeze(-1)).squeeze(-1)


def loop_solution(q, k, v, past):
    rows = []
    for i in range(q.shape[-2]):
        lo = max(0, i - past)
        scores = (q[..., i : i + 1, :] @ k[..., lo : i + 1, :].transpose(-2, -1)) / math.sqrt(q.shape[-1])
        rows.append(scores.softmax(-1) @ v[..., lo : i + 1, :])
    return torch.cat(rows, dim=-2)


def dense_solution(q, k, v, past):
    n = q.shape[-2]
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
    allowed = (offset <= 0) & (offset >= -past)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return scores.masked_fill(~allowed, float("-inf")).softmax(-1) @ v


@pytest.mark.slow
def test_correct_forms_pass_visible_and_hidden():
    for solution in (unfold_solution, loop_solution):
        for hidden in (False, True):
            result = check_causal_window_attention(solution, hidden=hidden)
            assert result.passed, result


@pytest.mark.slow
def test_dense_solution_is_right_but_fails_on_memory():
    result = check_causal_window_attention(dense_solution)
    assert not result.passed and result.mistake == "quadratic_memory", result


def _mistake(fn):
    result = check_causal_window_attention(fn)
    assert not result.passed
    return result.mistake


def test_named_mistakes():
    def symmetric(q, k, v, past):
        n = q.shape[-2]
        offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return scores.masked_fill(offset.abs() > past, float("-inf")).softmax(-1) @ v

    def too_wide(q, k, v, past):
        return unfold_solution(q, k, v, past + 1)

    def zero_scores(q, k, v, past):
        n = q.shape[-2]
        offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return scores.masked_fill((offset > 0) | (offset < -past), 0.0).softmax(-1) @ v

    def padding_kept(q, k, v, past):
        keys = F.pad(k, (0, 0, past, 0)).unfold(-2, past + 1, 1)
        values = F.pad(v, (0, 0, past, 0)).unfold(-2, past + 1, 1)
        weights = ((q.unsqueeze(-2) @ keys).squeeze(-2) / math.sqrt(q.shape[-1])).softmax(-1)
        return (values @ weights.unsqueeze(-1)).squeeze(-1)

    def unscaled(q, k, v, past):
        return unfold_solution(q * math.sqrt(q.shape[-1]), k, v, past)

    def not_done(q, k, v, past):
        raise NotImplementedError

    assert _mistake(symmetric) == "looks_ahead"
    assert _mistake(too_wide) == "window_off_by_one"
    assert _mistake(zero_scores) == "score_zero_not_weight_zero"
    assert _mistake(padding_kept) == "padding_attended"
    assert _mistake(unscaled) == "missing_scaling"
    assert _mistake(not_done) == "not_implemented"
    assert _mistake(lambda q, k, v, past: v.clone()) == "wrong_values"
