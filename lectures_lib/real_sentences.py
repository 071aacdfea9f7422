r"""English -> Chinese on real sentences (section 08): the model decides the length (由模型決定
輸出長度, the lecture's third kind of output), with the course's :class:`~lectures_lib.models.
Transformer`, beside the two baselines a translation must beat.

A **recipe** (配方) is plain data, a dict of bounded choices (:data:`RECIPE_DEFAULTS`,
:func:`check_recipe`): the tokenisation of the target (one token per Chinese character 字, or the
data's words 詞), the model's size, the training (AdamW, warm-up then cosine decay, label
smoothing 標籤平滑, dropout, the average of the last epochs' weights) and the decoding (greedy,
or beam search 束搜索 with a length penalty). The benchmark's search (``benchmarks/
real_sentences.py``) and the graded homework (:mod:`lectures_lib.checks.translation`) train the
same recipes with the same code:

* :func:`translation_data` -> :class:`TranslationData` (ids, vocabularies) from sentence pairs;
* :func:`train_translator` -> :class:`TrainedTranslator` (one thread, seeded, a progress bar, a
  CPU budget; a NaN loss stops it with the last good weights, as :func:`~lectures_lib.training.
  fit` does);
* :func:`translate` (greedy or beam search, :mod:`lectures_lib.decoding`);
* :func:`bleu_chrf`: BLEU (sacrebleu, its Chinese tokenizer ``zh``: one token per character)
  and chrF (character n-grams), corpus-level, 0-100;
* the baselines: :func:`retrieve` (the Chinese of the training sentence whose English is nearest,
  TF-IDF) and :func:`gloss` (word by word, each English word replaced by the Chinese word it
  co-occurs with most, Dice coefficient).

The tagger (每個向量一個標籤: word segmentation as B/M/E/S tags) and the classifier (整個序列一個
標籤: the HSK level) of the same section are in :mod:`lectures_lib.sentence_labels`.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from .data import sentences as S
from .decoding import beam_search, greedy_decode
from .models import Transformer

__all__ = [
    "RECIPE_DEFAULTS",
    "RECIPE_CHOICES",
    "MAX_OUTPUT_LEN",
    "check_recipe",
    "check_pairs",
    "TranslationData",
    "translation_data",
    "gloss_pairs",
    "build_translator",
    "TrainedTranslator",
    "train_translator",
    "translate",
    "bleu_chrf",
    "retrieve",
    "gloss",
]

# ---------------------------------------------------------------------------------------------
# The recipe: plain data, every field bounded
# ---------------------------------------------------------------------------------------------

RECIPE_DEFAULTS = dict(
    target="chars",  # "chars": one token per Chinese character (字); "words": the data's words (詞)
    script="simplified",  # the Chinese written in "simplified" or "traditional" characters
    src_min_count=1,  # English words seen fewer times in training become <unk>
    augment_glosses=False,  # add (English gloss, Chinese word) pairs of the training words
    d_model=128, heads=4, layers=2, d_ff=256, dropout=0.1, norm_first=False,
    tie_embeddings=False,  # the decoder's output layer shares the target embedding's matrix
    label_smoothing=0.0, lr=1e-3, warmup=0.1, batch_size=64, epochs=30, weight_decay=0.0,
    average_last=5,  # keep the last epochs' weights; "weights": "average" decodes their mean
    weights="last",  # decode with the "last" weights or the "average" of the last epochs'
    beam=4, length_penalty=1.0,  # beam width (1 = greedy) and length penalty of beam search
)
# (type, allowed): a tuple of values, or (low, high) inclusive for numbers. Wide enough for every
# recipe worth trying here, narrow enough that no recipe can make the trainer allocate gigabytes.
RECIPE_CHOICES = dict(
    target=(str, ("chars", "words")), script=(str, ("simplified", "traditional")),
    src_min_count=(int, (1, 5)), augment_glosses=(bool, (False, True)),
    d_model=(int, (16, 512)), heads=(int, (1, 16)), layers=(int, (1, 6)), d_ff=(int, (16, 2048)),
    dropout=(float, (0.0, 0.6)), norm_first=(bool, (False, True)),
    tie_embeddings=(bool, (False, True)), label_smoothing=(float, (0.0, 0.5)),
    lr=(float, (1e-5, 1e-2)), warmup=(float, (0.0, 0.5)), batch_size=(int, (4, 512)),
    epochs=(int, (1, 200)), weight_decay=(float, (0.0, 0.5)), average_last=(int, (0, 20)),
    weights=(str, ("last", "average")), beam=(int, (1, 16)), length_penalty=(float, (0.0, 3.0)),
)
MAX_OUTPUT_LEN = 40  # tokens a translation may have (the longest test sentence has 31 characters)


def check_recipe(recipe: object, name: str = "recipe") -> dict:
    """``recipe`` completed with :data:`RECIPE_DEFAULTS`, after checking it is a dict of known
    fields, each of its type and within :data:`RECIPE_CHOICES`; a ``TypeError`` or
    ``ValueError`` names the field, what it may be and what it is."""
    if not isinstance(recipe, dict):
        raise TypeError(f"{name} must be a dict of recipe fields, got {type(recipe).__name__}")
    unknown = sorted(map(str, set(recipe) - set(RECIPE_CHOICES)))
    if unknown:
        raise ValueError(f"{name} has unknown fields {unknown}; the fields are "
                         f"{sorted(RECIPE_CHOICES)}")
    full = {**RECIPE_DEFAULTS, **recipe}
    for field, (kind, allowed) in RECIPE_CHOICES.items():
        value = full[field]
        if kind is float and type(value) is int:
            value = full[field] = float(value)  # 1 for 1.0 is fine
        if type(value) is not kind:
            raise TypeError(f"{name}[{field!r}] must be a {kind.__name__}, got "
                            f"{type(value).__name__} ({value!r:.40})")
        if kind in (str, bool) and value not in allowed:
            raise ValueError(f"{name}[{field!r}] must be one of {allowed}, got {value!r:.40}")
        if kind in (int, float) and not (allowed[0] <= value <= allowed[1]
                                          and math.isfinite(value)):
            raise ValueError(f"{name}[{field!r}] must be in [{allowed[0]}, {allowed[1]}], got "
                             f"{value!r}")
    if full["d_model"] % full["heads"]:
        raise ValueError(f"{name}['d_model'] ({full['d_model']}) must be divisible by "
                         f"{name}['heads'] ({full['heads']}): each head gets d_model / heads")
    return full


def check_pairs(pairs: object, name: str = "pairs") -> list[S.SentencePair]:
    """A non-empty list of :class:`~lectures_lib.data.sentences.SentencePair`."""
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence) or not pairs:
        raise TypeError(f"{name} must be a non-empty list of SentencePair (from "
                        f"load_sentences), got {type(pairs).__name__}")
    if not all(isinstance(p, S.SentencePair) for p in pairs):
        raise TypeError(f"{name} must hold SentencePair records only (from load_sentences)")
    return list(pairs)


def _check_english(english: object, name: str = "english") -> list[str]:
    if isinstance(english, str) or not isinstance(english, Sequence) or not all(
            isinstance(e, str) for e in english):
        raise TypeError(f"{name} must be a list of English sentences (str), got "
                        f"{type(english).__name__}")
    return list(english)


# ---------------------------------------------------------------------------------------------
# Data: sentences -> ids
# ---------------------------------------------------------------------------------------------


class TranslationData(NamedTuple):
    """Ids of the training pairs, padded with ``<pad>`` (0): ``src (n, n_src)`` English words,
    ``tgt_in = <bos> + y`` and ``tgt_out = y + <eos>`` ``(n, n_tgt)``; and the vocabularies."""

    src: torch.Tensor
    tgt_in: torch.Tensor
    tgt_out: torch.Tensor
    src_vocab: S.SentenceVocab
    tgt_vocab: S.SentenceVocab


def target_tokens(pair: S.SentencePair, target: str, script: str) -> list[str]:
    """The Chinese side as tokens: the data's words (詞) or one token per character (字)."""
    if target == "words":
        return list(pair.words_in(script))
    return S.chinese_characters(pair.chinese(script))


def gloss_pairs(train: Sequence[S.SentencePair], script: str = "simplified"):
    """(English, [Chinese word]) pairs from the data's dictionary glosses of the training
    sentences' words: the first sense, brackets removed (``"teacher"`` -> ``["老师"]``)."""
    train = check_pairs(train, "train")
    ids = {p.id for p in train}
    written = {w: t for p in train for w, t in zip(p.words, p.words_in(script))}
    seen, out = set(), []
    for record in json.loads(S._checked_bytes(S._data_path())):  # the raw records: glosses
        if record["id"] not in ids:
            continue
        for token in record["tokens"]:
            sense = token.get("gloss_en", "").split(";")[0].split("(")[0].strip()
            word = written.get(token["word"], token["word"])  # in the recipe's script
            if sense and len(sense.split()) <= 4 and (sense, word) not in seen:
                seen.add((sense, word))
                out.append((sense, [word]))
    return out


def translation_data(train: Sequence[S.SentencePair], recipe: dict) -> TranslationData:
    """The training pairs as ids, tokenised as ``recipe`` says (``target``, ``script``,
    ``src_min_count``, ``augment_glosses``)."""
    train, recipe = check_pairs(train, "train"), check_recipe(recipe)
    pairs = [(p.english, target_tokens(p, recipe["target"], recipe["script"])) for p in train]
    if recipe["augment_glosses"]:
        pairs += [(english, word if recipe["target"] == "words" else list("".join(word)))
                  for english, word in gloss_pairs(train, recipe["script"])]
    counts = Counter(w for english, _ in pairs for w in S.english_words(english))
    src_vocab = S.SentenceVocab(w for w, n in counts.most_common()
                                if n >= recipe["src_min_count"])
    tgt_vocab = S.build_vocab(tokens for _, tokens in pairs)
    src = S.pad_batch([src_vocab.encode(S.english_words(e)) for e, _ in pairs])  # (n, n_src)
    targets = [tgt_vocab.encode(t) for _, t in pairs]
    tgt_in = S.pad_batch([[tgt_vocab.bos_id, *t] for t in targets])  # (n, n_tgt): BEGIN + y
    tgt_out = S.pad_batch([[*t, tgt_vocab.eos_id] for t in targets])  # (n, n_tgt): y + END
    return TranslationData(src, tgt_in, tgt_out, src_vocab, tgt_vocab)


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------


def build_translator(data: TranslationData, recipe: dict) -> Transformer:
    """The course's ``Transformer`` of the recipe's size (call after seeding)."""
    if not isinstance(data, TranslationData):
        raise TypeError(f"data must be a TranslationData (from translation_data), got "
                        f"{type(data).__name__}")
    recipe = check_recipe(recipe)
    model = Transformer(len(data.src_vocab), len(data.tgt_vocab), d_model=recipe["d_model"],
                        num_heads=recipe["heads"], num_encoder_layers=recipe["layers"],
                        num_decoder_layers=recipe["layers"], d_ff=recipe["d_ff"],
                        dropout=recipe["dropout"], norm_first=recipe["norm_first"])
    if recipe["tie_embeddings"]:  # one (tgt_vocab, d_model) matrix reads and writes tokens
        model.output.weight = model.tgt_embed.embedding.weight
    return model


class TrainedTranslator(NamedTuple):
    """What :func:`train_translator` returns. ``model``: the last weights; ``averaged``: the
    mean of the last ``average_last`` epochs' weights (None if fewer than 2 were kept);
    ``stopped``: '' when every epoch ran, else why training stopped early."""

    model: Transformer
    averaged: Transformer | None
    data: TranslationData
    recipe: dict
    cpu_s: float
    epochs_done: int
    stopped: str
    losses: list[float]

    def decoder(self) -> Transformer:
        """The weights the recipe decodes with (``recipe["weights"]``)."""
        wanted = self.averaged if self.recipe["weights"] == "average" else None
        return wanted or self.model


def length_batches(tgt: torch.Tensor, batch: int, generator: torch.Generator):
    """Row indices of every batch of one epoch, in a random order; a batch's rows have similar
    lengths (shuffled, then sorted by length within windows of 20 batches): little padding."""
    order = torch.randperm(len(tgt), generator=generator)
    lengths = (tgt != S.PAD_ID).sum(1)  # (n,) real tokens per row
    batches = []
    for window in order.split(batch * 20):
        window = window[lengths[window].argsort(stable=True)]  # short to long
        batches += list(window.split(batch))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]


def trim(ids: torch.Tensor) -> torch.Tensor:
    """``ids`` ``(batch, n)`` without the columns that are padding in every row."""
    return ids[:, : int((ids != S.PAD_ID).sum(1).max())]


def _loss(model, data: TranslationData, rows: torch.Tensor, smoothing: float) -> torch.Tensor:
    """Cross-entropy (交叉熵) of one batch, teacher forcing: the decoder reads ``<bos> + y``
    and predicts ``y + <eos>``; padding counts nowhere."""
    source, target_in = trim(data.src[rows]), trim(data.tgt_in[rows])
    target_out = data.tgt_out[rows][:, : target_in.shape[1]]  # (batch, n_tgt): same width
    logits = model(source, target_in)  # (batch, n_tgt, vocab)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]),  # (batch * n_tgt, vocab)
                           target_out.reshape(-1), ignore_index=S.PAD_ID,  # (batch * n_tgt,)
                           label_smoothing=smoothing)


def _average(model: Transformer, snapshots: list[dict]) -> Transformer | None:
    """A copy of ``model`` holding the mean of ``snapshots`` (checkpoint averaging)."""
    if len(snapshots) < 2:
        return None
    averaged = copy.deepcopy(model)
    averaged.load_state_dict({k: sum(s[k] for s in snapshots) / len(snapshots)
                              for k in snapshots[0]})
    return averaged


def train_translator(train: Sequence[S.SentencePair], recipe: dict, seed: int = 0, *,
                     max_cpu_s: float | None = None, refuse_projected: bool = False,
                     progress: bool = True) -> TrainedTranslator:
    """Train the recipe's ``Transformer`` on ``train``: AdamW, the course's warm-up + cosine
    :func:`~lectures_lib.training.lr_schedule`, gradients clipped to norm 1, length-bucketed
    batches. Seeded (``seed``; the caller's random state is kept), one thread while it runs.

    ``max_cpu_s``: stop at the step that passes this many CPU seconds (``stopped`` says so);
    with ``refuse_projected``, stop already after 20 steps when their pace says the steps
    asked for would take more than that (the grader's budget: no time spent on a recipe that
    cannot fit).
    A loss that is not finite raises ``FloatingPointError`` naming the epoch and step, before
    the update: the model keeps its last good weights.
    """
    from .utils import check_seed

    train, recipe, seed = check_pairs(train, "train"), check_recipe(recipe), check_seed(seed)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: one thread is fastest and deterministic
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return _train(translation_data(train, recipe), recipe, seed, max_cpu_s,
                          refuse_projected, progress)
    finally:
        torch.set_num_threads(threads)


def _over_budget(spent: float, max_cpu_s: float | None, refuse_projected: bool, done: int,
                 steps: int) -> str:
    """Why training stops now ('' = it goes on): past the budget, or, with
    ``refuse_projected``, after 20 steps whose pace says the whole run would not fit."""
    if max_cpu_s is None or done == steps:
        return ""
    if spent > max_cpu_s:
        return f"over budget: {spent:.1f} CPU s after {done} of {steps} steps"
    projected = spent / done * steps
    if refuse_projected and done == min(20, steps) and projected > max_cpu_s:
        return (f"projected over budget: the first {done} steps took {spent:.1f} CPU s, so "
                f"{steps} steps would take about {projected:.0f} s, more than the budget of "
                f"{max_cpu_s:.0f} s")
    return ""


def _train(data, recipe, seed, max_cpu_s, refuse_projected, progress) -> TrainedTranslator:
    from .training import lr_schedule

    model = build_translator(data, recipe)
    steps = recipe["epochs"] * math.ceil(len(data.src) / recipe["batch_size"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"],
                                  weight_decay=recipe["weight_decay"])
    scheduler = lr_schedule(optimizer, steps, "warmup_cosine", recipe["warmup"])
    generator = torch.Generator().manual_seed(seed)
    snapshots, losses, stopped, start = [], [], "", time.process_time()
    bar = tqdm(range(recipe["epochs"]), desc="training the translator", disable=not progress,
               mininterval=1)
    for epoch in bar:
        model.train()
        batches = length_batches(data.tgt_in, recipe["batch_size"], generator)
        total = 0.0
        for step, rows in enumerate(batches):
            loss = _loss(model, data, rows, recipe["label_smoothing"])
            if not torch.isfinite(loss):  # stop before the update: keep the last good weights
                raise FloatingPointError(
                    f"the loss is {loss.item()} at epoch {epoch + 1}, step {step + 1} of "
                    f"{len(batches)}: training stopped, the model keeps its last finite "
                    "weights (try a smaller lr or a longer warmup)")
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
            total += loss.item()
            stopped = _over_budget(time.process_time() - start, max_cpu_s, refuse_projected,
                                   epoch * len(batches) + step + 1, steps)
            if stopped:
                break
        if stopped:
            break
        losses.append(total / len(batches))
        bar.set_postfix(loss=f"{losses[-1]:.3f}")
        if epoch >= recipe["epochs"] - recipe["average_last"]:
            snapshots.append(copy.deepcopy(model.state_dict()))
    model.eval()
    averaged = _average(model, snapshots)
    if averaged is not None:
        averaged.eval()
    return TrainedTranslator(model, averaged, data, recipe, time.process_time() - start,
                             len(losses), stopped, losses)


# ---------------------------------------------------------------------------------------------
# Decoding and scores
# ---------------------------------------------------------------------------------------------


def translate(trained: TrainedTranslator, english: Sequence[str], *, beam: int | None = None,
              length_penalty: float | None = None, model: Transformer | None = None,
              progress: bool = False) -> list[str]:
    """Chinese for each English sentence: greedy decoding when ``beam`` is 1, else beam search
    with ``length_penalty`` (default: the recipe's), 100 sentences at a time, ``<unk>``
    dropped. ``model``: other weights than the recipe's (e.g. ``trained.averaged``)."""
    if not isinstance(trained, TrainedTranslator):
        raise TypeError(f"trained must be a TrainedTranslator (from train_translator), got "
                        f"{type(trained).__name__}")
    if model is not None and not isinstance(model, Transformer):
        raise TypeError(f"model must be a Transformer or None, got {type(model).__name__}")
    english = _check_english(english)
    recipe = check_recipe({**trained.recipe, **({} if beam is None else {"beam": beam}),
                           **({} if length_penalty is None else
                              {"length_penalty": length_penalty})})
    net = model or trained.decoder()
    vocab_in, vocab_out = trained.data.src_vocab, trained.data.tgt_vocab
    ids = (vocab_out.bos_id, vocab_out.eos_id, vocab_out.pad_id)
    out: list[str] = []
    chunks = range(0, len(english), 100)
    with torch.no_grad():
        for start in tqdm(chunks, desc="translating", disable=not progress, mininterval=1):
            chunk = english[start : start + 100]
            src = S.pad_batch([vocab_in.encode(S.english_words(e)) or [vocab_in.unk_id]
                               for e in chunk])  # (chunk, n_src)
            if recipe["beam"] == 1:
                tokens = greedy_decode(net, src, MAX_OUTPUT_LEN, *ids)  # (chunk, <= max_len)
            else:
                tokens = beam_search(net, src, recipe["beam"], MAX_OUTPUT_LEN, *ids,
                                     length_penalty=recipe["length_penalty"])
            out += ["".join(t for t in vocab_out.decode(row) if t != S.UNK) for row in tokens]
    return out


def bleu_chrf(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """Corpus BLEU (sacrebleu, ``tokenize="zh"``: each Chinese character a token) and chrF,
    both 0-100, rounded to 2 decimals: ``{"bleu": .., "chrf": ..}``."""
    import sacrebleu

    hypotheses, references = _check_english(hypotheses, "hypotheses"), _check_english(
        references, "references")
    if len(hypotheses) != len(references) or not references:
        raise ValueError(f"one hypothesis per reference: {len(hypotheses)} hypotheses, "
                         f"{len(references)} references")
    bleu = sacrebleu.corpus_bleu(hypotheses, [references], tokenize="zh")
    chrf = sacrebleu.corpus_chrf(hypotheses, [references])
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------


def _ngrams(words: list[str], low: int, high: int) -> list[str]:
    return [" ".join(words[i : i + n]) for n in range(low, high + 1)
            for i in range(len(words) - n + 1)]


def retrieve(train: Sequence[S.SentencePair], english: Sequence[str], *, bigrams: bool = True,
             script: str = "simplified") -> list[str]:
    """For each English sentence, the Chinese of the training pair whose English is nearest:
    cosine of TF-IDF vectors of words (and word pairs, with ``bigrams``)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    train, english = check_pairs(train, "train"), _check_english(english)
    high = 2 if bigrams else 1
    vectorizer = TfidfVectorizer(analyzer=lambda s: _ngrams(S.english_words(s), 1, high))
    known = vectorizer.fit_transform([p.english for p in train])  # (n_train, features)
    nearest = (vectorizer.transform(english) @ known.T).toarray().argmax(1)  # (n,)
    return [train[i].chinese(script) for i in nearest]


_MARKS = {".": "。", "?": "？", "!": "！", ",": "，"}


def gloss(train: Sequence[S.SentencePair], english: Sequence[str], *,
          script: str = "simplified") -> list[str]:
    """Word by word: each English word becomes the Chinese word with the highest Dice
    coefficient ``2 n(e, c) / (n(e) + n(c))`` over the training pairs (unseen words dropped);
    each final mark is translated mark for mark."""
    train, english = check_pairs(train, "train"), _check_english(english)
    n_english, n_chinese, n_both = Counter(), Counter(), Counter()
    for p in train:  # words only: punctuation is translated mark by mark below
        e = {w for w in S.english_words(p.english) if w[0].isalnum()}
        c = {w for w in p.words_in(script) if w[0].isalnum()}
        n_english.update(e)
        n_chinese.update(c)
        n_both.update((x, y) for x in e for y in c)
    best: dict[str, tuple[float, str]] = {}
    for (e, c), n in sorted(n_both.items()):  # sorted: ties go to the same word on every run
        dice = 2 * n / (n_english[e] + n_chinese[c])
        if dice > best.get(e, (0.0, ""))[0]:
            best[e] = (dice, c)
    return ["".join(_MARKS[w] if w in _MARKS else best.get(w, (0.0, ""))[1]
                    for w in S.english_words(sentence)) for sentence in english]
