"""The training checkers of 04 and 05 evaluate the course's own model, loaded with the weights.

The exercises prescribe the architecture (04: ``EncoderTagger``, 05: ``Transformer``), so the
checker rebuilds that model from the returned one's weights and settings and never runs the
student's forward code. A module that *detects* the shuffled-weights test (it remembers its own
weights and, when they change, stops answering) passes that test while a hand-written sort does
the work; evaluated as the course's copy of its (untrained) weights it is at chance. The
notebooks' own trained models still pass, visible and hidden, with and without a secret.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from lectures_lib.checks import check_reverse_translator, check_sort_tagger
from lectures_lib.checks._base import SECRET_ENV
from lectures_lib.checks.trained import (
    REVERSE_PAD_ID,
    REVERSE_VOCAB_SIZE,
    SORT_SEQ_LEN,
    SORT_VOCAB_SIZE,
    _weights_do_the_work,
    make_reverse_pairs,
    make_sort_data,
)
from lectures_lib.models import EncoderTagger, Transformer
from lectures_lib.training import fit
from lectures_lib.utils import seed_everything
from tests.shuffle_detector import shuffle_detector

pytestmark = pytest.mark.slow  # trains models: `make quick` skips it


def _sort_tagger():  # notebook 04's solution
    torch.manual_seed(0)
    sorter = EncoderTagger(
        SORT_VOCAB_SIZE, SORT_VOCAB_SIZE, d_model=32, num_heads=2, num_layers=1, d_ff=64,
        max_len=SORT_SEQ_LEN, norm_first=True, pad_id=None,
    )
    fit(sorter, make_sort_data(3000, seed=1), epochs=6, batch_size=64, lr=3e-3, desc="sort",
        progress=False)
    return sorter.eval()


def _reverser():  # notebook 05's solution
    seed_everything(0)
    reverser = Transformer(
        REVERSE_VOCAB_SIZE, REVERSE_VOCAB_SIZE, d_model=32, num_heads=2, num_encoder_layers=1,
        num_decoder_layers=1, d_ff=64, pad_id=REVERSE_PAD_ID,
    )

    def teacher_forced(model, batch):
        src, tgt_in, tgt_out = batch
        return model(src, tgt_in), tgt_out

    fit(reverser, tuple(make_reverse_pairs(3000, seed=1)), epochs=4, batch_size=64, lr=3e-3,
        forward_fn=teacher_forced, desc="reverse", progress=False)
    return reverser.eval()


def test_a_shuffle_detector_fooled_the_shuffle_test_but_not_the_course_copy():
    detector = shuffle_detector()
    tokens, targets = make_sort_data(200, seed=5)

    def score():
        return float((detector(tokens).argmax(-1) == targets).float().mean())

    assert score() == 1.0, "a perfect hand-written sort"
    _weights_do_the_work(detector, score, 0.9, "accuracy")  # the old test: no Mistake raised
    for hidden in (False, True):
        result = check_sort_tagger(detector, hidden=hidden)
        assert not result.passed and result.mistake in ("at_chance", "below_target"), result


def test_a_model_of_another_architecture_is_refused_with_the_reason():
    class Other(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.table = torch.nn.Embedding(SORT_VOCAB_SIZE, SORT_VOCAB_SIZE)

        def forward(self, tokens):
            return F.one_hot(tokens.sort(-1).values, SORT_VOCAB_SIZE).float()

    result = check_sort_tagger(Other())
    assert result.mistake == "not_a_model" and "EncoderTagger" in result.message, result
    result = check_reverse_translator(Other())
    assert result.mistake == "not_a_model", result


@pytest.fixture(scope="module")
def trained_models():
    return _sort_tagger(), _reverser()


@pytest.mark.parametrize("secret", [None, "a secret of this term's instructor"])
def test_the_notebooks_trained_models_pass(trained_models, monkeypatch, secret):
    if secret is None:
        monkeypatch.delenv(SECRET_ENV, raising=False)
    else:
        monkeypatch.setenv(SECRET_ENV, secret)
    sorter, reverser = trained_models
    for hidden in (False, True):
        result = check_sort_tagger(sorter, hidden=hidden)
        assert result.passed, result
        result = check_reverse_translator(reverser, hidden=hidden)
        assert result.passed, result


def test_the_course_copy_ignores_the_students_forward(trained_models):
    """A trained reverser whose own decode is sabotaged still passes: its weights are what is
    evaluated (and a rule in an untrained one earns nothing: the detector above)."""
    _, reverser = trained_models

    class Sabotaged(Transformer):
        def decode(self, *args, **kwargs):
            return torch.zeros(1)

    broken = Sabotaged(REVERSE_VOCAB_SIZE, REVERSE_VOCAB_SIZE, d_model=32, num_heads=2,
                       num_encoder_layers=1, num_decoder_layers=1, d_ff=64,
                       pad_id=REVERSE_PAD_ID)
    broken.load_state_dict(reverser.state_dict())
    assert check_reverse_translator(broken.eval()).passed
    assert check_reverse_translator(reverser).message == check_reverse_translator(broken).message
