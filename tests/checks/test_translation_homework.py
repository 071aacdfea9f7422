"""The homework's tier checkers (``lectures_lib.checks.translation``) in-process: what is refused
before anything trains (a recipe out of bounds, one that carries data, one that cannot fit the
CPU budget), and the cache that lets four tier cells share one training. The full grading (the
sandbox, the secret split, the reference recipe's full marks) is
``tests/tooling/test_homework_grading.py``."""

import pytest

from lectures_lib.checks import translation as H


def test_a_recipe_out_of_bounds_is_named():
    result = H.check_translation_simple(lambda: {"epochs": 1000})
    assert not result and result.mistake == "invalid_recipe"
    assert "your recipe['epochs'] must be in [1, 200], got 1000" in result.message
    result = H.check_translation_simple(lambda: "big")
    assert result.mistake == "invalid_recipe" and "must be a dict" in result.message


def test_a_recipe_that_carries_sentences_is_refused():
    memorised = {f"sentence {i}": "句子" for i in range(50)}
    result = H.check_translation_boss(lambda: {"epochs": 1, "memorised": memorised})
    assert result.mistake == "carries_data" and "'memorised'" in result.message
    result = H.check_translation_boss(lambda: {"epochs": 1, "hint": 1})  # small: just unknown
    assert result.mistake == "invalid_recipe" and "unknown fields ['hint']" in result.message


def test_a_recipe_past_the_budget_stops_early_and_is_reported(monkeypatch):
    monkeypatch.setattr(H, "HOMEWORK_CPU_S", 0.2)
    monkeypatch.setattr(H, "_SCORES", {})
    result = H.check_translation_medium(lambda: {"d_model": 64, "epochs": 100})
    assert result.mistake == "over_budget", result
    assert "limited to 0.2 CPU seconds" in result.message and "over budget" in result.message


def test_each_tier_judges_the_score_against_its_own_fraction(monkeypatch):
    calls = []

    def fake_score(recipe):
        calls.append(recipe)
        return {"stopped": "", "split": "a split", "bleu": 9.0, "chrf": 10.0,
                "retrieval_bleu": 12.0}

    monkeypatch.setattr(H, "_homework_score", fake_score)
    results = [check(lambda: {"epochs": 3}) for check in (
        H.check_translation_simple, H.check_translation_medium, H.check_translation_strong,
        H.check_translation_boss)]
    assert [r.passed for r in results] == [9.0 >= H.TIERS[t] * 12.0 for t in H.TIERS]
    assert results[-1].mistake == "below_tier" and "needs BLEU >=" in results[-1].message
    assert len(calls) == 4  # the fake is not cached; that the real one trains once: below


@pytest.mark.slow
def test_an_untrained_recipe_is_scored_below_every_tier_and_cached(monkeypatch):
    monkeypatch.setattr(H, "_SCORES", {})
    tiny = lambda: {"d_model": 16, "heads": 2, "layers": 1, "d_ff": 32, "epochs": 1,  # noqa: E731
                    "beam": 1}
    first = H.check_translation_simple(tiny)
    assert first.mistake == "below_tier" and "BLEU" in first.message
    assert len(H._SCORES) == 1
    assert H.check_translation_boss(tiny).mistake == "below_tier" and len(H._SCORES) == 1


def test_the_training_is_the_graders_own_time(monkeypatch):
    """The grade command moves the submission's limit on by the seconds a checker trains."""
    from lectures_lib.checks.grader import own_time_listener

    heard = []
    monkeypatch.setattr(H, "_homework_score", lambda recipe: {
        "stopped": "", "split": "s", "bleu": 1.0, "chrf": 1.0, "retrieval_bleu": 10.0})
    with own_time_listener(heard.append):
        H.check_translation_simple(lambda: {"epochs": 2})
    H.check_translation_simple(lambda: {"epochs": 2})  # no listener: nobody hears
    assert len(heard) == 1 and heard[0] >= 0.0


# The quick check (the notebook's own test cell): seconds, no score.

SMALL = {"d_model": 32, "heads": 2, "layers": 1, "d_ff": 64, "epochs": 20, "lr": 3e-3}


def test_the_quick_check_passes_a_recipe_that_trains_and_fits_and_says_it_gives_no_score():
    result = H.check_translation_recipe(lambda: SMALL)
    assert result.passed, result
    assert "valid and trains: its loss fell from" in result.message
    assert f"{H.QUICK_STEPS} steps on one batch of 64 pairs" in result.message
    assert "This check gives no score" in result.message


def test_the_quick_check_names_invalid_and_data_carrying_recipes():
    result = H.check_translation_recipe(lambda: {**SMALL, "beam": 0})
    assert result.mistake == "invalid_recipe" and "your recipe['beam'] must be in [1, 16]" in (
        result.message)
    result = H.check_translation_recipe(lambda: {"answers": ["你好"] * 100})
    assert result.mistake == "carries_data"
    assert H.check_translation_recipe(lambda: None).mistake == "returned_none"  # forgot return


def test_the_quick_check_projects_the_graders_training_past_the_budget(monkeypatch):
    result = H.check_translation_recipe(lambda: {**SMALL, "epochs": 200})
    assert result.passed, result  # a small model: 200 epochs fit
    monkeypatch.setattr(H, "HOMEWORK_CPU_S", 1.0)
    result = H.check_translation_recipe(lambda: {**SMALL, "epochs": 200})
    assert result.mistake == "projected_over_budget", result
    assert "200 epochs x 61 batches of 64 on 3874 pairs = 12200 steps" in result.message
    assert "more than the budget of 1" in result.message


def test_the_quick_check_names_a_loss_that_does_not_fall_and_one_that_diverges(monkeypatch):
    import lectures_lib.real_sentences as T

    real = T.train_translator

    def flat(*args, **kwargs):  # what a recipe whose steps overshoot looks like
        trained = real(*args, **kwargs)
        return trained._replace(losses=[5.0] * len(trained.losses))

    monkeypatch.setattr(T, "train_translator", flat)
    result = H.check_translation_recipe(lambda: SMALL)
    assert result.mistake == "not_learning" and "the loss went from 5.000 to 5.000" in (
        result.message)

    def nan(*args, **kwargs):
        raise FloatingPointError("the loss is nan at epoch 3, step 1 of 1")

    monkeypatch.setattr(T, "train_translator", nan)
    result = H.check_translation_recipe(lambda: SMALL)
    assert result.mistake == "diverged" and "the loss is nan at epoch 3" in result.message


@pytest.mark.parametrize("language", ["zh-Hans", "zh-Hant"])
def test_the_quick_checks_mistakes_are_named_in_both_scripts(language):
    from lectures_lib.checks.messages import localise

    verdict, message = localise(False, "details", "projected_over_budget", language)
    assert "CPU" in message and ("预算" if language == "zh-Hans" else "預算") in message
    verdict, message = localise(False, "details", "not_learning", language)
    assert "（not_learning）" in message and ("学习率" if language == "zh-Hans" else "學習率") in (
        message)
