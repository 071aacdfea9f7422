"""The three kinds of output of the lecture on real sentences (section 08), each model beside its
baselines, several seeds: the stored runs that notebook 08 and its homework are built on.

Data: :mod:`lectures_lib.data.sentences` (``hsk-sentences-audio`` 1.0.0, checked by SHA-256),
the course's fixed split (``--split-seed``, default 0: 400 test, 400 validation, the rest for
training). Tasks (``--tasks``):

* ``segmentation`` (each token a label): one B/M/E/S tag per Chinese character, with the course's
  :class:`~lectures_lib.models.EncoderTagger`, against forward maximum matching with the training
  split's words. Metric: word F1 on the test split.
* ``level`` (the whole sequence a label): the sentence's HSK level (1-6) from its characters, with
  an ``EncoderTagger`` whose per-character logits are averaged over the sentence (= a linear
  classifier on the mean-pooled encoder output), against the majority class, the length alone
  and a bag of characters (logistic regression). Metric: accuracy on the test split.
* ``translation`` (the model decides the length): English -> Simplified Chinese with the course's
  :class:`~lectures_lib.models.Transformer` and :func:`~lectures_lib.decoding.beam_search`,
  against retrieving the nearest training sentence (TF-IDF on the English side, its Chinese
  returned) and a word-by-word gloss (each English word replaced by the Chinese word it co-occurs
  with most in the training pairs, by the Dice coefficient). Metrics: BLEU with sacrebleu's
  ``zh`` tokenizer (one token per Chinese character) and chrF, on the validation and the test
  split. Every recipe of ``RECIPES`` is a point of the search; each trained model is decoded
  several ways (greedy, beams, length penalties, the last weights and the average of the last
  epochs' weights), all stored. The recipe is chosen on the validation split; the test split
  only reports.

Every model run: one thread, seeded (``--seeds``), CPU time of training measured, a progress
bar; a run stops at its recipe's ``max_cpu_s`` (recorded as ``stopped_early``). Results go to
``--json`` (default ``benchmarks/real_sentences.json``) after every run; a run already stored
with the same recipe is skipped, so the script resumes and more seeds can be added later
(``--seeds 3 4``). ``--markdown`` prints the README's tables from the JSON.

    nice -n 10 python benchmarks/real_sentences.py --tasks segmentation level
    nice -n 10 python benchmarks/real_sentences.py --tasks translation --recipes plain
    python benchmarks/real_sentences.py --markdown
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import platform
import statistics
import sys
import time
from collections import Counter
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import seed_everything  # noqa: E402
from lectures_lib.data import sentences as S  # noqa: E402
from lectures_lib.decoding import beam_search, greedy_decode  # noqa: E402
from lectures_lib.models import EncoderTagger, Transformer  # noqa: E402
from lectures_lib.training import fit, lr_schedule  # noqa: E402

HERE = Path(__file__).resolve().parent
IGNORE = -100  # target of a padding position: counted neither in the loss nor in the metric

# ---------------------------------------------------------------------------------------------
# Translation recipes: the search. Each is a full description of one training + decoding setup.
# ---------------------------------------------------------------------------------------------

BASE = dict(
    target="chars",  # "chars": one token per Chinese character; "words": the data's words
    src_min_count=1,  # English words seen fewer times in training become <unk>
    d_model=128, heads=4, layers=2, d_ff=256, dropout=0.1, norm_first=False,
    label_smoothing=0.0, lr=1e-3, warmup=0.1, batch_size=64, epochs=30, weight_decay=0.0,
    average_last=5,  # also evaluate the average of the last epochs' weights
    augment_glosses=False,  # add (English gloss, Chinese word) pairs of the training words
    max_cpu_s=360,
)
RECIPES = {
    "plain": dict(BASE),
    "regularised": dict(BASE, dropout=0.3, label_smoothing=0.1, epochs=40),
    "regularised-words": dict(BASE, dropout=0.3, label_smoothing=0.1, epochs=40, target="words"),
    "small-regularised": dict(BASE, d_model=64, d_ff=256, dropout=0.3, label_smoothing=0.1,
                              epochs=60, lr=2e-3),
    "smoothed-fast": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=25),
    "lexicon": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=40, augment_glosses=True),
    "prenorm-regularised": dict(BASE, dropout=0.3, label_smoothing=0.1, epochs=40,
                                norm_first=True, lr=2e-3, weight_decay=0.01),
}
DECODINGS = {  # name: (beam width, length penalty); beam width 1 = greedy
    "greedy": (1, 0.0),
    "beam4": (4, 0.0),
    "beam4-lp1": (4, 1.0),
}
EVALUATED = [  # (weights, decoding): the averaged weights only with the beam (halves the cost)
    ("last", "greedy"), ("last", "beam4"), ("last", "beam4-lp1"), ("average", "beam4-lp1")]


# ---------------------------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------------------------


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def find(results: dict, task: str, method: str, seed: int, recipe: dict | None = None):
    for row in results["rows"]:
        if (row["task"], row["method"], row["seed"]) == (task, method, seed):
            if recipe is None or row.get("recipe") == recipe:
                return row
    return None


def store(path: Path, row: dict, settings: dict) -> None:
    """Add ``row`` (replacing the row of the same task, method and seed), re-reading the file
    first so that rows another process stored meanwhile are kept."""
    results = load(path)
    if results.get("settings", settings) != settings:
        raise SystemExit(f"{path} holds runs of other settings: {results['settings']}")
    results["settings"] = settings
    key = (row["task"], row["method"], row["seed"])
    results["rows"] = [r for r in results["rows"] if (r["task"], r["method"], r["seed"]) != key]
    results["rows"].append(row)
    path.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


def machine() -> dict:
    return {
        "torch": torch.__version__, "python": platform.python_version(),
        "machine": platform.machine(), "cores": os.cpu_count(), "threads": 1,
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


# ---------------------------------------------------------------------------------------------
# (a) Segmentation
# ---------------------------------------------------------------------------------------------


def char_tensors(pairs, vocab):
    """``(chars, lengths)``: ``(n, max_len)`` character ids (``<pad>`` after) and the lengths."""
    rows = [vocab.encode(S.chinese_characters(p.simplified)) for p in pairs]
    return S.pad_batch(rows), torch.tensor([len(r) for r in rows])


def segmentation_model(splits, seed: int, epochs: int = 20) -> dict:
    vocab = S.build_vocab(S.chinese_characters(p.simplified) for p in splits.train)
    tag_id = {t: i for i, t in enumerate(S.TAGS)}

    def tensors(pairs):
        chars, _ = char_tensors(pairs, vocab)
        tags = [[tag_id[t] for t in S.bmes_tags(p.words)] for p in pairs]
        targets = torch.full_like(chars, IGNORE)  # (n, max_len): IGNORE on padding
        for i, row in enumerate(tags):
            targets[i, : len(row)] = torch.tensor(row)
        return chars, targets

    seed_everything(seed)
    model = EncoderTagger(len(vocab), len(S.TAGS), d_model=64, num_heads=4, num_layers=2,
                          d_ff=128, dropout=0.1)
    start = time.process_time()
    fit(model, tensors(splits.train), epochs=epochs, batch_size=64, lr=3e-3, seed=seed,
        ignore_index=IGNORE, desc=f"segmentation seed {seed}")
    cpu = time.process_time() - start
    chars, targets = tensors(splits.test)
    with torch.no_grad():
        model.eval()
        predicted = model(chars).argmax(-1)  # (n, max_len) tag ids
    words = []
    for p, row in zip(splits.test, predicted):
        characters = S.chinese_characters(p.simplified)
        tags = [S.TAGS[int(t)] for t in row[: len(characters)]]
        words.append(S.words_from_tags(characters, tags))
    return {"f1": S.segmentation_f1(words, [p.words for p in splits.test]), "cpu_s": cpu,
            "epochs": epochs, "parameters": sum(p.numel() for p in model.parameters())}


def segmentation_max_match(splits) -> dict:
    lexicon = {w for p in splits.train for w in p.words}
    words = [S.max_match(p.simplified, lexicon) for p in splits.test]
    return {"f1": S.segmentation_f1(words, [p.words for p in splits.test]), "deterministic": True}


def segmentation_single_chars(splits) -> dict:
    words = [list(p.simplified) for p in splits.test]
    return {"f1": S.segmentation_f1(words, [p.words for p in splits.test]), "deterministic": True}


# ---------------------------------------------------------------------------------------------
# (b) HSK level
# ---------------------------------------------------------------------------------------------


def level_model(splits, seed: int, epochs: int = 20) -> dict:
    vocab = S.build_vocab(S.chinese_characters(p.simplified) for p in splits.train)

    def tensors(pairs):
        chars, _ = char_tensors(pairs, vocab)
        return chars, torch.tensor([p.level - 1 for p in pairs])  # levels 1..6 -> classes 0..5

    def pooled(model, batch):  # mean over the real characters of the per-character logits
        chars, levels = batch
        logits = model(chars)  # (batch, seq, 6)
        real = (chars != vocab.pad_id).unsqueeze(-1).float()  # (batch, seq, 1)
        return (logits * real).sum(1) / real.sum(1), levels  # (batch, 6), (batch,)

    seed_everything(seed)
    model = EncoderTagger(len(vocab), 6, d_model=64, num_heads=4, num_layers=2, d_ff=128,
                          dropout=0.1)
    start = time.process_time()
    fit(model, tensors(splits.train), epochs=epochs, batch_size=64, lr=1e-3, seed=seed,
        forward_fn=pooled, desc=f"level seed {seed}", weight_decay=0.01)
    cpu = time.process_time() - start
    with torch.no_grad():
        model.eval()
        logits, levels = pooled(model, tensors(splits.test))
    predicted = logits.argmax(-1)
    return {"accuracy": float((predicted == levels).float().mean()),
            "within_one": float(((predicted - levels).abs() <= 1).float().mean()),
            "cpu_s": cpu, "epochs": epochs}


LEVEL_BASELINES = ("majority", "length", "bag-of-characters")


def level_baselines(splits) -> dict:
    """Majority class, the length alone, and a bag of characters (logistic regression)."""
    from sklearn.feature_extraction.text import CountVectorizer
    from sklearn.linear_model import LogisticRegression

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


# ---------------------------------------------------------------------------------------------
# (c) Translation
# ---------------------------------------------------------------------------------------------


def scores(hypotheses: list[str], pairs) -> dict:
    import sacrebleu

    references = [[p.simplified for p in pairs]]
    bleu = sacrebleu.corpus_bleu(hypotheses, references, tokenize="zh")
    chrf = sacrebleu.corpus_chrf(hypotheses, references)
    return {"bleu": round(bleu.score, 2), "chrf": round(chrf.score, 2)}


def target_tokens(pair, target: str) -> list[str]:
    return list(pair.words) if target == "words" else S.chinese_characters(pair.simplified)


def gloss_pairs(train) -> list[tuple[str, list[str]]]:
    """(English, Chinese word) pairs from the data's glosses of the training words: the first
    sense of each word's dictionary gloss, brackets removed (``"teacher"`` -> ``老师``)."""
    ids = {p.id for p in train}
    seen, out = set(), []
    for record in json.loads(S._checked_bytes(S._data_path())):  # the raw records: glosses
        if record["id"] not in ids:
            continue
        for token in record["tokens"]:
            sense = token.get("gloss_en", "").split(";")[0].split("(")[0].strip()
            if sense and len(sense.split()) <= 4 and (sense, token["word"]) not in seen:
                seen.add((sense, token["word"]))
                out.append((sense, [token["word"]]))
    return out


def translation_data(splits, recipe):
    train_pairs = [(p.english, target_tokens(p, recipe["target"])) for p in splits.train]
    if recipe["augment_glosses"]:
        train_pairs += [(english, word if recipe["target"] == "words" else list("".join(word)))
                        for english, word in gloss_pairs(splits.train)]
    src_counts = Counter(w for english, _ in train_pairs for w in S.english_words(english))
    src_vocab = S.SentenceVocab(w for w, n in src_counts.most_common()
                                if n >= recipe["src_min_count"])
    tgt_vocab = S.build_vocab(tokens for _, tokens in train_pairs)
    src = S.pad_batch([src_vocab.encode(S.english_words(e)) for e, _ in train_pairs])
    targets = [tgt_vocab.encode(t) for _, t in train_pairs]
    tgt_in = S.pad_batch([[tgt_vocab.bos_id, *t] for t in targets])  # BEGIN + y
    tgt_out = S.pad_batch([[*t, tgt_vocab.eos_id] for t in targets])  # y + END
    return (src, tgt_in, tgt_out), src_vocab, tgt_vocab


def translate(model, pairs, src_vocab, tgt_vocab, beam: int, penalty: float) -> list[str]:
    out = []
    for start in range(0, len(pairs), 100):
        chunk = pairs[start : start + 100]
        src = S.pad_batch([src_vocab.encode(S.english_words(p.english)) for p in chunk])
        ids = (tgt_vocab.bos_id, tgt_vocab.eos_id, tgt_vocab.pad_id)
        if beam == 1:
            tokens = greedy_decode(model, src, 40, *ids)
        else:
            tokens = beam_search(model, src, beam, 40, *ids, length_penalty=penalty)
        for row in tokens:
            out.append("".join(t for t in tgt_vocab.decode(row) if t != S.UNK))
    return out


def length_batches(tokens: torch.Tensor, batch: int, generator) -> list[torch.Tensor]:
    """Row indices of every batch of one epoch, in a random order; the rows of a batch have
    similar lengths (shuffled, then sorted by length within windows of 20 batches), so that
    little of a batch is padding."""
    order = torch.randperm(len(tokens), generator=generator)
    lengths = (tokens != 0).sum(1)  # (n,) real tokens per row
    batches = []
    for window in order.split(batch * 20):
        window = window[lengths[window].argsort(stable=True)]  # short to long
        batches += list(window.split(batch))
    return [batches[i] for i in torch.randperm(len(batches), generator=generator)]


def trim(ids: torch.Tensor) -> torch.Tensor:
    """``ids`` without the columns that are padding in every row."""
    return ids[:, : int((ids != 0).sum(1).max())]


def train_transformer(data, src_vocab, tgt_vocab, recipe, seed: int):
    """AdamW + warm-up/cosine (the course's ``lr_schedule``) + label smoothing; returns the model,
    the average of the last ``average_last`` epochs' weights, CPU seconds, epochs done."""
    seed_everything(seed)
    model = Transformer(len(src_vocab), len(tgt_vocab), d_model=recipe["d_model"],
                        num_heads=recipe["heads"], num_encoder_layers=recipe["layers"],
                        num_decoder_layers=recipe["layers"], d_ff=recipe["d_ff"],
                        dropout=recipe["dropout"], norm_first=recipe["norm_first"])
    src, tgt_in, tgt_out = data
    n, batch = len(src), recipe["batch_size"]
    steps = recipe["epochs"] * math.ceil(n / batch)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe["lr"],
                                  weight_decay=recipe["weight_decay"])
    scheduler = lr_schedule(optimizer, steps, "warmup_cosine", recipe["warmup"])
    generator = torch.Generator().manual_seed(seed)
    snapshots, start, stopped = [], time.process_time(), False
    bar = tqdm(range(recipe["epochs"]), desc=f"translation seed {seed}", mininterval=1)
    for epoch in bar:
        model.train()
        for rows in length_batches(tgt_in, batch, generator):
            source, target_in, target_out = trim(src[rows]), trim(tgt_in[rows]), tgt_out[rows]
            target_out = target_out[:, : target_in.shape[1]]  # (batch, n_tgt): same width
            logits = model(source, target_in)  # (batch, n_tgt, vocab)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target_out.reshape(-1),
                                   ignore_index=tgt_vocab.pad_id,
                                   label_smoothing=recipe["label_smoothing"])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            scheduler.step()
        bar.set_postfix(loss=f"{loss.item():.3f}")
        if epoch >= recipe["epochs"] - recipe["average_last"]:
            snapshots.append(copy.deepcopy(model.state_dict()))
        if time.process_time() - start > recipe["max_cpu_s"]:
            stopped = True
            break
    cpu = time.process_time() - start
    averaged = None
    if len(snapshots) > 1:
        averaged = copy.deepcopy(model)
        averaged.load_state_dict({k: sum(s[k] for s in snapshots) / len(snapshots)
                                  for k in snapshots[0]})
    return model, averaged, cpu, epoch + 1, stopped


def translation_model(splits, recipe: dict, seed: int) -> dict:
    data, src_vocab, tgt_vocab = translation_data(splits, recipe)
    model, averaged, cpu, epochs, stopped = train_transformer(data, src_vocab, tgt_vocab, recipe,
                                                              seed)
    evaluations, start = {}, time.process_time()
    nets = {"last": model, "average": averaged}
    runs = [(w, nets[w], name) for w, name in EVALUATED if nets[w] is not None]
    for weights, net, name in tqdm(runs, desc="decoding valid + test", mininterval=1):
        beam, penalty = DECODINGS[name]
        evaluations[f"{weights}/{name}"] = {
            split: scores(translate(net, getattr(splits, split), src_vocab, tgt_vocab, beam,
                                    penalty), getattr(splits, split))
            for split in ("valid", "test")}
    best = max(evaluations, key=lambda k: evaluations[k]["valid"]["bleu"])
    examples = translate(averaged or model, splits.test[:8], src_vocab, tgt_vocab,
                         *DECODINGS[best.split("/")[1]])
    return {"cpu_s": round(cpu, 1), "eval_cpu_s": round(time.process_time() - start, 1),
            "epochs_done": epochs, "stopped_early": stopped, "training_pairs": len(data[0]),
            "src_vocab": len(src_vocab), "tgt_vocab": len(tgt_vocab),
            "parameters": sum(p.numel() for p in model.parameters()),
            "evaluations": evaluations, "chosen_on_valid": best,
            "valid_bleu": evaluations[best]["valid"]["bleu"],
            "test_bleu": evaluations[best]["test"]["bleu"],
            "test_chrf": evaluations[best]["test"]["chrf"],
            "examples": [[p.english, p.simplified, h] for p, h in zip(splits.test[:8], examples)]}


def retrieval(splits, ngrams: tuple[int, int]) -> dict:
    """The Chinese of the training sentence whose English is nearest (TF-IDF cosine)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(analyzer=lambda s: _ngrams(S.english_words(s), ngrams))
    train = vectorizer.fit_transform([p.english for p in splits.train])
    out = {}
    for split in ("valid", "test"):
        pairs = getattr(splits, split)
        nearest = (vectorizer.transform([p.english for p in pairs]) @ train.T).toarray().argmax(1)
        out[split] = scores([splits.train[i].simplified for i in nearest], pairs)
    return out


def _ngrams(words: list[str], ngrams: tuple[int, int]) -> list[str]:
    return [" ".join(words[i : i + n]) for n in range(ngrams[0], ngrams[1] + 1)
            for i in range(len(words) - n + 1)]


def gloss(splits) -> dict:
    """Each English word replaced by the Chinese word of highest Dice coefficient with it over
    the training pairs (words never seen are dropped); the final mark translated."""
    english = Counter()
    chinese = Counter()
    both = Counter()
    for p in splits.train:  # words only: punctuation is translated mark by mark below
        e = {w for w in S.english_words(p.english) if w[0].isalnum()}
        c = {w for w in p.words if w[0].isalnum()}
        english.update(e)
        chinese.update(c)
        both.update((x, y) for x in e for y in c)
    best: dict[str, tuple[float, str]] = {}
    for (e, c), n in sorted(both.items()):  # sorted: ties go to the same word on every run
        dice = 2 * n / (english[e] + chinese[c])
        if dice > best.get(e, (0.0, ""))[0]:
            best[e] = (dice, c)
    marks = {".": "。", "?": "？", "!": "！", ",": "，"}
    out = {}
    for split in ("valid", "test"):
        pairs = getattr(splits, split)
        hyps = ["".join(marks[w] if w in marks else best.get(w, (0.0, ""))[1]
                        for w in S.english_words(p.english)) for p in pairs]
        out[split] = scores(hyps, pairs)
    return out


# ---------------------------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------------------------


def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    per_seed = ", ".join(f"{v:.4g}" for v in values)
    return f"{statistics.mean(values):.4g} ({per_seed})"


def markdown(results: dict) -> str:
    rows = results["rows"]
    lines = []

    def table(task, metric, title, extra=""):
        lines.extend([f"**{title}**", "", f"| method | seeds | {metric}: mean (per seed) |"
                      f" CPU s (mean) |{extra}", "|---|---:|---|---:|"])
        methods = sorted({r["method"] for r in rows if r["task"] == task})
        for method in methods:
            found = sorted((r for r in rows if (r["task"], r["method"]) == (task, method)),
                           key=lambda r: r["seed"])
            values = [r[metric] for r in found]
            cpu = [r["cpu_s"] for r in found if "cpu_s" in r]
            cpu_text = f"{statistics.mean(cpu):.0f}" if cpu else "-"
            lines.append(f"| {method} | {len(found)} | {_summary(values)} | {cpu_text} |")
        lines.append("")

    table("segmentation", "f1", "Word segmentation (test split, word F1)")
    table("level", "accuracy", "HSK level (test split, accuracy; 6 classes)")
    lines.extend(["**English -> Chinese (BLEU, sacrebleu tokenize='zh'; chrF)**", "",
                  "| method | seeds | valid BLEU | test BLEU: mean (per seed) | test chrF |"
                  " decoding (chosen on valid) | CPU s train |", "|---|---:|---|---|---|---|---:|"])
    methods = sorted({r["method"] for r in rows if r["task"] == "translation"})
    for method in methods:
        found = sorted((r for r in rows if (r["task"], r["method"]) == ("translation", method)),
                       key=lambda r: r["seed"])
        valid = [r["valid_bleu"] for r in found]
        test = [r["test_bleu"] for r in found]
        chrf = [r["test_chrf"] for r in found]
        chosen = ", ".join(sorted({r.get("chosen_on_valid", "-") for r in found}))
        cpu = [r["cpu_s"] for r in found if "cpu_s" in r]
        cpu_text = f"{statistics.mean(cpu):.0f}" if cpu else "-"
        lines.append(f"| {method} | {len(found)} | {_summary(valid)} | {_summary(test)} | "
                     f"{_summary(chrf)} | {chosen} | {cpu_text} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["segmentation", "level", "translation"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--recipes", nargs="*", default=list(RECIPES))
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=20, help="of the tagger and classifier")
    parser.add_argument("--json", type=Path, default=HERE / "real_sentences.json")
    parser.add_argument("--markdown", action="store_true", help="print the tables and exit")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(load(args.json)))
        return
    torch.set_num_threads(1)
    splits = S.split_sentences(seed=args.split_seed)
    settings = {"data": f"{S.PACKAGE}=={S.PACKAGE_VERSION}", "sha256": S.DATA_SHA256,
                "split_seed": args.split_seed, "train": len(splits.train),
                "valid": len(splits.valid), "test": len(splits.test)}
    results = load(args.json)

    def run(task, method, seed, work, recipe=None):
        if find(results, task, method, seed, recipe) is not None:
            print(f"stored: {task} {method} seed {seed}")
            return
        row = {"task": task, "method": method, "seed": seed, **({"recipe": recipe} if recipe
                                                                 else {}), **work(), **machine()}
        store(args.json, row, settings)
        results["rows"] = load(args.json)["rows"]
        print(json.dumps({k: v for k, v in row.items() if k not in ("evaluations", "recipe")},
                         ensure_ascii=False))

    baselines = None
    for seed in args.seeds:
        if "segmentation" in args.tasks:
            run("segmentation", "max matching (training words)", seed,
                partial(segmentation_max_match, splits))
            run("segmentation", "every character a word", seed,
                partial(segmentation_single_chars, splits))
            run("segmentation", f"EncoderTagger (B/M/E/S), {args.epochs} epochs", seed,
                partial(segmentation_model, splits, seed, args.epochs))
        if "level" in args.tasks:
            if any(find(results, "level", name, seed) is None for name in LEVEL_BASELINES):
                baselines = baselines or level_baselines(splits)  # deterministic: done once
                for name in LEVEL_BASELINES:
                    run("level", name, seed, partial(dict, baselines[name], deterministic=True))
            run("level", f"EncoderTagger, mean-pooled, {args.epochs} epochs", seed,
                partial(level_model, splits, seed, args.epochs))
        if "translation" in args.tasks:
            for name, ngrams in (("retrieval (TF-IDF words)", (1, 1)),
                                 ("retrieval (TF-IDF words + bigrams)", (1, 2))):
                run("translation", name, seed, partial(_flat, retrieval, splits, ngrams))
            run("translation", "word-by-word gloss (Dice)", seed, partial(_flat, gloss, splits))
    if "translation" in args.tasks:  # the search: recipe by recipe, every seed of one first
        for name in args.recipes:
            for seed in args.seeds:
                run("translation", f"Transformer: {name}", seed,
                    partial(translation_model, splits, RECIPES[name], seed), RECIPES[name])


def _flat(baseline, *args) -> dict:
    evaluation = baseline(*args)
    return {"valid_bleu": evaluation["valid"]["bleu"], "test_bleu": evaluation["test"]["bleu"],
            "test_chrf": evaluation["test"]["chrf"], "valid_chrf": evaluation["valid"]["chrf"],
            "deterministic": True}


if __name__ == "__main__":
    main()
