"""``lectures_lib.real_sentences`` (translation on real sentences) and ``sentence_labels``: the
recipe's validator, the batching, the baselines against their definitions, a tiny training run
(seeded, budgeted, NaN-stopped) and its decoding. Quick: the models here train for seconds."""

import re

import pytest
import torch

from lectures_lib import real_sentences as T
from lectures_lib import sentence_labels as L
from lectures_lib.data import sentences as S

TINY = dict(d_model=16, heads=2, layers=1, d_ff=32, epochs=2, beam=1, average_last=2)


@pytest.fixture(scope="module")
def splits():
    return S.split_sentences()


def test_recipe_is_completed_and_every_field_is_bounded():
    full = T.check_recipe({"epochs": 3, "dropout": 0})  # an int for a float field is fine
    assert full["epochs"] == 3 and full["dropout"] == 0.0 and full["d_model"] == 128
    assert set(full) == set(T.RECIPE_CHOICES) == set(T.RECIPE_DEFAULTS)
    for bad, error, words in [
        ({"epochs": 0}, ValueError, "recipe['epochs'] must be in [1, 200], got 0"),
        ({"epochs": 2.0}, TypeError, "recipe['epochs'] must be a int, got float"),
        ({"norm_first": 1}, TypeError, "recipe['norm_first'] must be a bool"),
        ({"target": "bytes"}, ValueError, "must be one of ('chars', 'words')"),
        ({"lr": float("nan")}, ValueError, "recipe['lr'] must be in"),
        ({"d_model": 30, "heads": 4}, ValueError, "must be divisible by"),
        ({"sentences": []}, ValueError, "unknown fields ['sentences']"),
        ([("epochs", 1)], TypeError, "recipe must be a dict"),
    ]:
        with pytest.raises(error, match=re.escape(words)):
            T.check_recipe(bad)


def test_length_batches_cover_every_row_once_with_little_padding():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(1, 30, (1000,))
    tokens = (torch.arange(30)[None, :] < lengths[:, None]).long() * 5  # (1000, 30), 0 = pad
    batches = T.length_batches(tokens, 32, generator)
    assert sorted(torch.cat(batches).tolist()) == list(range(1000))
    padded = sum(T.trim(tokens[rows]).numel() for rows in batches)
    assert padded < 1.2 * int(lengths.sum())  # random batches pad to ~30 per row: ~2x
    assert T.trim(torch.tensor([[4, 5, 0, 0], [4, 0, 0, 0]])).tolist() == [[4, 5], [4, 0]]


def test_retrieval_returns_the_training_sentence_with_the_same_english(splits):
    """A validation sentence put into training is retrieved exactly: BLEU 100 on it."""
    target = splits.valid[0]
    found = T.retrieve([*splits.train, target], [target.english])
    assert T.bleu_chrf(found, [target.simplified])["bleu"] == pytest.approx(100.0)
    traditional = T.retrieve([*splits.train, target], [target.english], script="traditional")
    assert traditional == [target.traditional]


def test_gloss_translates_word_by_word():
    pair = S.SentencePair("x", "Teacher, good.", "老师，好。", "老師，好。", ("老师", "，", "好", "。"),
                          1, "t")
    other = S.SentencePair("y", "Good.", "好。", "好。", ("好", "。"), 1, "t")
    assert T.gloss([pair, other], [pair.english]) == [pair.simplified]
    assert T.gloss([pair, other], [pair.english], script="traditional") == [pair.traditional]


def test_bleu_uses_characters_and_refuses_mismatched_lists():
    assert T.bleu_chrf(["我是老师。"], ["我是老师。"])["bleu"] == pytest.approx(100.0)
    assert T.bleu_chrf(["你好"], ["我是老师。"])["bleu"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="one hypothesis per reference"):
        T.bleu_chrf(["a"], ["b", "c"])


def test_data_tokenises_as_the_recipe_says(splits):
    pairs = splits.train[:50]
    chars = T.translation_data(pairs, {"target": "chars"})
    words = T.translation_data(pairs, {"target": "words"})
    p = pairs[0]
    # (n, n_tgt): <bos> + tokens, and tokens + <eos>, in the recipe's unit
    assert chars.tgt_vocab.decode(chars.tgt_in[0].tolist()) == list(p.simplified)
    assert words.tgt_vocab.decode(words.tgt_out[0].tolist()) == list(p.words)
    shifted = chars.tgt_out[:, :-1]  # y + <eos>, less its last column: y shifted (teacher forcing)
    assert torch.equal(chars.tgt_in[:, 1:], shifted.masked_fill(shifted == chars.tgt_vocab.eos_id,
                                                                S.PAD_ID))


def test_tiny_training_is_seeded_budgeted_and_decodes(splits):
    pairs = splits.train[:200]
    first = T.train_translator(pairs, TINY, seed=3, progress=False)
    again = T.train_translator(pairs, TINY, seed=3, progress=False)
    assert first.losses == again.losses and first.epochs_done == 2 and not first.stopped
    assert first.averaged is not None  # two epochs kept, averaged
    out = T.translate(first, [p.english for p in splits.test[:5]], beam=2)
    assert len(out) == 5 and all(isinstance(o, str) for o in out)
    stopped = T.train_translator(pairs, {**TINY, "epochs": 50}, max_cpu_s=0.05,
                                 refuse_projected=True, progress=False)
    assert "over budget" in stopped.stopped and stopped.epochs_done < 50
    # the pace rule: 20 steps that took s seconds project 200 steps to 10 s
    assert T._over_budget(1.0, 5.0, True, 20, 200).startswith("projected over budget")
    assert T._over_budget(1.0, 5.0, False, 20, 200) == ""
    assert T._over_budget(6.0, 5.0, False, 120, 200).startswith("over budget")


def test_tied_embeddings_share_one_matrix(splits):
    data = T.translation_data(splits.train[:50], {})
    model = T.build_translator(data, {**TINY, "tie_embeddings": True})
    assert model.output.weight is model.tgt_embed.embedding.weight


def test_a_nan_loss_stops_training_with_finite_weights(splits, monkeypatch):
    real = T._loss
    calls = []

    def poisoned(*args):
        calls.append(1)
        loss = real(*args)
        return loss * float("nan") if len(calls) == 3 else loss

    monkeypatch.setattr(T, "_loss", poisoned)
    with pytest.raises(FloatingPointError, match="step 3"):
        T.train_translator(splits.train[:200], TINY, progress=False)


def test_tagger_and_classifier_train_and_predict(splits):
    model, vocab = L.train_segmenter(splits.train[:100], epochs=1, progress=False)
    words = L.segment(model, vocab, splits.test[:4])
    assert ["".join(w) for w in words] == [p.simplified for p in splits.test[:4]]
    model, vocab = L.train_level_model(splits.train[:100], epochs=1, progress=False)
    assert set(L.predict_levels(model, vocab, splits.test[:20])) <= set(range(1, 7))


def test_validators_name_the_argument():
    with pytest.raises(TypeError, match="train must be a non-empty list of SentencePair"):
        T.train_translator([], TINY)
    with pytest.raises(TypeError, match="english must be a list of English sentences"):
        T.retrieve(S.split_sentences().train[:5], "a sentence")
