"""A small Long Range Arena: every attention variant of sections 06 and 07 on ListOps
(:func:`lectures_lib.data.listops_task`, Nangia & Bowman 2018 as the LRA generates it), next to
the LRA's own Table 1 (Tay et al. 2020), with the rank correlation between the two rankings.

Run it with ``python benchmarks/listops.py`` (``--help`` for options); it is not part of the
tests. Every (variant, seed) is one row of ``--json`` (default ``benchmarks/listops.json``),
written atomically as soon as the run finishes; rerunning with the same settings skips the rows
already stored (resumable: kill it any time, start it again). Rows of other settings are never
mixed in: a changed recipe starts a new table (the old file is kept as ``.old.json``).
``--plot`` draws the table (``--plot-only`` without training): our mean accuracy (min-max over
the seeds) against the LRA's, one marker per mapped variant.

One recipe for every variant: the same data (``--n-train`` expressions of ``--min-len`` to
``--max-len`` tokens, seed 0; ``--n-test`` held out, seed 1), the same encoder
(``EncoderTagger``, ``--layers`` 2, ``--d-model`` 32, ``--heads`` 2, d_ff = 2 d_model, sinusoidal
positions), the same optimiser (AdamW, peak ``--lr`` on warm-up + cosine, gradient clipping 1.0,
``--steps`` steps of ``--batch-size``), seeds ``--seeds`` for the model and the batch order. The
class is read from the mean of the per-token logits over the real tokens (mean pooling; the
padding is masked as keys and left out of the mean). Each variant is built by
``benchmarks/long_range.py``'s ``SETTINGS`` (the same overrides as the N = 512 picture), so the
registries ``variants.VARIANTS`` and ``variants.ATTENTION_FREE`` decide what runs.

Baselines that ignore the content: the **majority class** of the training labels (ListOps'
classes are not balanced), and a **bag of tokens** (one layer of the uniform average, no
positions, mean pooling: a function of the multiset of tokens only). And one rule that reads a
single token: the **root operator** (position 0) and the training set's most frequent label for
it, no argument of it read (:func:`root_operator_rule`): what a model gains by knowing only which
operator the root is. Both floors are also stored for expressions of the LRA's own lengths
(``baselines["lra_lengths"]``: 4096 and 1024 expressions of 500-2000 tokens, drawn the same way),
to read the LRA's numbers against.

The LRA numbers (Table 1, ListOps column, test accuracy %) are ``LRA_TABLE1``; ``LRA_MAP`` says
which of our variants is which of their rows. The LRA trained 4-6 layer models of width 512 on
96 000 expressions of 500-2000 tokens for 5 000 steps on TPUs; here the models, the data and the
lengths are small enough for one CPU thread, so the comparison is of *rankings*, not of numbers.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled
sys.path.insert(0, str(Path(__file__).resolve().parent))  # long_range.py, beside this file

import long_range  # noqa: E402

from lectures_lib import seed_everything  # noqa: E402
from lectures_lib.data import (  # noqa: E402
    LISTOPS_TOKENS,
    listops_class_shares,
    listops_task,
    listops_vocab_size,
)
from lectures_lib.models import EncoderTagger  # noqa: E402
from lectures_lib.training import cross_entropy, lr_schedule  # noqa: E402
from lectures_lib.variants import UniformAttention  # noqa: E402

HERE = Path(__file__).resolve().parent

#: Tay et al. 2020 (Long Range Arena), Table 1, ListOps column (test accuracy, %).
LRA_TABLE1 = {
    "Transformer": 36.37,
    "Local Attention": 15.82,
    "Sparse Trans.": 17.07,
    "Longformer": 35.63,
    "Linformer": 35.70,
    "Reformer": 37.27,
    "Sinkhorn Trans.": 33.67,
    "Synthesizer": 36.99,
    "BigBird": 36.05,
    "Linear Trans.": 16.13,
    "Performer": 18.01,
}
#: Our variant (class name) for each LRA row; "Sparse Trans." (Child et al.'s strided and fixed
#: patterns) has no module here. The LRA's Synthesizer row is matched with the Dense Synthesizer
#: (the paper's main form); the Random Synthesizer, the kernel of Shen et al., the Routing forms,
#: the bucket-mask LSH, compressed attention and FNet have no row there.
LRA_MAP = {
    "Transformer": "MultiHeadAttention",
    "Local Attention": "LocalAttention",
    "Longformer": "LongformerAttention",
    "Linformer": "LinformerAttention",
    "Reformer": "ReformerAttention",
    "Sinkhorn Trans.": "SinkhornAttention",
    "Synthesizer": "DenseSynthesizerAttention",
    "BigBird": "BigBirdAttention",
    "Linear Trans.": "LinearAttention",
    "Performer": "PerformerAttention",
}
BAG = "BagOfTokens"  # the content-blind model: one uniform-average layer, no positions


def ranks(values: list[float]) -> list[float]:
    """Ranks 1 ... n of ``values`` (ties get the mean of their ranks)."""
    order = sorted(range(len(values)), key=values.__getitem__)
    result = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for position in order[i : j + 1]:
            result[position] = (i + j) / 2 + 1
        i = j + 1
    return result


def spearman(x: list[float], y: list[float]) -> float:
    """Spearman's rank correlation: the Pearson correlation of the ranks (ties averaged)."""
    if len(x) != len(y) or len(x) < 2:
        raise ValueError(f"x and y must have the same length >= 2, got {len(x)} and {len(y)}")
    rx, ry = ranks(x), ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sx = math.sqrt(sum((a - mx) ** 2 for a in rx))
    sy = math.sqrt(sum((b - my) ** 2 for b in ry))
    return cov / (sx * sy) if sx and sy else float("nan")


def root_operator_rule(train, test) -> tuple[float, dict[str, int]]:
    """The held-out accuracy of answering, for each root operator (the token at position 0), the
    most frequent training label among the expressions with that root; and that label per
    operator. ``train`` and ``test`` are ``listops_task``'s ``(tokens, mask, labels)``."""
    roots, labels = train[0][:, 0], train[2]
    label_of = {int(op): int(torch.bincount(labels[roots == op], minlength=10).argmax())
                for op in roots.unique()}
    majority = int(torch.bincount(labels, minlength=10).argmax())  # a root never seen in training
    guesses = torch.tensor([label_of.get(int(op), majority) for op in test[0][:, 0]])
    names = {LISTOPS_TOKENS[op]: label for op, label in sorted(label_of.items())}
    return float((guesses == test[2]).double().mean()), names


def floors_at_lra_lengths(n_train: int = 4096, n_test: int = 1024) -> dict:
    """The majority class and the root-operator rule for expressions of the LRA's lengths
    (500-2000 tokens; seeds 0 and 1), to read the LRA's Table 1 against (about 25 s)."""
    train = listops_task(n_train, 2000, min_len=500, seed=0)
    test = listops_task(n_test, 2000, min_len=500, seed=1)
    majority = int(listops_class_shares(train[2]).argmax())
    rule_accuracy, rule_labels = root_operator_rule(train, test)
    return {"min_len": 500, "max_len": 2000, "n_train": n_train, "n_test": n_test,
            "majority_class": float((test[2] == majority).double().mean()),
            "majority_label": majority, "root_operator": rule_accuracy,
            "root_operator_labels": rule_labels}


def settings_of(args) -> dict:
    keys = ("max_len", "min_len", "n_train", "n_test", "steps", "batch_size", "lr", "schedule",
            "warmup", "d_model", "heads", "layers")
    return {"task": "listops", "pooling": "mean over real tokens", "grad_clip": 1.0,
            **{key: getattr(args, key) for key in keys}}


def variants_to_run(args) -> list[tuple[str, str, str, type | None, dict]]:
    """``(class name, label, family, class, overrides)``: the two full-attention paths, every
    registered variant (``long_range.discover``), then the bag of tokens."""
    found = []
    for name, cls in long_range.discover():
        label, family, overrides = long_range.SETTINGS.get(name, (name, "other", {}))
        if name == "UniformAttention":
            label = "uniform average (2 layers)"
        found.append((name, label, family, cls, overrides))
    found.append((BAG, "bag of tokens (1 layer, no positions)", "baseline", UniformAttention, {}))
    return [row for row in found
            if (not args.only or row[0] in args.only) and row[0] not in args.skip]


def pooled(model: EncoderTagger, tokens: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Class logits ``(batch, 10)``: the mean of the per-token logits over the real tokens."""
    logits = model(tokens, mask[:, None, None, :])  # (batch, n, 10); padding masked as keys
    weights = mask[..., None].to(logits.dtype)  # (batch, n, 1)
    return (logits * weights).sum(1) / weights.sum(1)


def build_model(name: str, cls: type, overrides: dict, args, seed: int) -> EncoderTagger:
    seed_everything(seed)
    bag = name == BAG
    return EncoderTagger(listops_vocab_size(), 10, d_model=args.d_model, num_heads=args.heads,
                         num_layers=1 if bag else args.layers, d_ff=2 * args.d_model,
                         max_len=args.max_len, positional_encoding=not bag,
                         attention=long_range.factory_for(cls, args.max_len, overrides))


@torch.no_grad()
def accuracy(model, data, batch_size: int = 256) -> float:
    model.eval()
    tokens, mask, labels = data
    correct = sum(int((pooled(model, tokens[i : i + batch_size], mask[i : i + batch_size])
                       .argmax(-1) == labels[i : i + batch_size]).sum())
                  for i in range(0, len(labels), batch_size))
    model.train()
    return correct / len(labels)


def run(name, cls, overrides, args, seed, train, test, progress, keep_model: bool = False) -> dict:
    """Train one (variant, seed) with the stored recipe; its accuracies, loss and speed (and, with
    ``keep_model``, the trained model under ``"model"``)."""
    model = build_model(name, cls, overrides, args, seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = lr_schedule(optimizer, args.steps, args.schedule, args.warmup)
    generator = torch.Generator().manual_seed(seed)
    step_times, losses = [], []
    start = time.perf_counter()
    model.train()
    for step in range(args.steps):
        idx = torch.randint(0, len(train[2]), (args.batch_size,), generator=generator)
        width = int(train[1][idx].sum(1).max()) if args.trim else args.max_len
        tokens, mask, labels = train[0][idx, :width], train[1][idx, :width], train[2][idx]
        began = time.perf_counter()
        loss = cross_entropy(pooled(model, tokens, mask), labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        step_times.append(time.perf_counter() - began)
        losses.append(loss.item())
        progress.update(1)
        if step % 50 == 0:
            progress.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}", refresh=False)
        if not math.isfinite(losses[-1]):
            break
    seconds = time.perf_counter() - start
    tail = losses[-max(1, args.steps // 10):]
    return {
        **({"model": model} if keep_model else {}),
        "accuracy": accuracy(model, test),
        "train_accuracy": accuracy(model, tuple(x[: len(test[2])] for x in train)),
        "final_loss": sum(tail) / len(tail),
        "steps_done": len(losses),
        "train_seconds": seconds,
        "steps_per_s": 1.0 / sorted(step_times)[len(step_times) // 2],
        "load_average": os.getloadavg()[0],
    }


@torch.no_grad()
def predictions(model, data, batch_size: int = 256) -> torch.Tensor:
    """The model's class for every expression of ``data`` ``(n,)``."""
    model.eval()
    tokens, mask, _ = data
    return torch.cat([pooled(model, tokens[i : i + batch_size], mask[i : i + batch_size]).argmax(-1)
                      for i in range(0, len(tokens), batch_size)])


def agreement_with_rule(predicted: torch.Tensor, train, test) -> dict:
    """How often ``predicted`` (the model's classes on ``test``) equals the root-operator rule's
    answer, overall and per root operator, beside the model's and the rule's accuracy there: an
    accuracy equal to the rule's does not say that the model answers as the rule does."""
    _, rule_labels = root_operator_rule(train, test)
    roots, labels = test[0][:, 0], test[2]
    by_token = {name: LISTOPS_TOKENS.index(name) for name in rule_labels}
    rule = torch.tensor([rule_labels[LISTOPS_TOKENS[int(op)]] for op in roots])  # (n,)
    per_operator = {}
    for name, token in by_token.items():
        here = roots == token
        per_operator[name] = {
            "n": int(here.sum()),
            "agreement": float((predicted[here] == rule[here]).double().mean()),
            "model_accuracy": float((predicted[here] == labels[here]).double().mean()),
            "rule_accuracy": float((rule[here] == labels[here]).double().mean()),
        }
    return {"agreement": float((predicted == rule).double().mean()),
            "accuracy": float((predicted == labels).double().mean()),
            "rule_accuracy": float((rule == labels).double().mean()),
            "per_operator": per_operator}


def agreement(args, train, test) -> None:
    """``--agreement``: train the (variant, seed) runs named by ``--only`` and ``--seeds`` again
    with the stored recipe and store, per root operator, how often each model answers what the
    root-operator rule answers, in ``--agreement-json`` (resumable: one row per run)."""
    path = args.agreement_json
    results = json.loads(path.read_text()) if path.exists() else {}
    if results.get("settings") != settings_of(args):
        results = {"settings": settings_of(args), "rows": {}}
    results["environment"] = (f"torch {torch.__version__}, {platform.machine()}, "
                              f"{args.threads} thread(s), {os.cpu_count()} cores (shared)")
    todo = [(seed, row) for seed in args.seeds for row in variants_to_run(args)
            if f"{row[1]} / seed {seed}" not in results["rows"]]
    progress = tqdm(total=len(todo) * args.steps, unit="step", mininterval=30, file=sys.stdout)
    for seed, (name, label, family, cls, overrides) in todo:
        progress.set_description(f"{label} / seed {seed}")
        row = run(name, cls, overrides, args, seed, train, test, progress, keep_model=True)
        found = agreement_with_rule(predictions(row.pop("model"), test), train, test)
        results["rows"][f"{label} / seed {seed}"] = {
            "label": label, "family": family, "cls": name, "seed": seed, **found,
            "train_seconds": row["train_seconds"]}
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps(results, indent=1) + "\n")
        temporary.replace(path)
        tqdm.write(f"{label} / seed {seed}: accuracy {found['accuracy']:.3f}, agreement with the "
                   f"rule {found['agreement']:.3f}: " + ", ".join(
                       f"{op} {v['agreement']:.2f}" for op, v in found["per_operator"].items()),
                   file=sys.stdout)
    progress.close()


def store(results: dict, path: Path) -> dict:
    """Write atomically, keeping the rows another process stored meanwhile (same settings)."""
    if path.exists():
        stored = json.loads(path.read_text())
        if stored.get("settings") == results["settings"]:
            results = {**results, "rows": {**stored["rows"], **results["rows"]}}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(results, indent=1) + "\n")
    temporary.replace(path)  # a reader never sees half a file
    return results


def summary(results: dict) -> dict:
    """Per variant: mean, min, max accuracy over the stored seeds; the LRA comparison over the
    mapped variants (Spearman's rho of our means against the LRA's numbers)."""
    per = {}
    for row in results["rows"].values():
        per.setdefault(row["cls"], {"label": row["label"], "family": row["family"], "acc": []})
        per[row["cls"]]["acc"].append(row["accuracy"])
    table = {cls: {"label": v["label"], "family": v["family"], "seeds": len(v["acc"]),
                   "mean": sum(v["acc"]) / len(v["acc"]), "min": min(v["acc"]),
                   "max": max(v["acc"])} for cls, v in per.items()}
    pairs = [(lra, cls) for lra, cls in LRA_MAP.items() if cls in table]
    rho = (spearman([table[c]["mean"] for _, c in pairs], [LRA_TABLE1[r] for r, _ in pairs])
           if len(pairs) >= 2 else None)
    return {"per_variant": table, "mapped": [[r, c] for r, c in pairs], "spearman_rho": rho}


def markdown(results: dict) -> str:
    """The README's table of the stored runs: per model the mean and the min-max over its seeds
    (best first), its LRA row, then the baselines and Spearman's rho, all read from ``results``."""
    info = summary(results)
    table, base = info["per_variant"], results["baselines"]
    lra_of = {cls: name for name, cls in results["lra_map"].items()}
    lines = ["| model | family | seeds | mean | min-max | LRA Table 1 (%) |",
             "|---|---|---:|---:|---|---|"]
    for cls in sorted(table, key=lambda c: -table[c]["mean"]):
        row = table[cls]
        theirs = (f"{results['lra_table1'][lra_of[cls]]:.2f} ({lra_of[cls]})" if cls in lra_of
                  else "-")
        lines.append(f"| {row['label']} | {row['family']} | {row['seeds']} | {row['mean']:.3f} | "
                     f"{row['min']:.3f}-{row['max']:.3f} | {theirs} |")
    methods = [c for c in table if table[c]["family"] != "baseline"]
    means = [table[c]["mean"] for c in methods]
    full = [r["accuracy"] for r in results["rows"].values()
            if r["cls"] in ("MultiHeadAttention", "ExplicitFullAttention")]
    far = base.get("lra_lengths", {})
    lines += [
        "",
        f"Baselines ({results['settings']['min_len']}-{results['settings']['max_len']} tokens): "
        f"majority class {base['majority_class']:.3f}, root-operator rule "
        f"{base['root_operator']:.3f}; at the LRA's 500-2000 tokens: majority class "
        f"{far.get('majority_class', float('nan')):.3f}, root-operator rule "
        f"{far.get('root_operator', float('nan')):.3f}. The {len(methods)} models (every row but "
        f"the two baselines) span {min(means):.3f}-{max(means):.3f} ({max(means) - min(means):.3f}); "
        f"full attention's {len(full)} runs span {min(full):.3f}-{max(full):.3f} "
        f"({max(full) - min(full):.3f}). Spearman's rho against the LRA over the "
        f"{len(info['mapped'])} mapped rows: {info['spearman_rho']:.3f}.",
    ]
    return "\n".join(lines)


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = summary(results)
    table = info["per_variant"]
    fig, (ours, theirs) = plt.subplots(1, 2, figsize=(11, 5.5), gridspec_kw={"width_ratios": [1.6, 1]})
    order = sorted(table, key=lambda c: table[c]["mean"])
    for y, cls in enumerate(order):
        row = table[cls]
        ours.errorbar(row["mean"], y, xerr=[[row["mean"] - row["min"]], [row["max"] - row["mean"]]],
                      fmt="o", color="C0" if cls in LRA_MAP.values() else "grey", capsize=3)
    ours.set_yticks(range(len(order)), [f"{table[c]['label']} ({table[c]['seeds']})" for c in order],
                    fontsize=7)
    ours.axvline(results["baselines"]["majority_class"], color="red", linestyle=":",
                 label="majority class")
    ours.axvline(0.1, color="grey", linestyle=":", label="chance (1/10)")
    ours.set_xlabel("held-out accuracy (mean over seeds; bar = min to max)")
    s = results["settings"]
    ours.set_title(f"ListOps here: {s['min_len']}-{s['max_len']} tokens, {s['layers']} layers, "
                   f"d {s['d_model']}, {s['steps']} steps of {s['batch_size']}", fontsize=9)
    ours.legend(fontsize=7, loc="lower right")
    for lra, cls in info["mapped"]:
        theirs.scatter(LRA_TABLE1[lra], 100 * table[cls]["mean"], color="C0")
        theirs.annotate(lra, (LRA_TABLE1[lra], 100 * table[cls]["mean"]), fontsize=7,
                        xytext=(3, 3), textcoords="offset points")
    theirs.set_xlabel("LRA Table 1, ListOps (%)")
    theirs.set_ylabel("here (%, mean over seeds)")
    rho = info["spearman_rho"]
    theirs.set_title(f"Spearman rho = {rho:.2f} over {len(info['mapped'])} variants"
                     if rho is not None else "too few mapped variants", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--max-len", type=int, default=256)
    parser.add_argument("--min-len", type=int, default=64)
    parser.add_argument("--n-train", type=int, default=16384)
    parser.add_argument("--n-test", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--schedule", choices=("warmup_cosine", "one_cycle", "constant"),
                        default="warmup_cosine")
    parser.add_argument("--warmup", type=float, default=0.1)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--only", nargs="*", help="class names to run (default: all found)")
    parser.add_argument("--skip", nargs="*", default=[], help="class names not to run")
    parser.add_argument("--trim", action="store_true",
                        help="cut each batch to its longest expression (faster; not for variants "
                             "whose size depends on N: off by default)")
    parser.add_argument("--json", type=Path, default=HERE / "listops.json")
    parser.add_argument("--plot", type=Path, nargs="?", const=HERE / "listops.png", default=None,
                        help="draw the picture (default path benchmarks/listops.png)")
    parser.add_argument("--plot-only", action="store_true", help="only redraw from --json")
    parser.add_argument("--markdown", action="store_true",
                        help="print the README's table of --json's runs and stop (no training)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--agreement", action="store_true",
                        help="train the runs named by --only/--seeds again and store how often "
                             "each answers as the root-operator rule, per root operator")
    parser.add_argument("--agreement-json", type=Path, default=HERE / "listops_agreement.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    if args.markdown:
        print(markdown(json.loads(args.json.read_text())))
        return
    if args.plot_only:
        plot(json.loads(args.json.read_text()), args.plot or HERE / "listops.png")
        return

    if args.agreement:
        agreement(args, listops_task(args.n_train, args.max_len, min_len=args.min_len, seed=0),
                  listops_task(args.n_test, args.max_len, min_len=args.min_len, seed=1))
        return
    settings = settings_of(args)
    results = {"settings": settings, "rows": {}}
    if args.json.exists():
        stored = json.loads(args.json.read_text())
        if stored.get("settings") == settings:
            results = stored
        else:
            args.json.rename(args.json.with_suffix(".old.json"))
    results["environment"] = (f"torch {torch.__version__}, {platform.machine()}, "
                              f"{args.threads} thread(s), {os.cpu_count()} cores (shared)")
    train = listops_task(args.n_train, args.max_len, min_len=args.min_len, seed=0)
    test = listops_task(args.n_test, args.max_len, min_len=args.min_len, seed=1)
    shares = listops_class_shares(train[2])
    majority = int(shares.argmax())
    results["baselines"] = {
        "chance": 0.1,
        "majority_class": float((test[2] == majority).double().mean()),
        "majority_label": majority,
        "train_class_shares": [round(float(s), 4) for s in shares],
        "test_mean_length": float(test[1].sum(1).double().mean()),
    }
    rule_accuracy, rule_labels = root_operator_rule(train, test)
    results["baselines"]["root_operator"] = rule_accuracy
    results["baselines"]["root_operator_labels"] = rule_labels
    results["baselines"]["lra_lengths"] = floors_at_lra_lengths()
    results["lra_table1"] = LRA_TABLE1
    results["lra_map"] = LRA_MAP
    todo = [(seed, row) for seed in args.seeds for row in variants_to_run(args)
            if f"{row[1]} / seed {seed}" not in results["rows"]]
    print(f"# ListOps {args.min_len}-{args.max_len} tokens, {len(todo)} runs to do; majority class "
          f"{results['baselines']['majority_class']:.3f}; {results['environment']}", flush=True)
    progress = tqdm(total=len(todo) * args.steps, unit="step", mininterval=30, file=sys.stdout)
    for seed, (name, label, family, cls, overrides) in todo:
        progress.set_description(f"{label} / seed {seed}")
        try:
            row = run(name, cls, overrides, args, seed, train, test, progress)
        except Exception as error:  # noqa: BLE001 - one broken variant must not stop the others
            print(f"\n{label} / seed {seed}: failed: {type(error).__name__}: {error}", flush=True)
            continue  # nothing stored: the next run tries again
        row.update(label=label, family=family, cls=name, seed=seed)
        results["rows"][f"{label} / seed {seed}"] = row
        results["summary"] = summary(results)
        results = store(results, args.json)
        tqdm.write(f"{label} / seed {seed}: accuracy {row['accuracy']:.3f} (train "
                   f"{row['train_accuracy']:.3f}), {row['train_seconds']:.0f} s", file=sys.stdout)
    progress.close()
    results["summary"] = summary(results)
    results = store(results, args.json)
    if args.plot:
        plot(results, args.plot)


if __name__ == "__main__":
    main()
