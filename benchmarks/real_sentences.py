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

``curve`` (the learning curve): the search's best recipe (``CURVE_RECIPE``) trained on the
first N pairs of the training split (``CURVE_SIZES``), beside both baselines on the same pairs.
``tier_fractions`` derives the homework's tiers (:data:`lectures_lib.checks.translation.TIERS`)
from the stored runs.

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
import json
import math
import os
import platform
import statistics
import sys
import time
from functools import partial
from pathlib import Path

import torch
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import real_sentences as T  # noqa: E402
from lectures_lib import sentence_labels as L  # noqa: E402
from lectures_lib.data import sentences as S  # noqa: E402

HERE = Path(__file__).resolve().parent

# ---------------------------------------------------------------------------------------------
# Translation recipes: the search. Each is a full description of one training + decoding setup.
# ---------------------------------------------------------------------------------------------

# A recipe is lectures_lib.real_sentences's (RECIPE_DEFAULTS: the fields a recipe leaves out)
# with the CPU seconds after which its training stops; its decoding fields are not used here:
# every trained model is decoded the ways of EVALUATED and the best on the validation split counts.
BASE = dict(
    target="chars", src_min_count=1, d_model=128, heads=4, layers=2, d_ff=256, dropout=0.1,
    norm_first=False, label_smoothing=0.0, lr=1e-3, warmup=0.1, batch_size=64, epochs=30,
    weight_decay=0.0, average_last=5, augment_glosses=False, max_cpu_s=360,
)
RECIPES = {
    # the homework's starter (notebook 08 gives it): small and short, the simple tier's reference
    "starter": dict(BASE, d_model=64, d_ff=128, layers=1, epochs=10, lr=2e-3,
                    label_smoothing=0.1),
    "plain": dict(BASE),
    "regularised": dict(BASE, dropout=0.3, label_smoothing=0.1, epochs=40),
    "regularised-words": dict(BASE, dropout=0.3, label_smoothing=0.1, epochs=40, target="words"),
    "small-regularised": dict(BASE, d_model=64, d_ff=256, dropout=0.3, label_smoothing=0.1,
                              epochs=60, lr=2e-3),
    "smoothed-fast": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=25),
    "smoothed-long": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=50),
    "smoothed-words": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=40, target="words"),
    "lexicon": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=40, augment_glosses=True),
    "prenorm-regularised": dict(BASE, dropout=0.3, label_smoothing=0.1, epochs=40,
                                norm_first=True, lr=2e-3, weight_decay=0.01),
    # issue 39's second search (h39-search): longer still, inside the grader's 600 CPU s
    "smoothed-80": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=80, max_cpu_s=600),
    "smoothed-words-long": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=50, target="words",
                                max_cpu_s=600),
    "smoothed-80-tied": dict(BASE, label_smoothing=0.1, lr=2e-3, epochs=80, tie_embeddings=True,
                             max_cpu_s=600),
}
DECODINGS = {  # name: (beam width, length penalty); beam width 1 = greedy
    "greedy": (1, 0.0),
    "beam4": (4, 0.0),
    "beam4-lp1": (4, 1.0),
    "beam4-lp1.5": (4, 1.5),
    "beam8-lp1": (8, 1.0),
}
EVALUATED = [  # (weights, decoding): the averaged weights only with the beam (halves the cost)
    ("last", "greedy"), ("last", "beam4"), ("last", "beam4-lp1"), ("average", "beam4-lp1"),
    ("last", "beam4-lp1.5"), ("last", "beam8-lp1")]  # the last two: added by the second search


# ---------------------------------------------------------------------------------------------
# Storage
# ---------------------------------------------------------------------------------------------


def load(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {"rows": []}


def find(results: dict, task: str, method: str, seed: int, recipe: dict | None = None):
    for row in results["rows"]:
        if (row["task"], row["method"], row["seed"]) == (task, method, seed):
            if recipe is None or (row.get("recipe") is not None and recipe_of(row["recipe"])
                                  == recipe_of(recipe)
                                  and row["recipe"]["max_cpu_s"] == recipe["max_cpu_s"]):
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
# (a) Segmentation and (b) HSK level: the models of lectures_lib.sentence_labels
# ---------------------------------------------------------------------------------------------


def segmentation_model(splits, seed: int, epochs: int = 20) -> dict:
    start = time.process_time()
    model, vocab = L.train_segmenter(splits.train, seed=seed, epochs=epochs)
    cpu = time.process_time() - start
    words = L.segment(model, vocab, splits.test)
    return {"f1": S.segmentation_f1(words, [p.words for p in splits.test]), "cpu_s": cpu,
            "epochs": epochs, "parameters": sum(p.numel() for p in model.parameters())}


def segmentation_max_match(splits) -> dict:
    lexicon = {w for p in splits.train for w in p.words}
    words = [S.max_match(p.simplified, lexicon) for p in splits.test]
    return {"f1": S.segmentation_f1(words, [p.words for p in splits.test]), "deterministic": True}


def segmentation_single_chars(splits) -> dict:
    words = [list(p.simplified) for p in splits.test]
    return {"f1": S.segmentation_f1(words, [p.words for p in splits.test]), "deterministic": True}


def level_model(splits, seed: int, epochs: int = 20) -> dict:
    start = time.process_time()
    model, vocab = L.train_level_model(splits.train, seed=seed, epochs=epochs)
    cpu = time.process_time() - start
    predicted = torch.tensor(L.predict_levels(model, vocab, splits.test))
    levels = torch.tensor([p.level for p in splits.test])
    return {"accuracy": float((predicted == levels).float().mean()),
            "within_one": float(((predicted - levels).abs() <= 1).float().mean()),
            "cpu_s": cpu, "epochs": epochs}


LEVEL_BASELINES = ("majority", "length", "bag-of-characters")


# ---------------------------------------------------------------------------------------------
# (c) Translation: lectures_lib.real_sentences trains and decodes every recipe
# ---------------------------------------------------------------------------------------------


def scores(hypotheses: list[str], pairs) -> dict:
    return T.bleu_chrf(hypotheses, [p.simplified for p in pairs])


def recipe_of(benchmark_recipe: dict) -> dict:
    """The library's recipe (every field) of a benchmark recipe (which adds ``max_cpu_s``)."""
    return T.check_recipe({k: v for k, v in benchmark_recipe.items() if k != "max_cpu_s"})


def translation_model(splits, recipe: dict, seed: int) -> dict:
    trained = T.train_translator(splits.train, recipe_of(recipe), seed,
                                 max_cpu_s=recipe["max_cpu_s"])
    evaluations, start = {}, time.process_time()
    nets = {"last": trained.model, "average": trained.averaged}
    runs = [(w, nets[w], name) for w, name in EVALUATED if nets[w] is not None]
    for weights, net, name in tqdm(runs, desc="decoding valid + test", mininterval=1):
        beam, penalty = DECODINGS[name]
        evaluations[f"{weights}/{name}"] = {
            split: scores(T.translate(trained, [p.english for p in getattr(splits, split)],
                                      beam=beam, length_penalty=penalty, model=net),
                          getattr(splits, split))
            for split in ("valid", "test")}
    best = max(evaluations, key=lambda k: evaluations[k]["valid"]["bleu"])
    weights, name = best.split("/")
    examples = T.translate(trained, [p.english for p in splits.test[:8]],
                           beam=DECODINGS[name][0], length_penalty=DECODINGS[name][1],
                           model=nets[weights])
    return {"cpu_s": round(trained.cpu_s, 1), "eval_cpu_s": round(time.process_time() - start, 1),
            "epochs_done": trained.epochs_done, "stopped_early": bool(trained.stopped),
            "training_pairs": len(trained.data.src),
            "src_vocab": len(trained.data.src_vocab), "tgt_vocab": len(trained.data.tgt_vocab),
            "parameters": sum(p.numel() for p in trained.model.parameters()),
            "evaluations": evaluations, "chosen_on_valid": best,
            "valid_bleu": evaluations[best]["valid"]["bleu"],
            "test_bleu": evaluations[best]["test"]["bleu"],
            "test_chrf": evaluations[best]["test"]["chrf"],
            "examples": [[p.english, p.simplified, h] for p, h in zip(splits.test[:8], examples)]}


CURVE_SIZES = (250, 500, 1000, 2000)  # training pairs of the learning curve (+ the full split)
CURVE_RECIPE = "smoothed-fast"  # the search's best recipe when the curve was run (see README)


def curve_point(splits, size: int, seed: int | None) -> dict:
    """Test BLEU with the first ``size`` training pairs: the curve's recipe (decoded as the
    search chose: beam 4, length penalty 1, the last weights) when ``seed`` is given, else the
    two baselines (deterministic)."""
    train = splits.train[:size]
    english = [p.english for p in splits.test]
    if seed is None:
        return {"retrieval": scores(T.retrieve(train, english), splits.test),
                "gloss": scores(T.gloss(train, english), splits.test),
                "training_pairs": size, "deterministic": True}
    recipe = RECIPES[CURVE_RECIPE]
    trained = T.train_translator(train, recipe_of(recipe), seed, max_cpu_s=recipe["max_cpu_s"])
    found = scores(T.translate(trained, english, beam=4, length_penalty=1.0), splits.test)
    return {"test_bleu": found["bleu"], "test_chrf": found["chrf"], "training_pairs": size,
            "cpu_s": round(trained.cpu_s, 1), "epochs_done": trained.epochs_done}


# The homework's tiers (lectures_lib.checks.translation.TIERS): tier -> (method, evaluation);
# its fraction = the lowest over the seeds of that reference's test BLEU / retrieval's, floored
# to 2 decimals, so the reference itself reaches its tier on every seed here.
# The decodings are the homework's: a recipe decodes as RECIPE_DEFAULTS say unless it says
# otherwise (the last weights, beam 4, length penalty 1); None: a baseline's one output.
TIER_REFERENCES = {
    "simple": ("Transformer: starter", "last/beam4-lp1"),
    "medium": ("word-by-word gloss (Dice)", None),
    "strong": ("Transformer: smoothed-fast", "last/beam4-lp1"),
    "boss": ("Transformer: smoothed-long", "last/beam4-lp1"),
}
RETRIEVAL = "retrieval (TF-IDF words + bigrams)"
GLOSS = "word-by-word gloss (Dice)"


def tier_fractions(results: dict, seeds=(0, 1, 2)) -> dict:
    """The homework's tier fractions from the stored runs (every reference on every seed)."""
    out = {}
    for tier, (method, evaluation) in TIER_REFERENCES.items():
        ratios = []
        for seed in seeds:
            row = find(results, "translation", method, seed)
            lookup = find(results, "translation", RETRIEVAL, seed)
            if row is None or lookup is None:
                raise LookupError(f"no stored run of {method!r} (or retrieval) for seed {seed}")
            bleu = row["evaluations"][evaluation]["test"]["bleu"] if evaluation else \
                row["test_bleu"]
            ratios.append(bleu / lookup["test_bleu"])
        out[tier] = math.floor(min(ratios) * 100) / 100
    return out


def retrieval(splits, bigrams: bool) -> dict:
    return {split: scores(T.retrieve(splits.train, [p.english for p in getattr(splits, split)],
                                     bigrams=bigrams), getattr(splits, split))
            for split in ("valid", "test")}


def gloss(splits) -> dict:
    return {split: scores(T.gloss(splits.train, [p.english for p in getattr(splits, split)]),
                          getattr(splits, split))
            for split in ("valid", "test")}


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
    curve = [r for r in rows if r["task"] == "curve"]
    if curve:
        lines.extend(["", f"**Learning curve: test BLEU against training pairs** ({CURVE_RECIPE},"
                      " beam 4, length penalty 1; the baselines on the same pairs)", "",
                      "| training pairs | Transformer: mean (per seed) | retrieval | gloss |",
                      "|---:|---|---:|---:|"])
        for size in sorted({r["training_pairs"] for r in curve}):
            model = sorted((r for r in curve if r["training_pairs"] == size and "test_bleu" in r),
                           key=lambda r: r["seed"])
            base = next((r for r in curve if r["training_pairs"] == size and "retrieval" in r),
                        None)
            lines.append(f"| {size} | {_summary([r['test_bleu'] for r in model])} | "
                         f"{base['retrieval']['bleu'] if base else '-'} | "
                         f"{base['gloss']['bleu'] if base else '-'} |")
        full = sorted((r for r in rows if r["method"] == f"Transformer: {CURVE_RECIPE}"),
                      key=lambda r: r["seed"])
        lookup = {m: find(results, "translation", m, 0) for m in (RETRIEVAL, GLOSS)}
        if full and all(lookup.values()):
            values = [r["evaluations"]["last/beam4-lp1"]["test"]["bleu"] for r in full]
            lines.append(f"| {full[0]['training_pairs']} (all) | {_summary(values)} | "
                         f"{lookup[RETRIEVAL]['test_bleu']} | {lookup[GLOSS]['test_bleu']} |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+",
                        default=["segmentation", "level", "translation", "curve"])
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
                baselines = baselines or L.level_baselines(splits)  # deterministic: done once
                for name in LEVEL_BASELINES:
                    run("level", name, seed, partial(dict, baselines[name], deterministic=True))
            run("level", f"EncoderTagger, mean-pooled, {args.epochs} epochs", seed,
                partial(level_model, splits, seed, args.epochs))
        if "translation" in args.tasks:
            for name, bigrams in (("retrieval (TF-IDF words)", False),
                                  ("retrieval (TF-IDF words + bigrams)", True)):
                run("translation", name, seed, partial(_flat, retrieval, splits, bigrams))
            run("translation", "word-by-word gloss (Dice)", seed, partial(_flat, gloss, splits))
    if "curve" in args.tasks:  # the learning curve: baselines once, the recipe per seed
        for size in CURVE_SIZES:
            run("curve", f"baselines, {size} pairs", 0, partial(curve_point, splits, size, None))
            for seed in args.seeds:
                run("curve", f"Transformer: {CURVE_RECIPE}, {size} pairs", seed,
                    partial(curve_point, splits, size, seed))
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
