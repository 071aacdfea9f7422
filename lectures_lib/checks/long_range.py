"""Checker for the training exercise of section 07: a model that binds a value to its key.

``check_binding_model(model)``: ``model(tokens (batch, 32)) -> logits (batch, 32, 4)`` on
:func:`lectures_lib.data.binding_task` at ``seq_len = 32`` (4 pairs, 4 values); the prediction at
the *last* position (the query) is scored on held-out sequences drawn with the checker's own seed
(another for the hidden tests); needs >= 0.85 accuracy (chance 0.25), and a model whose
weights are shuffled must fall below it (a hand-written rule is not a trained model; the
architecture is the student's choice, so its forward code is what runs). The model may be given
trained or as a training function of no arguments (called once, with the time limit of
:mod:`lectures_lib.checks.trained`). Used in ``07_efficient_attention.ipynb``.
"""

from __future__ import annotations

import torch

from ..data import binding_task
from ._base import Mistake, checker, probe_generator, probe_seed
from ._weights import _weights_do_the_work
from .trained import _logits, _trained, _verdict

__all__ = ["BINDING_SEQ_LEN", "BINDING_NEEDED", "check_binding_model"]

BINDING_SEQ_LEN = 32
BINDING_NEEDED = 0.85
_HELD_OUT_SEED = 4711  # never used by a notebook
_N_HELD_OUT = 600


@checker("binding_model")
def check_binding_model(model, hidden: bool = False) -> str:
    """Held-out accuracy of ``model`` at the query position of the binding task (>= 0.85)."""
    model = _trained(model, "the trained model")
    tokens, labels = binding_task(_N_HELD_OUT, BINDING_SEQ_LEN,
                                  seed=probe_seed(_HELD_OUT_SEED + 7 * hidden))
    logits = _logits(model, tokens, 4, f"the model's logits for tokens ({_N_HELD_OUT}, "
                     f"{BINDING_SEQ_LEN})")
    prediction = logits[:, -1].argmax(-1)
    accuracy = float((prediction == labels).float().mean())
    if accuracy < BINDING_NEEDED:
        # A content-blind model predicts the same answer whichever value the asked key holds.
        order = torch.randperm(BINDING_SEQ_LEN - 1, generator=probe_generator(5, "order"))
        swapped = tokens.clone()
        swapped[:, :-1] = tokens[:, order]  # the same bag (and query), the positions shuffled
        same = float((_logits(model, swapped, 4, "the model's logits")[:, -1].argmax(-1)
                      == prediction).float().mean())
        if accuracy <= 0.25 + 0.05 and same > 0.99:
            raise Mistake(
                "content_blind",
                f"held-out accuracy {accuracy:.3f}, chance (0.25); needed {BINDING_NEEDED:.2f}. "
                "Your model gives the same answer when the positions are shuffled: it sees only "
                "the bag of tokens, which is the same for every sequence of this task. It must "
                "compare the query with each pair's key (q . k attention) and tell the first "
                "half from the second (positions).",
            )
    _verdict(accuracy, BINDING_NEEDED, 0.25, "accuracy",
             "The query must find the pair token with its key in the first half: full attention "
             "with a positional encoding and 2 layers learns it in a few hundred steps.")

    def score() -> float:
        logits = _logits(model, tokens, 4, "the model's logits")
        return float((logits[:, -1].argmax(-1) == labels).float().mean())

    _weights_do_the_work(model, score, BINDING_NEEDED, "accuracy")  # a rule is not a model
    return (f"held-out accuracy {accuracy:.3f} >= {BINDING_NEEDED:.2f} on {_N_HELD_OUT} unseen "
            "sequences.")
