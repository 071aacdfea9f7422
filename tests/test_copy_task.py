"""The Annotated Transformer's copy task, where token 1 is both BEGIN and a data token.

Its sources are random tokens 1-10 with the first one set to 1, which is also the decoder's BEGIN
(``tgt = src``: the decoder reads ``src[:, :-1]`` and predicts ``src[:, 1:]``). The course's
decoders never emit BEGIN by default, so an output that should contain token 1 is always wrong:
about (9/10)^9 ≈ 39 % of the outputs have no 1 and can be right. ``suppress_bos=False`` is the
learner's switch for tasks like this one; with it the course's ``Transformer`` + greedy decoding
copies new sequences exactly (asserted across seeds, on a held-out set).
"""

from __future__ import annotations

import pytest
import torch

from lectures_lib.decoding import exact_match, greedy_decode
from lectures_lib.models import Transformer
from lectures_lib.training import fit
from lectures_lib.utils import seed_everything

pytestmark = pytest.mark.slow  # trains models: `make quick` skips it

BEGIN, PAD, END = 1, 0, 11  # END never occurs: the outputs run for max_len tokens, as there
VOCAB, LENGTH = 12, 10


def copy_data(n: int, seed: int) -> torch.Tensor:
    """``(n, LENGTH)`` sources: random tokens 1-10, the first one 1 (= BEGIN)."""
    generator = torch.Generator().manual_seed(seed)
    src = torch.randint(1, 11, (n, LENGTH), generator=generator)
    src[:, 0] = BEGIN
    return src


@pytest.fixture(scope="module", params=[0, 1, 2])
def trained(request):
    seed = request.param
    seed_everything(seed)
    model = Transformer(VOCAB, VOCAB, d_model=64, num_heads=4, num_encoder_layers=1,
                        num_decoder_layers=1, d_ff=128, pad_id=PAD)
    src = copy_data(4000, seed)
    fit(model, (src, src[:, :-1], src[:, 1:]), epochs=4, batch_size=64, seed=seed, progress=False)
    return model, copy_data(1000, 10_000 + seed)  # held-out sources


def test_copy_task_reaches_exact_match_with_bos_allowed(trained):
    model, test = trained
    output = greedy_decode(model, test, LENGTH - 1, BEGIN, END, PAD, suppress_bos=False)
    assert exact_match(output, test[:, 1:]) >= 0.999


def test_suppressing_begin_caps_the_copy_task(trained):
    model, test = trained
    output = greedy_decode(model, test, LENGTH - 1, BEGIN, END, PAD)  # the default
    without_one = float((test[:, 1:] != BEGIN).all(dim=1).float().mean())  # the reachable part
    accuracy = exact_match(output, test[:, 1:])
    assert not bool((output == BEGIN).any()), "the default never emits BEGIN"
    assert accuracy <= without_one + 1e-9, "only outputs without a 1 can be right"
    assert accuracy >= without_one - 0.01, "and those the model copies"
