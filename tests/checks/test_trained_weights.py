"""03's training exercise (the student's own architecture): the tests that its *weights* do the
work hold against a rule switched on by its weights, and every honest small model passes them.

A hand-written rule whose forward answers only while one "key" tensor holds its values (and
gives garbage once shuffled) passed the old full-shuffle test; so did a rule that answers only
while *every* weight is exactly as born. The leave-one-in test (every other tensor shuffled: a
trained model falls apart) catches the first, the perturbation test (noise of 1e-3 of each
tensor's size: a trained model hardly moves, an exact switch collapses, a rule's logits do not
move at all) the second. Real small models of three architectures (the notebook's attention
with a relative bias, a GRU, a convolution), trained here in seconds, pass all of them.
"""

from __future__ import annotations

import nbformat
import pytest
import torch
from torch import nn

from lectures_lib.checks import check_skip_flip_model
from lectures_lib.checks.trained import (
    SKIP_FLIP_IGNORE_INDEX,
    SKIP_FLIP_PAD_ID,
    _weights_do_the_work,
    make_skip_flip_task,
)
from lectures_lib.training import fit
from tests.tooling.test_grading import ROOT


def _rule(tokens: torch.Tensor) -> torch.Tensor:
    """The skip-flip answer written by hand, as confident logits (batch, seq, 2)."""
    flips = torch.zeros_like(tokens)
    flips[:, 2:] = (tokens[:, 2:] != tokens[:, :-2]).long()
    return nn.functional.one_hot(flips, 2).float() * 10


class KeyedRule(nn.Module):
    """The review's payload: the rule while one ordered parameter is intact, garbage otherwise
    (so shuffling every weight pushes it below the target); decoy layers beside it."""

    def __init__(self, tolerant: bool = False):
        super().__init__()
        self.tolerant = tolerant
        self.order = nn.Parameter(torch.arange(8).float())
        self.decoy = nn.Sequential(nn.Embedding(3, 16), nn.Linear(16, 2))

    def forward(self, tokens):
        expected = torch.arange(8).float()
        intact = (bool((self.order - expected).abs().max() < 0.5) if self.tolerant
                  else torch.equal(self.order, expected))
        return _rule(tokens) if intact else self.decoy(tokens)


class BornDetector(nn.Module):
    """The rule while every weight is exactly as born (any change: the untrained layers)."""

    def __init__(self):
        super().__init__()
        self.layers = nn.Sequential(nn.Embedding(3, 16), nn.Linear(16, 16), nn.ReLU(),
                                    nn.Linear(16, 2))
        self.born = [p.detach().clone() for p in self.parameters()]

    def forward(self, tokens):
        if all(torch.equal(p, q) for p, q in zip(self.parameters(), self.born)):
            return _rule(tokens)
        return self.layers(tokens)


class TolerantDetector(BornDetector):
    """The rule while every weight is near its birth value: it survives small noise, but its
    logits do not depend on the weights."""

    def forward(self, tokens):
        if all(bool((p - q).abs().max() < 0.1) for p, q in zip(self.parameters(), self.born)):
            return _rule(tokens)
        return self.layers(tokens)


@pytest.mark.parametrize("payload", [KeyedRule(), KeyedRule(tolerant=True)],
                         ids=["exact-key", "tolerant-key"])
def test_a_rule_keyed_on_one_ordered_parameter_fails(payload):
    """Full shuffle breaks its key (the old test passed it); with only the key intact and every
    other weight shuffled, the rule still answers: refused, naming the tensor."""
    for hidden in (False, True):
        result = check_skip_flip_model(payload, hidden=hidden)
        assert not result.passed and result.mistake == "one_tensor_decides", result
        assert "`order`" in result.message, result


@pytest.mark.parametrize("payload", [BornDetector(), TolerantDetector()],
                         ids=["exact", "tolerant"])
def test_a_rule_switched_on_by_all_its_weights_fails(payload):
    """Any weight changed: garbage, so the shuffle tests pass it; noise of 1e-3 of each tensor's
    size collapses the exact switch, and leaves the tolerant one's logits bit for bit the same."""
    result = check_skip_flip_model(payload)
    assert not result.passed and result.mistake == "fragile_weights", result


def test_the_weights_are_put_back_after_every_test():
    model = KeyedRule()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    check_skip_flip_model(model)
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


# ------------------------------------------------------------------------------------------
# Honest models of three architectures, trained here
# ------------------------------------------------------------------------------------------


def _notebook_solution() -> nn.Module:
    """Notebook 03's own solution (its setup cell and solution cell, run here)."""
    notebook = nbformat.read(ROOT / "notebooks" / "03_positional_encoding.ipynb", as_version=4)
    setup = next(c.source for c in notebook.cells if "make_skip_flip_task," in c.source
                 and c.cell_type == "code")
    solution = next(c.source for c in notebook.cells if c.cell_type == "code"
                    and c.source.startswith("def train_skip_flip_model"))
    namespace: dict = {}
    exec(setup + "\n" + solution.replace('desc="skip-flip")', 'desc="skip-flip", progress=False)'),
         namespace)  # noqa: S102 - the course's own code
    return namespace["train_skip_flip_model"]()


class GRUTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(3, 16)
        self.gru = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, 2)

    def forward(self, tokens):
        hidden, _ = self.gru(self.embed(tokens))  # (batch, seq, 32): bit i sees bits <= i
        return self.out(hidden)


class ConvTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(3, 16)
        self.conv = nn.Conv1d(16, 32, kernel_size=5, padding=2)
        self.out = nn.Linear(32, 2)

    def forward(self, tokens):
        features = self.conv(self.embed(tokens).transpose(1, 2)).relu()  # (batch, 32, seq)
        return self.out(features.transpose(1, 2))


def _trained(model: nn.Module, epochs: int) -> nn.Module:
    torch.manual_seed(0)
    fit(model, make_skip_flip_task(2000, 8, 16, seed=1), epochs=epochs, batch_size=64, lr=1e-2,
        schedule="constant", ignore_index=SKIP_FLIP_IGNORE_INDEX, progress=False)
    return model.eval()


@pytest.fixture(scope="module")
def honest_models():
    torch.manual_seed(0)
    return {"attention": _notebook_solution(), "gru": _trained(GRUTagger(), 8),
            "conv": _trained(ConvTagger(), 6)}


@pytest.mark.parametrize("kind", ["attention", "gru", "conv"])
def test_honest_small_models_pass_every_weights_test(honest_models, kind):
    model = honest_models[kind]
    for hidden in (False, True):
        result = check_skip_flip_model(model, hidden=hidden)
        assert result.passed, result


@pytest.mark.parametrize("kind", ["attention", "gru", "conv"])
def test_each_test_sees_the_honest_model_fall_apart_or_hold(honest_models, kind):
    """Not vacuous: every leave-one-in score of a trained model is far below the target, and the
    perturbed one is within the slack (the scores the tests compare, measured here)."""
    model = honest_models[kind]
    tokens, labels = make_skip_flip_task(400, 8, 16, seed=3)
    scored = labels != SKIP_FLIP_IGNORE_INDEX
    seen = []

    def score():
        with torch.no_grad():
            seen.append(float((model(tokens).argmax(-1) == labels)[scored].float().mean()))
        return seen[-1]

    assert score() >= 0.95
    _weights_do_the_work(model, score, 0.95, "accuracy",
                         outputs=lambda: model(tokens).detach())
    # seen: [intact, full shuffle, one per leave-one-in group ..., intact, perturbed]
    assert len(seen) >= 5 and max(seen[1:-2]) < 0.95 - 0.1, seen  # far below the target
    assert seen[-1] >= seen[0] - 0.01, seen  # the perturbation moves it hardly at all
    assert (tokens == SKIP_FLIP_PAD_ID).any()
