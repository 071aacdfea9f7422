"""04's and 05's training must happen when graded: each submission is graded on its own variant
of the task, derived from the instructor's secret, so weights trained before grading fail.

The variant's key comes from the secret and the submission's content (never the secret itself;
another content, another key); without a secret the tasks are the public ones, draw for draw. A
model trained on the public task (the notebook's own solution, trained here) reaches the target
there and fails the variant, named ``trained_elsewhere``; the same solution, trained on what the
data helpers give under the variant, passes (visible and hidden). Every variant is far from the
public task (the criterion holds for many keys), and the sandbox's side of the key is in
``tests/tooling/test_grading_trained.py``.
"""

from __future__ import annotations

import pytest
import torch

from lectures_lib.checks import _base, check_reverse_translator, check_sort_tagger
from lectures_lib.checks._base import SECRET_ENV, set_task_variant, task_key, task_variant
from lectures_lib.checks.trained import (
    REVERSE_LEN,
    REVERSE_VOCAB_SIZE,
    SORT_SEQ_LEN,
    SORT_VOCAB_SIZE,
    VARIANT_MAX_OVERLAP,
    make_reverse_pairs,
    make_sort_data,
    reverse_variant,
    sort_variant,
)
from tests.checks.test_trained_rebuild import _reverser, _sort_tagger

SECRET = "an instructor's secret for this term"


@pytest.fixture
def variant(monkeypatch):
    """A task variant set as the grader sets it (and the public task again afterwards)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    key = task_key('["a submission\'s cells"]')
    set_task_variant(key)
    yield key
    set_task_variant(None)


def test_without_a_secret_there_is_no_key_and_the_tasks_are_the_public_ones(monkeypatch):
    monkeypatch.delenv(SECRET_ENV, raising=False)
    assert task_key("anything") is None and task_variant() is None
    assert sort_variant() is None and reverse_variant() is None
    generator = torch.Generator().manual_seed(4)  # the public draws, written out
    tokens = torch.randint(1, SORT_VOCAB_SIZE, (50, SORT_SEQ_LEN), generator=generator)
    assert torch.equal(make_sort_data(50, seed=4)[0], tokens)
    assert torch.equal(make_sort_data(50, seed=4)[1], tokens.sort(-1).values)
    pairs = make_reverse_pairs(50, seed=4)
    generator = torch.Generator().manual_seed(4)
    src = torch.randint(3, REVERSE_VOCAB_SIZE, (50, REVERSE_LEN), generator=generator)
    assert torch.equal(pairs.src, src) and torch.equal(pairs.tgt_out[:, :-1], src.flip(-1))


def test_the_key_is_not_the_secret_and_changes_with_the_content(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, SECRET)
    key = task_key("cells")
    assert key and SECRET not in key and key == task_key("cells")
    assert task_key("cells, and pasted weights") != key
    monkeypatch.setenv(SECRET_ENV, "another term's secret, as long")
    assert task_key("cells") != key
    with pytest.raises(ValueError, match="key must be"):
        set_task_variant("not a key!")


def test_every_variant_is_far_from_the_public_task(monkeypatch):
    """For many keys: the public sorter's answers score at most VARIANT_MAX_OVERLAP on the
    variant, and at most 2 target tokens keep their id (so a reverser is almost never right)."""
    monkeypatch.setenv(SECRET_ENV, SECRET)
    try:
        for n in range(100):
            set_task_variant(task_key(f"submission {n}"))
            tokens, targets = make_sort_data(1000, seed=n)
            assert float((tokens.sort(-1).values == targets).float().mean()) <= \
                VARIANT_MAX_OVERLAP + 0.05
            pairs = make_reverse_pairs(1000, seed=n)
            exact = (pairs.tgt_out[:, :-1] == pairs.src.flip(-1)).all(-1).float().mean()
            assert float(exact) < 0.05
            relabel = reverse_variant()
            assert sorted(relabel.tolist()) == list(range(REVERSE_VOCAB_SIZE))
            assert relabel[:3].tolist() == [0, 1, 2]  # PAD, BOS, EOS unchanged
    finally:
        set_task_variant(None)


@pytest.fixture(scope="module")
def public_models():
    assert task_variant() is None
    return _sort_tagger(), _reverser()


def test_weights_trained_on_the_public_task_fail_the_variant(public_models, variant):
    sorter, reverser = public_models
    for check, model in ((check_sort_tagger, sorter), (check_reverse_translator, reverser)):
        set_task_variant(None)
        assert check(model).passed, "a well-trained model of the public task"
        set_task_variant(variant)
        for hidden in (False, True):
            result = check(model, hidden=hidden)
            assert not result.passed and result.mistake == "trained_elsewhere", result
            assert "trained before grading" in result.message, result


def test_the_notebooks_solutions_trained_under_the_variant_pass(variant):
    """The training functions draw their data from the helpers, so they learn the variant."""
    assert _base.task_variant() == variant
    sorter, reverser = _sort_tagger(), _reverser()
    for hidden in (False, True):
        assert check_sort_tagger(sorter, hidden=hidden).passed
        assert check_reverse_translator(reverser, hidden=hidden).passed
