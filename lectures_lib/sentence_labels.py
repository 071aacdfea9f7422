r"""Two of the lecture's three kinds of output on real sentences (section 08), each beside its
baselines; the third (the model decides the length: translation) is :mod:`lectures_lib.
real_sentences`.

* **Each vector a label** (每個向量都有一個標籤, as in tagging): Chinese word segmentation (斷詞)
  as one B/M/E/S tag per character (:func:`~lectures_lib.data.sentences.bmes_tags`), with the
  course's :class:`~lectures_lib.models.EncoderTagger`: :func:`train_segmenter`,
  :func:`segment`. Baseline: forward maximum matching with the training split's words
  (:func:`~lectures_lib.data.sentences.max_match`).
* **The whole sequence one label** (整個序列一個標籤, as in sentiment analysis): the sentence's
  HSK level 1-6, an ``EncoderTagger`` whose per-character logits are averaged over the real
  characters (a linear classifier on the mean-pooled encoder output): :func:`train_level_model`,
  :func:`predict_levels`. Baselines (:func:`level_baselines`): the majority class, the length
  alone, a bag of characters (logistic regression).

Every model trains with :func:`~lectures_lib.training.fit` (seeded, a progress bar, a NaN loss
stops it with the last good weights).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import torch

from .data import sentences as S
from .models import EncoderTagger
from .real_sentences import check_pairs
from .utils import check_positive_int, check_seed

__all__ = ["IGNORE", "char_tensors", "train_segmenter", "segment", "train_level_model",
           "predict_levels", "level_baselines"]

IGNORE = -100  # the target of a padding position: counted neither in the loss nor the metric
N_LEVELS = 6


def _check_model(model: object, vocab: object) -> None:
    if not isinstance(model, EncoderTagger):
        raise TypeError(f"model must be an EncoderTagger (from train_segmenter or "
                        f"train_level_model), got {type(model).__name__}")
    _check_vocab(vocab)


def _check_vocab(vocab: object) -> None:
    if not isinstance(vocab, S.SentenceVocab):
        raise TypeError(f"vocab must be a SentenceVocab (the characters' vocabulary), got "
                        f"{type(vocab).__name__}")


def char_tensors(pairs: Sequence[S.SentencePair], vocab: S.SentenceVocab) -> torch.Tensor:
    """``(n, max_len)`` character ids of the pairs' Simplified Chinese, ``<pad>`` after."""
    _check_vocab(vocab)
    return S.pad_batch([vocab.encode(S.chinese_characters(p.simplified)) or [vocab.unk_id]
                        for p in check_pairs(pairs)])


def _character_vocab(train: Sequence[S.SentencePair]) -> S.SentenceVocab:
    return S.build_vocab(S.chinese_characters(p.simplified) for p in train)


def _tag_tensors(pairs, vocab):
    """``(chars, targets)``, both ``(n, max_len)``: targets are tag ids, IGNORE on padding."""
    chars = char_tensors(pairs, vocab)
    targets = torch.full_like(chars, IGNORE)  # (n, max_len)
    for i, p in enumerate(pairs):
        tags = [S.TAGS.index(t) for t in S.bmes_tags(p.words)]
        targets[i, : len(tags)] = torch.tensor(tags)
    return chars, targets


def train_segmenter(train: Sequence[S.SentencePair], *, seed: int = 0, epochs: int = 20,
                    progress: bool = True):
    """``(model, vocab)``: an ``EncoderTagger`` (d_model 64, 2 layers) trained to tag every
    character of ``train`` B, M, E or S."""
    from .training import fit

    train, seed = check_pairs(train, "train"), check_seed(seed)
    epochs = check_positive_int(epochs, "epochs")
    vocab = _character_vocab(train)
    torch.manual_seed(seed)
    model = EncoderTagger(len(vocab), len(S.TAGS), d_model=64, num_heads=4, num_layers=2,
                          d_ff=128, dropout=0.1)
    fit(model, _tag_tensors(train, vocab), epochs=epochs, batch_size=64, lr=3e-3, seed=seed,
        ignore_index=IGNORE, desc="segmentation tagger", progress=progress)
    return model.eval(), vocab


def segment(model: EncoderTagger, vocab: S.SentenceVocab,
            pairs: Sequence[S.SentencePair]) -> list[list[str]]:
    """Each pair's Simplified Chinese cut into words by the tagger's most likely tags."""
    _check_model(model, vocab)
    pairs = check_pairs(pairs)
    chars = char_tensors(pairs, vocab)  # (n, max_len)
    with torch.no_grad():
        predicted = model.eval()(chars).argmax(-1)  # (n, max_len) tag ids
    words = []
    for p, row in zip(pairs, predicted):
        characters = S.chinese_characters(p.simplified)
        tags = [S.TAGS[int(t)] for t in row[: len(characters)]]
        words.append(S.words_from_tags(characters, tags))
    return words


def _pooled(pad_id: int):
    def forward(model, batch):  # the mean over the real characters of the per-character logits
        chars, levels = batch
        logits = model(chars)  # (batch, seq, 6)
        real = (chars != pad_id).unsqueeze(-1).float()  # (batch, seq, 1)
        return (logits * real).sum(1) / real.sum(1), levels  # (batch, 6), (batch,)
    return forward


def train_level_model(train: Sequence[S.SentencePair], *, seed: int = 0, epochs: int = 20,
                      progress: bool = True):
    """``(model, vocab)``: an ``EncoderTagger`` with 6 outputs, mean-pooled, trained to give
    each sentence of ``train`` its HSK level (classes 0-5 = levels 1-6)."""
    from .training import fit

    train, seed = check_pairs(train, "train"), check_seed(seed)
    epochs = check_positive_int(epochs, "epochs")
    vocab = _character_vocab(train)
    torch.manual_seed(seed)
    model = EncoderTagger(len(vocab), N_LEVELS, d_model=64, num_heads=4, num_layers=2, d_ff=128,
                          dropout=0.1)
    levels = torch.tensor([p.level - 1 for p in train])  # (n,) levels 1..6 -> classes 0..5
    fit(model, (char_tensors(train, vocab), levels), epochs=epochs, batch_size=64, lr=1e-3,
        seed=seed, forward_fn=_pooled(vocab.pad_id), desc="HSK level classifier",
        weight_decay=0.01, progress=progress)
    return model.eval(), vocab


def predict_levels(model: EncoderTagger, vocab: S.SentenceVocab,
                   pairs: Sequence[S.SentencePair]) -> list[int]:
    """The most likely HSK level (1-6) of each pair."""
    _check_model(model, vocab)
    pairs = check_pairs(pairs)
    chars = char_tensors(pairs, vocab)
    with torch.no_grad():
        logits, _ = _pooled(vocab.pad_id)(model.eval(), (chars, None))  # (n, 6)
    return [int(c) + 1 for c in logits.argmax(-1)]


def level_baselines(splits: S.SentenceSplits) -> dict:
    """Test accuracy of the majority class, the length alone and a bag of characters (logistic
    regression, its C chosen on the validation split)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

    if not isinstance(splits, S.SentenceSplits):
        raise TypeError(f"splits must be SentenceSplits (split_sentences()), got "
                        f"{type(splits).__name__}")
    y_train = [p.level for p in splits.train]
    y_test = [p.level for p in splits.test]
    majority = Counter(y_train).most_common(1)[0][0]
    out = {"majority": {"accuracy": sum(y == majority for y in y_test) / len(y_test),
                        "class": majority}}
    length = LogisticRegression(max_iter=2000).fit(
        [[len(p.simplified)] for p in splits.train], y_train)
    out["length"] = {"accuracy": length.score([[len(p.simplified)] for p in splits.test], y_test)}
    bag = CountVectorizer(analyzer=S.chinese_characters)
    x_train = bag.fit_transform([p.simplified for p in splits.train])
    best = None
    for c in (0.1, 0.3, 1.0, 3.0, 10.0):  # C chosen on the validation split
        model = LogisticRegression(C=c, max_iter=3000).fit(x_train, y_train)
        score = model.score(bag.transform([p.simplified for p in splits.valid]),
                            [p.level for p in splits.valid])
        if best is None or score > best[0]:
            best = (score, c, model)
    out["bag-of-characters"] = {
        "accuracy": best[2].score(bag.transform([p.simplified for p in splits.test]), y_test),
        "C": best[1], "valid_accuracy": best[0]}
    return out
