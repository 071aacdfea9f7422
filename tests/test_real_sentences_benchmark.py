"""The real-sentence benchmark (``benchmarks/real_sentences.py``): the stored deterministic
baselines, recomputed (so the JSON that notebook 08 reads cannot drift from the data and the
code), and its stored search read back. Runs from a checkout; the library it runs is tested in
``tests/test_real_sentences.py``."""

import json
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
if not (BENCHMARKS / "real_sentences.py").exists():  # an installed wheel without the checkout
    pytest.skip("benchmarks/ is not here (a checkout is needed)", allow_module_level=True)
sys.path.insert(0, str(BENCHMARKS))
import real_sentences as R  # noqa: E402

from lectures_lib.data import sentences as S  # noqa: E402

STORED = BENCHMARKS / "real_sentences.json"


@pytest.fixture(scope="module")
def splits():
    return S.split_sentences()


@pytest.mark.skipif(not STORED.exists(), reason="no stored runs")
def test_stored_baselines_are_what_the_code_computes(splits):
    stored = json.loads(STORED.read_text())
    assert stored["settings"]["sha256"] == S.DATA_SHA256
    assert (stored["settings"]["train"], stored["settings"]["test"]) == (
        len(splits.train), len(splits.test))
    recomputed = {
        ("segmentation", "max matching (training words)"):
            ("f1", R.segmentation_max_match(splits)["f1"]),
        ("translation", "retrieval (TF-IDF words + bigrams)"):
            ("test_bleu", R.retrieval(splits, True)["test"]["bleu"]),
        ("translation", "word-by-word gloss (Dice)"):
            ("test_bleu", R.gloss(splits)["test"]["bleu"]),
    }
    checked = 0
    for row in stored["rows"]:
        key = (row["task"], row["method"])
        if key in recomputed:
            metric, value = recomputed[key]
            assert row[metric] == pytest.approx(value), (key, row["seed"])
            checked += 1
    assert checked, "the stored runs hold none of the deterministic baselines"
    assert R.markdown(stored).count("|") > 20


@pytest.mark.skipif(not STORED.exists(), reason="no stored runs")
def test_the_homework_tiers_are_the_stored_reference_measurements():
    """Each tier's fraction of retrieval's BLEU is the lowest over 3 seeds of its reference recipe
    (recomputed from the stored runs), and the tiers rise from simple to boss."""
    from lectures_lib.checks.translation import TIERS

    fractions = R.tier_fractions(json.loads(STORED.read_text()))
    assert TIERS == fractions
    assert list(TIERS.values()) == sorted(TIERS.values())


@pytest.mark.skipif(not STORED.exists(), reason="no stored runs")
def test_every_stored_recipe_run_is_the_scripts_recipe_and_chosen_on_validation():
    """A stored Transformer row was trained with the recipe of that name in ``RECIPES`` (the
    script and the JSON cannot drift apart), and its reported decoding is the one with the best
    validation BLEU among those it stored (the test split never chooses)."""
    stored = json.loads(STORED.read_text())
    checked = 0
    for row in stored["rows"]:
        if row["task"] != "translation" or not row["method"].startswith("Transformer: "):
            continue
        name = row["method"].removeprefix("Transformer: ")
        assert name in R.RECIPES, f"{name!r} is stored but not in RECIPES"
        assert R.recipe_of(row["recipe"]) == R.recipe_of(R.RECIPES[name]), (name, row["seed"])
        assert row["recipe"]["max_cpu_s"] == R.RECIPES[name]["max_cpu_s"], (name, row["seed"])
        evaluations = row["evaluations"]
        best = max(evaluations, key=lambda k: evaluations[k]["valid"]["bleu"])
        assert evaluations[row["chosen_on_valid"]]["valid"]["bleu"] == \
            evaluations[best]["valid"]["bleu"], (name, row["seed"])
        assert row["test_bleu"] == evaluations[row["chosen_on_valid"]]["test"]["bleu"]
        checked += 1
    assert checked, "the stored runs hold no Transformer recipe"
