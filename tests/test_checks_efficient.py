"""lectures_lib.checks.efficient: the trigonometric-features checker accepts correct answers in any
feature order and names the usual mistakes."""

from __future__ import annotations

import math

import torch

from lectures_lib.checks import check_trig_features


def stacked(x, w):
    angles = x @ w.T
    return torch.exp(x.square().sum(-1, keepdim=True) / 2) / math.sqrt(w.shape[0]) * torch.cat(
        [angles.sin(), angles.cos()], -1)


def interleaved(x, w):
    angles = x @ w.T
    pairs = torch.stack([angles.cos(), angles.sin()], -1).flatten(-2)
    return torch.exp(x.square().sum(-1, keepdim=True) / 2) / math.sqrt(w.shape[0]) * pairs


def test_accepts_correct_answers():
    assert check_trig_features(stacked).passed
    assert check_trig_features(interleaved).passed


def test_names_mistakes():
    def unnormalised(x, w):
        return stacked(x, w) * math.sqrt(w.shape[0])

    def unscaled(x, w):
        return stacked(x, w) / torch.exp(x.square().sum(-1, keepdim=True) / 2)

    def wrong_sign(x, w):
        return unscaled(x, w) / torch.exp(x.square().sum(-1, keepdim=True) / 2)

    def not_implemented(x, w):
        raise NotImplementedError

    def in_place(x, w):
        x += 1
        return stacked(x, w)

    expected = {unnormalised: "missing_normalisation", unscaled: "missing_scale",
                wrong_sign: "wrong_sign", not_implemented: "not_implemented",
                in_place: "modified_input", (lambda x, w: stacked(x, w)[..., :1]): "wrong_shape",
                (lambda x, w: stacked(x, w) + 1): "wrong_values"}
    for fn, code in expected.items():
        result = check_trig_features(fn)
        assert not result.passed and result.mistake == code, (code, str(result))
