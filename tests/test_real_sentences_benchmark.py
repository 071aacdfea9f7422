"""The real-sentence benchmark (``benchmarks/real_sentences.py``): its batching, its baselines
against their definitions, and the stored deterministic baselines, recomputed (so the JSON that
notebook 08 reads cannot drift from the data and the code). Runs from a checkout."""

import json
import sys
from pathlib import Path

import pytest
import torch

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


def test_length_batches_cover_every_row_once_with_little_padding():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 30, (1000,))
    tokens = (torch.arange(30)[None, :] < lengths[:, None]).long() * 5  # (1000, 30), 0 = pad
    batches = R.length_batches(tokens, 32, generator)
    assert sorted(torch.cat(batches).tolist()) == list(range(1000))
    padded = sum(R.trim(tokens[rows]).numel() for rows in batches)
    assert padded < 1.2 * int(lengths.sum())  # random batches pad to ~30 per row: ~2x
    assert R.trim(torch.tensor([[4, 5, 0, 0], [4, 0, 0, 0]])).tolist() == [[4, 5], [4, 0]]


def test_retrieval_returns_the_training_sentence_with_the_same_english(splits):
    """A validation sentence put into training is retrieved exactly: BLEU 100 on it."""
    target = splits.valid[0]
    probe = S.SentenceSplits(train=[*splits.train, target], valid=[target], test=[target])
    assert R.retrieval(probe, (1, 2))["test"]["bleu"] == pytest.approx(100.0)


def test_gloss_translates_word_by_word():
    pair = S.SentencePair("x", "Teacher, good.", "老师，好。", "老師，好。", ("老师", "，", "好", "。"),
                          1, "t")
    other = S.SentencePair("y", "Good.", "好。", "好。", ("好", "。"), 1, "t")
    probe = S.SentenceSplits(train=[pair, other], valid=[pair], test=[pair])
    assert R.gloss(probe)["test"]["bleu"] == pytest.approx(100.0)


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
            ("test_bleu", R.retrieval(splits, (1, 2))["test"]["bleu"]),
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
