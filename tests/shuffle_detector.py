"""One attack, two tests: a sort tagger that detects the shuffled-weights test.

``SOURCE`` is what a student would hand in for 04's training exercise (its names, ``EncoderTagger``
and ``SORT_VOCAB_SIZE``, come from the notebook): untrained weights, a hand-written sort while its
weights are the ones it was born with, nonsense as soon as anyone changes them.
``tests/tooling/test_grading_trained.py`` grades it through the real grade command;
``tests/checks/test_trained_rebuild.py`` builds it here with :func:`shuffle_detector`.
"""

from __future__ import annotations

SOURCE = '''import torch
import torch.nn.functional as F


def train_sort_tagger():
    class Detector(EncoderTagger):
        def __init__(self):
            super().__init__(SORT_VOCAB_SIZE, SORT_VOCAB_SIZE, d_model=16, num_heads=2,
                             num_layers=1, d_ff=32, pad_id=None)
            self.eval()
            self._born = [p.detach().clone() for p in self.parameters()]

        def forward(self, tokens, mask=None, need_weights=False):
            if all(torch.equal(p, q) for p, q in zip(self.parameters(), self._born)):
                return F.one_hot(tokens.sort(-1).values, SORT_VOCAB_SIZE).float() * 10
            return torch.zeros(*tokens.shape, SORT_VOCAB_SIZE)  # shuffled: "falls below"

    return Detector()
'''


def shuffle_detector():
    """The model ``SOURCE`` returns, built with the course's names."""
    from lectures_lib.checks.trained import SORT_VOCAB_SIZE
    from lectures_lib.models import EncoderTagger

    namespace = {"EncoderTagger": EncoderTagger, "SORT_VOCAB_SIZE": SORT_VOCAB_SIZE}
    exec(SOURCE, namespace)  # noqa: S102 - the test's own attack, not a submission
    return namespace["train_sort_tagger"]()
