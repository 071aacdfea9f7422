"""Checker for the training exercise of section 07: a model that binds a value to its key.

``check_binding_model(model)``: ``model(tokens (batch, 32)) -> logits (batch, 32, 4)`` on
:func:`lectures_lib.data.binding_task` at ``seq_len = 32`` (4 pairs, 4 values); the prediction at
the *last* position (the query) is scored on held-out sequences drawn with the checker's own seed
(another for the hidden tests); needs >= 0.85 accuracy (chance 0.25), and a model whose
weights are shuffled must fall below it (a hand-written rule is not a trained model; the
architecture is the student's choice, so its forward code is what runs). The model may be given
trained or as a training function of no arguments (called once, with the time limit of
:mod:`lectures_lib.checks.trained`). Used in ``07_efficient_attention.ipynb``.

``check_query_rule(fn)``: exercise 6 of the same notebook, the query-only rule of section 7
chosen on a training set and scored on held-out sequences (the held-out counterpart of section 7's
ceiling, which is chosen after seeing the labels).
"""

from __future__ import annotations

import torch

from ..data import binding_task
from ._base import Mistake, call, checker, probe_generator, probe_seed
from ._weights import _weights_do_the_work
from .trained import _logits, _trained, _verdict

__all__ = ["BINDING_SEQ_LEN", "BINDING_NEEDED", "check_binding_model", "check_query_rule",
           "query_rule_reference"]

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


# --- Exercise 6: the query-only rule on held-out data --------------------------------------------

def query_rule_reference(train_tokens, train_labels, test_tokens, test_labels) -> float:
    """The held-out accuracy of the rule chosen on the training set: each query token (the last
    token of a sequence) answers its most frequent training label; a query token never seen in
    training answers the most frequent training label overall."""
    asked = train_tokens[:, -1]  # (n_train,): the query token of each training sequence
    n_labels = int(max(train_labels.max(), test_labels.max())) + 1
    majority = int(torch.bincount(train_labels, minlength=n_labels).argmax())
    answer = {int(key): int(torch.bincount(train_labels[asked == key], minlength=n_labels).argmax())
              for key in asked.unique()}
    guesses = torch.tensor([answer.get(int(key), majority) for key in test_tokens[:, -1]])
    return float((guesses == test_labels).double().mean())


def _in_sample(tokens, labels) -> float:
    """The answers chosen on the scored labels themselves (section 7's ceiling)."""
    asked = tokens[:, -1]
    return sum(int(labels[asked == key].bincount().max()) for key in asked.unique()) / len(labels)


def _rule_sample(n, seq_len, n_keys, n_values, weights, favourite, generator, fillers=10):
    """``n`` sequences: fillers, the query (a key, drawn with ``weights``) last, and at position 0
    a key-like token that is not the query (tied to the label some of the time, so that a rule
    read there gives other answers); labels: the key's favourite value half the time, otherwise
    uniform."""
    tokens = torch.randint(n_keys, n_keys + fillers, (n, seq_len), generator=generator)
    keys = torch.multinomial(weights, n, replacement=True, generator=generator)
    tokens[:, -1] = keys
    skewed = torch.rand(n, generator=generator) < 0.5
    labels = torch.where(skewed, favourite[keys], torch.randint(0, n_values, (n,), generator=generator))
    tied = torch.rand(n, generator=generator) < 0.4
    tokens[:, 0] = torch.where(tied, labels % n_keys, torch.randint(0, n_keys, (n,), generator=generator))
    return tokens, labels


def _no_ties(tokens, labels, n_values) -> bool:
    counts = [torch.bincount(labels, minlength=n_values)]
    counts += [torch.bincount(labels[tokens[:, -1] == key], minlength=n_values)
               for key in tokens[:, -1].unique()]
    return all(int((c == c.max()).sum()) == 1 for c in counts)


def _rule_probe(n_train, n_test, seq_len, n_keys, n_values, seed):
    """A (train, test) pair with skewed labels, one key never asked in training, and no tied
    most-frequent label (so any way of picking the most frequent label gives the same answer)."""
    generator = probe_generator(seed, "query rule")
    while True:
        weights = torch.rand(n_keys, generator=generator) + 0.2  # unequal key frequencies
        favourite = torch.randint(0, n_values, (n_keys,), generator=generator)
        seen = weights.clone()
        seen[-1] = 0.0  # the last key is never asked in training
        train = _rule_sample(n_train, seq_len, n_keys, n_values, seen, favourite, generator)
        test = _rule_sample(n_test, seq_len, n_keys, n_values, weights, favourite, generator)
        if _no_ties(*train, n_values) and bool((test[0][:, -1] == n_keys - 1).any()):
            return (*train, *test)


def _query_rule_mistakes(probe) -> list[tuple[str, float, str]]:
    """The answers of likely mistakes on ``probe``: ``(code, value, explanation)``."""
    train_tokens, train_labels, test_tokens, test_labels = probe
    n_labels = int(max(train_labels.max(), test_labels.max())) + 1
    majority = int(torch.bincount(train_labels, minlength=n_labels).argmax())
    first = train_tokens.flip(1)  # (n_train, N): position 0 moved to the query's place
    test_first = test_tokens.flip(1)
    seen = set(train_tokens[:, -1].tolist())
    rule = query_rule_reference(*probe)
    known = torch.tensor([int(k) in seen for k in test_tokens[:, -1]])
    n_correct = round(rule * len(test_labels))
    return [
        ("rule_chosen_on_test", _in_sample(test_tokens, test_labels),
         "you chose each query token's answer on the held-out labels themselves: that is "
         "section 7's ceiling, an upper bound chosen after seeing the answers. Choose the answers "
         "on the training set and score them on the test set."),
        ("rule_reads_first_token", query_rule_reference(first, train_labels, test_first, test_labels),
         "you read the token at position 0; the query (the key asked for) is the *last* token of "
         "each sequence, tokens[:, -1]."),
        ("rule_ignores_query", float((test_labels == majority).double().mean()),
         "you answer the most frequent training label for every sequence (the majority class): "
         "the rule answers, for each query token, *its* most frequent training label."),
        ("rule_unseen_query",
         query_rule_reference(train_tokens, train_labels, test_tokens[known], test_labels[known]),
         "you scored only the test sequences whose query token occurs in training: every test "
         "sequence counts, and a query token never seen in training answers the most frequent "
         "training label overall."),
        ("count_not_share", float(n_correct),
         "you returned the number of correct answers: return their share (a float between 0 "
         "and 1), the number divided by the number of test sequences."),
    ]


_RULE_CASES = ((300, 200, 12, 5, 4, 61), (120, 400, 6, 3, 5, 62))
_RULE_HIDDEN = ((500, 300, 40, 8, 6, 63), (60, 80, 3, 3, 3, 64), (1000, 250, 20, 12, 2, 65))


@checker("query_rule")
def check_query_rule(student_fn, hidden: bool = False) -> str:
    """Check ``student_fn(train_tokens, train_labels, test_tokens, test_labels) -> float``: the
    held-out accuracy of the query-only rule chosen on the training set
    (:func:`query_rule_reference`). Probes: skewed labels, a query token never seen in training,
    a position 0 that is not the query, no tied most-frequent label; ``hidden=True`` adds other
    lengths and numbers of keys and values.

    Mistake codes: ``rule_chosen_on_test``, ``rule_reads_first_token``, ``rule_ignores_query``,
    ``rule_unseen_query``, ``count_not_share``, ``wrong_return_type``, ``wrong_values`` (and those
    of every check: ``raised``, ``returned_none`` ...).
    """
    cases = _RULE_CASES + (_RULE_HIDDEN if hidden else ())
    wrong = []  # (described, got, expected, the mistakes whose answer this is)
    for n_train, n_test, seq_len, n_keys, n_values, seed in cases:
        probe = _rule_probe(n_train, n_test, seq_len, n_keys, n_values, seed)
        described = (f"train_tokens ({n_train}, {seq_len}), train_labels ({n_train},), test_tokens "
                     f"({n_test}, {seq_len}), test_labels ({n_test},); {n_keys} query tokens, "
                     f"{n_values} values")
        got = call(student_fn, *probe)
        if isinstance(got, torch.Tensor) and got.numel() == 1:
            got = got.item()
        if isinstance(got, bool) or not isinstance(got, (int, float)):
            raise Mistake("wrong_return_type",
                          f"return a float (the share of correct test answers), got "
                          f"{type(got).__name__} for {described}.")
        expected = query_rule_reference(*probe)
        if abs(got - expected) >= 1e-6:
            matching = {code: explanation for code, value, explanation in _query_rule_mistakes(probe)
                        if abs(got - value) < 1e-6 and abs(value - expected) >= 1e-6}
            wrong.append((described, got, expected, matching, probe))
    if wrong:
        described, got, expected, _, probe = wrong[0]
        shown = f" For {described}: you returned {got:.4f}, expected {expected:.4f}."
        common = set.intersection(*(set(matching) for *_, matching, _ in wrong))
        for code, _, explanation in _query_rule_mistakes(probe):
            if common == {code}:  # one mistake explains every wrong answer
                raise Mistake(code, explanation + shown)
        raise Mistake("wrong_values", f"{len(wrong)} of {len(cases)} probes differ.{shown} (The "
                                      "query is the last token; answers are chosen on the "
                                      "training set and scored on the test set.)")
    extra = f" and {len(_RULE_HIDDEN)} hidden ones" if hidden else ""
    return (f"correct on {len(_RULE_CASES)} probes{extra}: answers chosen on the training set, "
            "scored on held-out sequences, unseen query tokens answered by the majority class.")
