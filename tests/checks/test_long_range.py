"""lectures_lib.checks.long_range: the binding-task checker passes a model that binds each value
to its key, and names a content-blind model and an undertrained one."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from lectures_lib.checks.long_range import check_binding_model
from lectures_lib.data import binding_tokens

IDS = binding_tokens()


def oracle(tokens, *, first_half=True):
    """Logits from the definition: the value of the asked key's pair in the first half."""
    batch, n = tokens.shape
    asked = tokens[:, -1] - IDS["query"].start  # (batch,)
    is_pair = (tokens >= IDS["pair"].start) & (tokens < IDS["pair"].stop)
    offset = (tokens - IDS["pair"].start).clamp_min(0)
    key, value = offset.div(4, rounding_mode="floor"), offset % 4
    half = torch.arange(n) < n // 2 if first_half else torch.arange(n) >= n // 2
    hit = is_pair & (key == asked[:, None]) & half  # (batch, n)
    where = hit.float().argmax(-1)  # the first hit (first half: the only one)
    answer = value.gather(1, where[:, None])[:, 0]
    logits = F.one_hot(answer, 4).float()[:, None].expand(batch, n, 4)
    return logits.clone()


def bag(tokens):
    """A function of the multiset of tokens (and the query): content-blind."""
    counts = F.one_hot(tokens, IDS["pair"].stop).sum(1).float()  # (batch, vocab)
    answer = (counts @ torch.arange(IDS["pair"].stop).float() + tokens[:, -1]).long() % 4
    return F.one_hot(answer, 4).float()[:, None].expand(*tokens.shape, 4).clone()


class RoutedOracle(torch.nn.Module):
    """The definition, its answer routed through weights (as a trained model's is): shuffled
    weights route it wrong."""

    def __init__(self):
        super().__init__()
        self.route = torch.nn.Parameter(torch.eye(4) * 4)

    def forward(self, tokens):
        return oracle(tokens) @ self.route


def test_accepts_a_model_that_binds():
    assert check_binding_model(RoutedOracle()).passed
    assert check_binding_model(RoutedOracle(), hidden=True).passed


def test_refuses_a_hand_written_rule():
    """The rule itself, as a function or in a module whose weights play no part, is no model."""

    class Rule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.unused = torch.nn.Linear(4, 4)

        def forward(self, tokens):
            return oracle(tokens)

    for rule in (oracle, Rule()):
        result = check_binding_model(rule)
        assert not result.passed and result.mistake == "not_a_model", str(result)


def test_names_a_content_blind_model():
    result = check_binding_model(bag)
    assert not result.passed and result.mistake == "content_blind", str(result)


def test_names_distractor_readers_and_bad_outputs():
    # reads a distractor (second half): one of the 3 wrong values, below chance, not content-blind
    result = check_binding_model(lambda t: oracle(t, first_half=False))
    assert not result.passed and result.mistake in ("at_chance", "below_target"), str(result)

    def half_right(tokens):
        logits = oracle(tokens)
        logits[::2] = logits[::2].roll(1, -1)  # every other answer wrong
        return logits

    result = check_binding_model(half_right)
    assert not result.passed and result.mistake == "below_target", str(result)
    result = check_binding_model(lambda t: oracle(t)[..., :3])
    assert not result.passed and result.mistake == "wrong_shape", str(result)


def test_a_training_function_is_called_once_and_may_return_a_module():
    calls = []

    def train():
        calls.append(1)
        return RoutedOracle()

    assert check_binding_model(train).passed and check_binding_model(train, hidden=True).passed
    assert calls == [1]


# --- check_query_rule (exercise 6): the query-only rule chosen on training data ------------------

from lectures_lib.checks import check_query_rule  # noqa: E402
from lectures_lib.checks.long_range import (  # noqa: E402
    _in_sample,
    _rule_probe,
    query_rule_reference,
)


def loop_rule(train_tokens, train_labels, test_tokens, test_labels):
    """Another correct solution: plain Python counting, collections.Counter for the mode."""
    from collections import Counter

    by_key = {}
    for key, label in zip(train_tokens[:, -1].tolist(), train_labels.tolist(), strict=True):
        by_key.setdefault(key, Counter())[label] += 1
    majority = Counter(train_labels.tolist()).most_common(1)[0][0]
    answer = {key: counts.most_common(1)[0][0] for key, counts in by_key.items()}
    right = sum(answer.get(key, majority) == label
                for key, label in zip(test_tokens[:, -1].tolist(), test_labels.tolist(), strict=True))
    return right / len(test_labels)


def test_query_rule_passes_correct_solutions_and_the_hidden_probes():
    for solution in (query_rule_reference, loop_rule,
                     lambda *probe: torch.tensor(query_rule_reference(*probe))):
        assert check_query_rule(solution).passed
        assert check_query_rule(solution, hidden=True).passed


def test_query_rule_names_each_likely_mistake():
    def majority(train_tokens, train_labels, test_tokens, test_labels):
        return float((test_labels == torch.bincount(train_labels).argmax()).double().mean())

    def seen_only(train_tokens, train_labels, test_tokens, test_labels):
        seen = torch.isin(test_tokens[:, -1], train_tokens[:, -1])
        return query_rule_reference(train_tokens, train_labels, test_tokens[seen], test_labels[seen])

    cases = {
        "rule_chosen_on_test": lambda a, b, c, d: _in_sample(c, d),
        "rule_reads_first_token": lambda a, b, c, d: query_rule_reference(a.flip(1), b, c.flip(1), d),
        "rule_ignores_query": majority,
        "rule_unseen_query": seen_only,
        "count_not_share": lambda *p: round(query_rule_reference(*p) * len(p[3])),
        "wrong_return_type": lambda *p: [query_rule_reference(*p)],
        "wrong_values": lambda *p: query_rule_reference(*p) + 0.01,
    }
    for code, wrong in cases.items():
        result = check_query_rule(wrong)
        assert not result.passed and result.mistake == code, (code, str(result))


def test_query_rule_probes_separate_the_mistakes_and_hold_what_they_promise():
    for case in ((300, 200, 12, 5, 4, 61), (500, 300, 40, 8, 6, 63)):
        train_tokens, train_labels, test_tokens, test_labels = _rule_probe(*case)
        assert not torch.isin(test_tokens[:, -1], train_tokens[:, -1]).all(), "an unseen query"
        rule = query_rule_reference(train_tokens, train_labels, test_tokens, test_labels)
        assert rule < _in_sample(test_tokens, test_labels), "held out, below the in-sample ceiling"
