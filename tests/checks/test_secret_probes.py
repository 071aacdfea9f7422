"""Probes drawn from the instructor's grading secret (``LECTURES_GRADING_SECRET``).

Without a secret every checker draws the public probes (their seeds are in the package, so a
student can precompute them). With one, the probes and held-out data are new values: two
secrets give different probes, a correct solution passes under any secret, and a "solution" that
looks its answers up in a table of the public probes passes without a secret and fails with one.
"""

from __future__ import annotations

import pytest
import torch

from lectures_lib.checks import (
    check_additive_attention,
    check_beam_step,
    check_causal_window_attention,
    check_label_smoothing_loss,
    check_padded_self_attention,
    check_query_rule,
    check_relative_position_attention,
    check_rms_norm,
    check_streaming_mask,
    check_trig_features,
)
from lectures_lib.checks._base import SECRET_ENV, probe_seed, secret_fingerprint
from lectures_lib.checks.additive import _probes, additive_attention_reference
from lectures_lib.checks.decoder import beam_step_reference, label_smoothing_loss_reference
from lectures_lib.checks.long_range import query_rule_reference
from lectures_lib.checks.norms import rms_norm_reference
from lectures_lib.checks.padding import padded_self_attention_reference
from lectures_lib.checks.relative import relative_position_attention_reference
from lectures_lib.checks.trained import _HELD_OUT_SEED, make_sort_data
from lectures_lib.checks.variants import _streaming
from tests.checks.test_efficient import stacked
from tests.checks.test_windows import unfold_solution

SECRETS = ["a first instructor secret", "another secret, another term"]

CORRECT = [
    (check_additive_attention, additive_attention_reference),
    (check_padded_self_attention, padded_self_attention_reference),
    (check_relative_position_attention, relative_position_attention_reference),
    (check_rms_norm, rms_norm_reference),
    (check_label_smoothing_loss, label_smoothing_loss_reference),
    (check_beam_step, beam_step_reference),
    (check_trig_features, stacked),
    (check_causal_window_attention, unfold_solution),
    (check_streaming_mask, _streaming),
    (check_query_rule, query_rule_reference),
]


def _tensors(probes) -> list[torch.Tensor]:
    found = []
    for probe in probes:
        for value in [*probe.args, *probe.kwargs.values()]:
            if isinstance(value, torch.Tensor):
                found.append(value)
    return found


def test_without_a_secret_the_seeds_are_the_public_ones(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert secret_fingerprint() is None
    assert probe_seed(2015) == 2015 and probe_seed(_HELD_OUT_SEED) == _HELD_OUT_SEED


def test_two_secrets_draw_different_probes(monkeypatch):
    drawn = {}
    for secret in [None, *SECRETS]:
        if secret is None:
            monkeypatch.delenv(SECRET_ENV, raising=False)
        else:
            monkeypatch.setenv(SECRET_ENV, secret)
        drawn[secret] = (_tensors(_probes(hidden=True)),
                         make_sort_data(50, seed=probe_seed(_HELD_OUT_SEED + 1))[0])
    public, first, second = drawn[None], drawn[SECRETS[0]], drawn[SECRETS[1]]
    for a, b in [(public, first), (public, second), (first, second)]:
        floats = [(x, y) for x, y in zip(a[0], b[0], strict=True) if x.is_floating_point()]
        assert floats and all(x.shape == y.shape for x, y in floats), "same shapes"
        assert all(not torch.equal(x, y) for x, y in floats), "new values under each secret"
        assert not torch.equal(a[1], b[1]), "new held-out data under each secret"
    assert secret_fingerprint() not in SECRETS[1], "the fingerprint does not show the secret"


@pytest.mark.parametrize("secret", [None, *SECRETS])
@pytest.mark.parametrize(("check", "solution"), CORRECT, ids=lambda x: getattr(x, "__name__", ""))
def test_a_correct_solution_passes_under_any_secret(monkeypatch, secret, check, solution):
    if secret is None:
        monkeypatch.delenv(SECRET_ENV, raising=False)
    else:
        monkeypatch.setenv(SECRET_ENV, secret)
    for hidden in (False, True):
        result = check(solution, hidden=hidden)
        assert result.passed, (secret, hidden, result)


def _answer_table(monkeypatch) -> dict:
    """What a student can compute at home: the reference's answers to the public probes."""
    monkeypatch.delenv(SECRET_ENV, raising=False)
    table = {}

    def recording(*args, **kwargs):
        out = additive_attention_reference(*args, **kwargs)
        table[_key(args, kwargs)] = out
        return out

    for hidden in (False, True):
        assert check_additive_attention(recording, hidden=hidden).passed
    return table


def _key(args, kwargs) -> tuple:
    values = [*args, *kwargs.values()]
    return tuple(tuple(v.flatten().tolist()) if isinstance(v, torch.Tensor) else v
                 for v in values)


def test_answers_precomputed_for_the_public_probes_fail_under_a_secret(monkeypatch):
    table = _answer_table(monkeypatch)

    def look_up(q, k, v, w_q, w_k, w_score, mask=None):  # no attention computed at all
        args = (q, k, v, w_q, w_k, w_score) + (() if mask is None else (mask,))
        return table.get(_key(args, {}), (torch.zeros(()), torch.zeros(())))

    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert check_additive_attention(look_up, hidden=True).passed, "the public probes: fooled"
    for secret in SECRETS:
        monkeypatch.setenv(SECRET_ENV, secret)
        result = check_additive_attention(look_up, hidden=True)
        assert not result.passed, result
