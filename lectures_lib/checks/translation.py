r"""The graded homework of section 08: an English -> Chinese translation recipe, retrained by the
grader and scored with BLEU on sentences the student never sees (the lecture's homework,
Lee-style tiers: simple / medium / strong / boss).

**What the student hands in** is a recipe, not a model and not code that trains: a function
``my_recipe()`` that returns a dict of bounded choices (:data:`~lectures_lib.real_sentences.
RECIPE_CHOICES`: tokenisation, model size, training, decoding). The checker validates it and
trains it *here*, with the course's own code (:func:`~lectures_lib.real_sentences.
train_translator`), on the training pairs only; then it translates the test English and scores
BLEU (sacrebleu, ``tokenize="zh"``) against the test Chinese. Why plain data: the student's code
never runs next to the data, so it cannot read the test references (the sentences' package is
installed wherever the course is, the test English alone would let code look its Chinese up);
what crosses from the grader's sandbox is a small dict, checked field by field (a recipe that
tries to carry sentences, or any field the recipe does not have, is refused and named); and the
cost of a submission is bounded by the recipe's fields and the CPU budget below, whatever the
student writes.

**The test split.** With the instructor's grading secret (``python -m course_tools grade
--secret-file``), the 400 test pairs are drawn from the secret
(:func:`~lectures_lib.data.sentences.secret_split`): the data are public, so a fixed split could
be trained on; the recipe is trained on every other pair. Without a secret (a learner's own
check in the notebook), the course's fixed split: trained on ``train``, scored on ``test``.

Through nbgrader (``autograde``, the sandboxed kernel) the checker runs in the submission's own
kernel: no secret reaches it (the fixed split is used) and the student's code shares its
process, as for every nbgrader-graded exercise; the course's grade command (here, or
``--scheduler``) keeps the two apart. nbgrader needs ``c.ExecutePreprocessor.timeout`` above the
training's wall time (600 s).

**The budget.** Training may use :data:`HOMEWORK_CPU_S` CPU seconds (one thread, the grading
machine): a recipe whose first epoch shows it cannot finish in time stops there, one that runs
past the budget stops at the end of that epoch, and either is reported ``over_budget`` (no
score: it did not train what it asked for). A loss that becomes NaN is ``diverged``.

**The tiers** (:data:`TIERS`): each is a fraction of the BLEU that *retrieval* reaches on the
same test split (the Chinese of the nearest training sentence: :func:`~lectures_lib.
real_sentences.retrieve`), so a harder or easier secret split moves every tier with it. The
fractions are the course's own measured references (``benchmarks/real_sentences.py``, 3 seeds,
the fixed split; ``benchmarks/README.md``): simple, the notebook's starter recipe; medium, the
word-by-word gloss; strong, the reference recipe (25 epochs) with beam search; boss, the same
recipe trained for 50 epochs: each the lowest of its seeds, floored to 2 decimals, so each
reference reaches its tier on every seed there. The 50-epoch recipe beats retrieval on two
seeds of three (test BLEU), not on every one; a submission that beats it is told so. One test cell per tier; a recipe is
trained once per process and every tier's cell reads the same score.

**The quick check** (:func:`check_translation_recipe`, the notebook's own test cell: a few
seconds, no score): the recipe is validated as above, then trained for :data:`QUICK_STEPS` steps
on one batch of training pairs. It names a recipe that diverges, one whose loss does not fall, and
one whose pace says the grader's full training would not fit the budget (projected from the
measured seconds per step and the steps the recipe asks for on the grading split's training
pairs); a recipe that passes it is trained and scored only by the tier checkers.
"""

from __future__ import annotations

import json
import sys
import time
from contextlib import redirect_stderr

from ._base import Mistake, _current, call, checker

__all__ = ["HOMEWORK_CPU_S", "TIERS", "TIER_REFERENCES", "QUICK_STEPS", "check_translation_recipe",
           "check_translation_simple", "check_translation_medium", "check_translation_strong",
           "check_translation_boss"]

HOMEWORK_CPU_S = 600.0  # CPU seconds of training per submission (the boss reference: ~240-270)
# tier -> the fraction of retrieval's BLEU on the same test split it needs; measured (see above):
# benchmarks/real_sentences.py's tier_fractions() recomputes them from the stored runs
TIERS = {"simple": 0.23, "medium": 0.6, "strong": 0.81, "boss": 0.96}
TIER_REFERENCES = {  # where each fraction comes from (benchmarks/real_sentences.json)
    "simple": "the notebook's STARTER recipe, the lowest of 3 seeds",
    "medium": "a word-by-word dictionary translation (the gloss baseline)",
    "strong": "the course's 25-epoch reference recipe with beam search, the lowest of 3 seeds",
    "boss": "the course's 50-epoch reference recipe with beam search, the lowest of 3 seeds",
}
QUICK_STEPS = 30  # steps of the quick check's training (one batch, repeated)
QUICK_CPU_S = 8.0  # ... stopped sooner when a recipe's steps are this slow
_LARGE_FIELD = 200  # characters of a field's value that can only be data, not a setting
_SCORES: dict[str, dict] = {}  # recipe and split -> score: one training per submission


def _split():
    """(name, train pairs, test pairs): drawn from the grading secret, else the fixed split."""
    from ..data.sentences import secret_split, split_sentences
    from ._secrets import _secret, secret_fingerprint

    secret = _secret()
    if secret is not None:
        train, test = secret_split(secret.decode("utf-8", "replace"))
        return f"secret {secret_fingerprint()}", train, test
    splits = split_sentences(seed=0)
    return "the course's fixed split (seed 0)", splits.train, splits.test


def _checked(recipe) -> dict:
    """The recipe, validated; a Mistake that names what is wrong with it."""
    from ..real_sentences import RECIPE_CHOICES, check_recipe

    if isinstance(recipe, dict):
        for field, value in recipe.items():
            size = len(json.dumps(value, ensure_ascii=False, default=str))
            if field not in RECIPE_CHOICES and size > _LARGE_FIELD:
                raise Mistake(
                    "carries_data",
                    f"your recipe's field {str(field)[:40]!r} holds {size} characters of data: a "
                    "recipe holds settings only (its fields are "
                    f"{', '.join(sorted(RECIPE_CHOICES))}). The grader trains on its own training "
                    "pairs and scores sentences your code never sees; sentences or translations "
                    "handed in are not used.")
    try:
        return check_recipe(recipe, "your recipe")
    except (TypeError, ValueError) as error:
        raise Mistake("invalid_recipe", f"{error}.") from None


def _homework_score(recipe: dict) -> dict:
    """Train ``recipe`` on the grading split's training pairs (within :data:`HOMEWORK_CPU_S`)
    and score it on its test pairs: ``{"bleu", "chrf", "retrieval_bleu", "split", "cpu_s",
    "stopped"}``. Cached: each recipe and split is trained once per process."""
    from ..real_sentences import bleu_chrf, retrieve, train_translator, translate

    name, train, test = _split()
    recipe = _checked(recipe)
    key = json.dumps([name, recipe], sort_keys=True)
    if key in _SCORES:
        return _SCORES[key]
    start = time.process_time()
    script = recipe["script"]
    references = [p.chinese(script) for p in test]
    english = [p.english for p in test]
    # a progress bar in a notebook (on stdout: nbgrader scores a test cell that wrote to stderr
    # 0 points), none in the grade command (which times the student's code elsewhere)
    progress = not getattr(_current, "timed_elsewhere", False)
    try:
        with redirect_stderr(sys.stdout):
            trained = train_translator(train, recipe, 0, max_cpu_s=HOMEWORK_CPU_S,
                                       refuse_projected=True, progress=progress)
    except FloatingPointError as error:
        score = {"stopped": f"diverged: {error}", "split": name}
    else:
        score = {"stopped": trained.stopped, "split": name, "epochs": trained.epochs_done}
        if not trained.stopped:
            score.update(bleu_chrf(translate(trained, english), references))
    score["retrieval_bleu"] = bleu_chrf(retrieve(train, english, script=script),
                                        references)["bleu"]
    score["cpu_s"] = round(time.process_time() - start, 1)
    _SCORES[key] = score
    return score


def _tier(recipe_fn, tier: str) -> str:
    """The recipe ``recipe_fn()`` returns, trained and scored (once), against ``tier``."""
    from .grader import graders_own_time

    recipe = _checked(call(recipe_fn))
    with graders_own_time():  # the course's training: not counted in the submission's time
        score = _homework_score(recipe)
    if score["stopped"].startswith("diverged"):
        raise Mistake("diverged", f"training {score['stopped']}. Nothing to score.")
    if score["stopped"]:
        raise Mistake(
            "over_budget",
            f"training is limited to {HOMEWORK_CPU_S:g} CPU seconds per submission and your "
            f"recipe stopped: {score['stopped']}. Make it cheaper (fewer epochs, a smaller "
            "d_model or d_ff, fewer layers, larger batches) and check it again.")
    needed = round(TIERS[tier] * score["retrieval_bleu"], 2)
    measured = (f"BLEU {score['bleu']:.2f} (chrF {score['chrf']:.2f}) on the test sentences of "
                f"{score['split']}; retrieving the nearest training sentence scores "
                f"{score['retrieval_bleu']:.2f} there")
    if score["bleu"] >= score["retrieval_bleu"]:
        measured += " (your recipe beats the lookup on this split)"
    if score["bleu"] < needed:
        raise Mistake(
            "below_tier",
            f"{measured}. The {tier} tier needs BLEU >= {needed:.2f} ({TIERS[tier]:g} x "
            f"retrieval's; {TIER_REFERENCES[tier]}).")
    return f"{measured}: the {tier} tier (>= {needed:.2f}) is reached."


@checker("translation_simple")
def check_translation_simple(recipe_fn) -> str:
    """The simple tier: the notebook's starter recipe, or better."""
    return _tier(recipe_fn, "simple")


@checker("translation_medium")
def check_translation_medium(recipe_fn) -> str:
    """The medium tier: at least as good as a word-by-word dictionary translation."""
    return _tier(recipe_fn, "medium")


@checker("translation_strong")
def check_translation_strong(recipe_fn) -> str:
    """The strong tier: the course's 25-epoch reference recipe with beam search."""
    return _tier(recipe_fn, "strong")


@checker("translation_boss")
def check_translation_boss(recipe_fn) -> str:
    """The boss tier: the course's 50-epoch reference recipe with beam search."""
    return _tier(recipe_fn, "boss")


def _grading_pairs() -> int:
    """How many training pairs the grader trains on (every pair but the secret test split's)."""
    from ..data.sentences import load_sentences, split_sentences

    return len(load_sentences()) - len(split_sentences(seed=0).test)


@checker("translation_recipe")
def check_translation_recipe(recipe_fn) -> str:
    """The quick check (seconds): a valid recipe that trains, and fits the grader's budget."""
    from ..data.sentences import split_sentences
    from ..real_sentences import train_translator

    recipe = _checked(call(recipe_fn))
    batch = recipe["batch_size"]
    pairs = split_sentences(seed=0).train[:batch]  # one batch; each epoch of the trial = 1 step
    trial = {**recipe, "epochs": QUICK_STEPS}
    try:
        with redirect_stderr(sys.stdout):
            trained = train_translator(pairs, trial, 0, max_cpu_s=QUICK_CPU_S, progress=False)
    except FloatingPointError as error:
        raise Mistake("diverged", f"in a short trial on {len(pairs)} training pairs, {error}.") \
            from None
    done = len(trained.losses) + (1 if trained.stopped else 0)  # steps taken
    per_step = trained.cpu_s / done
    n_train = _grading_pairs()
    steps = recipe["epochs"] * -(-n_train // batch)
    projected = per_step * steps
    if projected > HOMEWORK_CPU_S:
        raise Mistake(
            "projected_over_budget",
            f"one training step of your recipe took {per_step:.2f} CPU s here; the grader's "
            f"training ({recipe['epochs']} epochs x {-(-n_train // batch)} batches of {batch} "
            f"on {n_train} pairs = {steps} steps) would take about {projected:.0f} CPU s, more "
            f"than the budget of {HOMEWORK_CPU_S:g}: the grader would stop it unscored. Make it "
            "cheaper (fewer epochs, a smaller d_model or d_ff, fewer layers, larger batches).")
    losses = trained.losses
    if len(losses) >= 2 and not losses[-1] < losses[0]:
        raise Mistake(
            "not_learning",
            f"in {len(losses)} steps on one batch of {len(pairs)} training pairs the loss went "
            f"from {losses[0]:.3f} to {losses[-1]:.3f}: it should fall (a model learns one batch "
            "by heart quickly). Check lr (too small to move, or so large the steps overshoot) "
            "and warmup.")
    fell = (f"its loss fell from {losses[0]:.3f} to {losses[-1]:.3f} in {len(losses)} steps on "
            f"one batch of {len(pairs)} pairs" if len(losses) >= 2 else "it takes a step")
    # no seconds in the message: a notebook stores it, and its numbers must not change per run
    return (f"your recipe is valid and trains: {fell}, and the pace of those steps says the "
            f"grader's training ({steps} steps on {n_train} pairs) fits the budget of "
            f"{HOMEWORK_CPU_S:g} CPU s. This check gives no score: the grader retrains the recipe "
            "and scores BLEU on sentences you never see (check_translation_simple(my_recipe) and "
            "the other tiers train it as the grader does, for minutes).")
