"""Checker messages a learner met in the first hour (issue 40): each names what went wrong.

* additive attention with §4's sqrt(d) scaling copied in, whichever d: named, with "remove it";
* the compare engine's "Seen on" names every argument with its dtype and shape;
* a trained model's verdict says "below chance" when it is below chance, "about" only near it.
"""

import math

import pytest
import torch

from lectures_lib.checks import check_additive_attention
from lectures_lib.checks._base import Mistake
from lectures_lib.checks.trained import _verdict


def _additive(scale):
    def attention(q, k, v, w_q, w_k, w_score, mask=None):
        hidden = (q @ w_q)[..., :, None, :] + (k @ w_k)[..., None, :, :]
        scores = torch.tanh(hidden) @ w_score / scale(q, k, w_score)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        return weights @ v, weights
    return attention


@pytest.mark.parametrize(("name", "scale"), [
    ("d_q", lambda q, k, w: math.sqrt(q.shape[-1])),
    ("d_k", lambda q, k, w: math.sqrt(k.shape[-1])),
    ("d_att", lambda q, k, w: math.sqrt(w.shape[0])),
])
def test_a_sqrt_d_scaling_in_additive_attention_is_named(name, scale):
    result = check_additive_attention(_additive(scale))
    assert not result.passed and result.mistake == "scaled_like_dot_product", str(result)
    assert f"sqrt({name})" in result.message and "remove it" in result.message


def test_another_scaling_is_not_called_a_sqrt_d_one():
    result = check_additive_attention(_additive(lambda q, k, w: 0.7))
    assert not result.passed and result.mistake != "scaled_like_dot_product", str(result)
    assert check_additive_attention(_additive(lambda q, k, w: 1.0)).passed


def test_seen_on_names_each_argument_with_its_shape():
    result = check_additive_attention(_additive(lambda q, k, w: 0.7))
    assert ("q float32 (3, 4), k float32 (5, 6), v float32 (5, 2), w_q float32 (4, 7), "
            "w_k float32 (6, 7), w_score float32 (7,)") in result.message, result.message


@pytest.mark.parametrize(("accuracy", "words"), [
    (0.194, "below chance (0.30)"), (0.28, "about chance (0.30)"), (0.34, "about chance (0.30)"),
])
def test_the_chance_verdict_says_below_or_about(accuracy, words):
    with pytest.raises(Mistake) as caught:
        _verdict(accuracy, needed=0.95, chance=0.30, unit="accuracy", advice="")
    assert caught.value.code == "at_chance" and words in str(caught.value), str(caught.value)


def test_above_chance_but_short_of_the_target_is_below_target():
    with pytest.raises(Mistake) as caught:
        _verdict(0.6, needed=0.95, chance=0.30, unit="accuracy", advice="")
    assert caught.value.code == "below_target" and "chance" not in str(caught.value)
