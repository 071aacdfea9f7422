"""Every attention variant of sections 06 and 07 on one long-range task: the lecture's closing
picture (x = training speed, y = accuracy, marker area = peak memory), at a length where the N²
term matters.

Run it with ``python benchmarks/long_range.py`` (``--help`` for options); it is not part of the
tests. Results go to ``--json`` (default ``benchmarks/long_range.json``) one variant at a time, so
an interrupted run keeps what finished; ``--resume`` skips the variants already stored with the
same settings, so the picture can be refreshed piece by piece (``--only NAME ...``) after a variant
changes. Each write keeps the rows that another process stored meanwhile under the same settings,
so two processes with disjoint ``--only`` lists can share one JSON. A variant that raises is
reported and skipped (nothing stored, so ``--resume`` retries it). ``--plot`` redraws the picture
from the JSON (``--plot-only`` without training): numbered markers, the numbers listed beside.
``--markdown`` prints the README's table of every seed of every row from the JSON.
``--model-seeds 1 2`` (with the stored settings) trains every stored variant again with those
seeds of the model and the batch order (the data stay those of ``--seed``), stored per (variant,
seed) as ``seed_rows`` as each run finishes, skipping those already stored (resumable); the
picture then shows the mean over the seeds and their min-max spread. ``--retime`` (with
``--resume`` and the stored settings) times a training step of every stored
variant again, all in one process, round-robin, so that the x axis compares like with like (each
training run timed itself under whatever else the machine ran); the training run's own median is
kept as ``training_steps_per_s``.

``--sweep`` instead measures accuracy against N at a fixed budget (``--steps`` steps of
``--batch-size``, learning rate ``--lr`` on ``--schedule``, the same for every N and variant) for
full attention, the uniform-average baseline and the content-blind variants (Random Synthesizer,
Linformer with k = 8), over ``--seeds``, for ``--tasks``, into ``benchmarks/long_range_sweep.json``
(each task's settings stored beside its rows; a task not rerun keeps its rows and settings;
``--variants`` runs some of them, e.g. in two processes writing two files);
``07_efficient_attention.ipynb`` draws it. The stored binding sweep is::

    python benchmarks/long_range.py --sweep --tasks binding --steps 1024 --batch-size 32 \
        --n-train 2048 --seeds 0 1 2 --schedule warmup_cosine --warmup 0.1

(The budget that suffices grows with N: with 256 or 512 steps at a constant rate full attention
was still learning at N = 256, and with 1024 at a constant rate one seed of three was short of
0.9; warmed up and decayed, 1024 steps take every seed past 0.9, benchmarks/README.md. The
retrieval rows are the older run, 256 steps at a constant rate, one layer, seeds 0 and 1.) Split
over processes, e.g. one per variant with ``--variants`` and its own ``--sweep-json``, the rows
can be merged afterwards.

The task (``--task``, default ``binding``) is :func:`lectures_lib.data.binding_task`: every pair
token occurs once in every sequence (the true pair of each key in the first half, the key's other
values as distractors in the second), so the bag of tokens is the same for every example and a
content-blind average is at chance by construction; ``retrieval`` is the older
:func:`lectures_lib.data.retrieval_task`, whose bag contains the answer. Every variant trains the
same encoder (``EncoderTagger``, ``--layers`` layers (2: a global token of Longformer / Big Bird
needs two layers to pass information from a key to the query, 06 section 4), ``--d-model`` 32,
``--heads`` 2, d_ff = 2 d_model) through the attention factory, with the same data, steps, batch,
learning-rate schedule (``--schedule``, ``--warmup``: :func:`lectures_lib.training.lr_schedule`)
and seed, and reports:

* held-out accuracy (the query position's prediction), chance ``1 / n_values``;
* training steps per second (the median step time over the timed steps; wall-clock, so noisy on
  a shared machine: the JSON keeps the load average, and ``--retime`` replaces it by a timing of
  every stored variant together);
* peak tensor memory of one forward + backward on one batch, measured with
  :func:`lectures_lib.measure.peak_tensor_memory` (every tensor created; not a formula).

The variants come from the registries: full attention (fused kernel and explicit N x N), then
every class of ``lectures_lib.variants.VARIANTS`` (the content-blind baseline
:class:`~lectures_lib.variants.UniformAttention` included) and of ``variants.ATTENTION_FREE``
(FNet's :class:`~lectures_lib.variants.FourierMixing`), each built with its defaults (plus
``seq_len`` where it needs one; ``SETTINGS`` names them, gives their family and overrides a few
defaults to fit the task). A variant added to a registry appears here without editing this file.

Why the budget matters at N = 512 (the recipe in ``benchmarks/README.md``): the query must match
the key (content) *and* prefer the first half (position), and neither alone helps: the pairs of
the query's key hold every value once (content alone is at chance), and attention spread over the
first half holds the four true pairs among ~250 fillers (a weak signal, falling like 1/N). Both
must be learnt from weak, 1/N-diluted gradients, through the low-frequency sinusoidal features
that tell the halves apart: a plateau near chance for a few hundred steps of 32, then a rise.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import seed_everything, variants  # noqa: E402
from lectures_lib.attention import MultiHeadAttention  # noqa: E402
from lectures_lib.data import (  # noqa: E402
    binding_task,
    binding_vocab_size,
    retrieval_task,
    retrieval_vocab_size,
)
from lectures_lib.measure import peak_tensor_memory  # noqa: E402
from lectures_lib.models import EncoderTagger  # noqa: E402
from lectures_lib.training import cross_entropy, evaluate, lr_schedule  # noqa: E402

HERE = Path(__file__).resolve().parent


class ExplicitFullAttention(MultiHeadAttention):
    """Full attention that always takes the explicit path (stores the N x N weights), as a learner
    writes it; ``MultiHeadAttention`` itself uses PyTorch's fused kernel when no weights are
    asked for, and on a CPU that kernel (flash attention) never stores N x N either."""

    def attend(self, q, k, v, mask, need_weights):
        return super().attend(q, k, v, mask, True)


# Display name, family (the lecture's taxonomy) and settings that differ from the class defaults.
SETTINGS = {
    "MultiHeadAttention": ("full (fused kernel)", "full", {}),
    "ExplicitFullAttention": ("full (explicit N x N)", "full", {}),
    "UniformAttention": ("uniform average (2 layers)", "baseline", {}),
    "LocalAttention": ("local", "human knowledge", {}),
    "LongformerAttention": ("Longformer", "human knowledge", {}),
    "BigBirdAttention": ("Big Bird", "human knowledge", {}),
    "LSHAttention": ("LSH (bucket mask)", "clustering", {}),
    "ReformerAttention": ("Reformer (sorted chunks)", "clustering", {"n_buckets": 32}),
    "RoutingAttention": ("Routing (k-means)", "clustering", {}),
    "BalancedRoutingAttention": ("Routing (balanced)", "clustering", {}),
    "SinkhornAttention": ("Sinkhorn", "learned pattern", {"block_size": 32}),
    "LinformerAttention": ("Linformer", "representative keys", {"k": 64}),
    "CompressedAttention": ("compressed (conv)", "representative keys", {"stride": 8}),
    "LinearAttention": ("linear (elu+1)", "kernel", {}),
    "PerformerAttention": ("Performer", "kernel", {}),
    "EfficientAttention": ("Efficient Attention", "kernel", {}),
    "DenseSynthesizerAttention": ("Synthesizer (dense)", "no q.k", {}),
    "RandomSynthesizerAttention": ("Synthesizer (random)", "no q.k", {}),
    "FourierMixing": ("FNet (Fourier)", "no attention", {}),
    "LinformerPaper": ("Linformer (k = 256, the paper's)", "representative keys", {"k": 256}),
    "CompressedPaper": ("compressed (stride 3, the paper's)", "representative keys", {"stride": 3}),
    "LongformerOnQuery": ("Longformer (global on the query)", "human knowledge", {}),
    "BigBirdOnQuery": ("Big Bird (global on the query)", "human knowledge", {}),
}


class LongformerOnQuery(variants.LongformerAttention):
    """Longformer with its global token on the query (the last position), as Longformer's paper
    puts global attention on the question tokens (QA) or on ``[CLS]``; the registry's class
    keeps its default (position 0). Runs only when named (``--only LongformerOnQuery``)."""

    def __init__(self, d_model, num_heads, dropout=0.0, *, seq_len: int, **options):
        super().__init__(d_model, num_heads, dropout, global_positions=(seq_len - 1,), **options)


class BigBirdOnQuery(variants.BigBirdAttention):
    """Big Bird with its global token on the query (the last position); see LongformerOnQuery."""

    def __init__(self, d_model, num_heads, dropout=0.0, *, seq_len: int, **options):
        super().__init__(d_model, num_heads, dropout, global_positions=(seq_len - 1,), **options)


class LinformerPaper(variants.LinformerAttention):
    """Linformer as its paper runs it at N = 512: k = 256 projected keys (Wang et al. 2020, the
    settings of ``SETTINGS``), where the picture's row uses k = 64. Runs only when named."""


class CompressedPaper(variants.CompressedAttention):
    """Memory-compressed attention as its paper runs it: a convolution of kernel and stride 3
    (Liu et al. 2018), where the picture's row uses 8. Runs only when named."""


#: Configurations run only when named by ``--only`` (kept out of the default picture, whose rows
#: are one per registered class): the binding task's query is its last position.
EXTRA = {"LongformerOnQuery": LongformerOnQuery, "BigBirdOnQuery": BigBirdOnQuery,
         "LinformerPaper": LinformerPaper, "CompressedPaper": CompressedPaper}


def discover(extra: dict | None = None) -> list[tuple[str, type]]:
    """``(class name, class)`` for full attention (both paths) and every class of the registries
    ``variants.VARIANTS`` and ``variants.ATTENTION_FREE``, in ``SETTINGS`` order; a class listed
    there and not here runs too, under its class name, family "other". ``extra``: more
    ``{name: class}`` (e.g. :data:`EXTRA`), after them."""
    found = {"MultiHeadAttention": MultiHeadAttention, "ExplicitFullAttention": ExplicitFullAttention}
    for cls in (*variants.VARIANTS, *variants.ATTENTION_FREE):
        found[cls.__name__] = cls
    found.update(extra or {})
    order = [name for name in SETTINGS if name in found] + [name for name in found if name not in SETTINGS]
    return [(name, found[name]) for name in order]


def factory_for(cls: type, seq_len: int, overrides: dict):
    parameters = inspect.signature(cls).parameters
    settings = {key: value for key, value in overrides.items() if key in parameters}
    if "seq_len" in parameters:
        settings["seq_len"] = seq_len

    def factory(d_model, num_heads, dropout):
        return cls(d_model, num_heads, dropout, **settings)

    return factory


def last_position(model, batch):
    tokens, labels = batch
    return model(tokens)[:, -1], labels  # the query's logits


def make_task(name: str, n_examples: int, seq_len: int, seed: int):
    if name == "binding":
        return binding_task(n_examples, seq_len, seed=seed), binding_vocab_size(), 4
    return retrieval_task(n_examples, seq_len, seed=seed), retrieval_vocab_size(), 4


def build_model(factory, args, vocab, n_labels) -> EncoderTagger:
    seed_everything(args.seed)
    return EncoderTagger(vocab, n_labels, d_model=args.d_model, num_heads=args.heads,
                         num_layers=args.layers, d_ff=2 * args.d_model, max_len=args.seq_len,
                         attention=factory)


def train_step(model, optimizer, batch) -> tuple[torch.Tensor, float]:
    """One optimiser step on ``batch``; returns the loss and the step's wall-clock seconds."""
    start = time.perf_counter()
    logits, labels = last_position(model, batch)
    loss = cross_entropy(logits, labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss, time.perf_counter() - start


def run_variant(factory, args, train, test, vocab, n_labels) -> dict:
    model = build_model(factory, args, vocab, n_labels)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    scheduler = lr_schedule(optimizer, args.steps, args.schedule, args.warmup)
    generator = torch.Generator().manual_seed(args.seed)
    step_times = []
    model.train()
    for _ in range(args.steps):
        idx = torch.randint(0, train[0].shape[0], (args.batch_size,), generator=generator)
        loss, seconds = train_step(model, optimizer, (train[0][idx], train[1][idx]))
        scheduler.step()
        step_times.append(seconds)
        if not torch.isfinite(loss):
            break
    accuracy = evaluate(model, test, forward_fn=last_position)
    batch = (train[0][: args.batch_size], train[1][: args.batch_size])

    def forward_backward():
        logits, labels = last_position(model, batch)
        cross_entropy(logits, labels).backward()

    memory = peak_tensor_memory(forward_backward)
    step_s = sorted(step_times)[len(step_times) // 2]
    return {
        "accuracy": accuracy,
        "steps_per_s": 1.0 / step_s,
        "tokens_per_s": args.batch_size * args.seq_len / step_s,
        "peak_mib": memory.peak_bytes / 2**20,
        "load_average": os.getloadavg()[0],
    }


def retime(results: dict, args, train, vocab, n_labels, rounds: int = 3, steps: int = 5) -> None:
    """Time a training step of every stored variant again, in this one process, so that the x axis
    compares like with like: the training runs' medians were taken under whatever else the shared
    machine ran. Round-robin (``rounds`` times ``steps`` timed steps of each variant, after one
    warm-up step), so a change of load hits every variant alike; the median of all of them. The
    models are at their initial weights: for LSH and nearest-centroid Routing, whose cost depends
    on how balanced their clusters are, the training run's median is kept beside it."""
    found = dict(discover(EXTRA))
    models = {}
    for label, row in results["rows"].items():
        overrides = SETTINGS.get(row["cls"], (label, "other", {}))[2]
        model = build_model(factory_for(found[row["cls"]], args.seq_len, overrides), args, vocab,
                            n_labels)
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)  # the cost of a step, no learning
        models[label] = (model.train(), optimizer, [])
    batch = (train[0][: args.batch_size], train[1][: args.batch_size])
    for model, optimizer, _ in models.values():
        train_step(model, optimizer, batch)  # warm-up
    for _ in range(rounds):
        for model, optimizer, times in models.values():
            times.extend(train_step(model, optimizer, batch)[1] for _ in range(steps))
    load = os.getloadavg()[0]
    for label, (_, _, times) in models.items():
        row = results["rows"][label]
        step_s = sorted(times)[len(times) // 2]
        row.setdefault("training_steps_per_s", row["steps_per_s"])
        row.setdefault("training_load_average", row["load_average"])
        row.update(steps_per_s=1.0 / step_s, tokens_per_s=args.batch_size * args.seq_len / step_s,
                   load_average=load, timed="retimed together, initial weights")
        print(f"| {label} | {row['training_steps_per_s']:.2f} (load "
              f"{row['training_load_average']:.1f}) | {row['steps_per_s']:.2f} |", flush=True)


def store(results: dict, path: Path) -> dict:
    """Write ``results`` to ``path``, keeping the rows another run (``--only`` in a second
    process) stored there meanwhile under the same settings (seed 0's ``rows`` and the other
    seeds' ``seed_rows``); returns what was written."""
    if path.exists():
        stored = json.loads(path.read_text())
        if stored.get("settings") == results["settings"]:
            seed_rows = {label: {**stored.get("seed_rows", {}).get(label, {}), **by_seed}
                         for label, by_seed in results.get("seed_rows", {}).items()}
            results = {**results, "rows": {**stored["rows"], **results["rows"]},
                       "seed_rows": {**stored.get("seed_rows", {}), **seed_rows}}
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(results, indent=1) + "\n")
    temporary.replace(path)  # atomic: a reader never sees half a file
    return results


def settings_of(args) -> dict:
    keys = ("task", "seq_len", "n_train", "n_test", "steps", "batch_size", "lr", "schedule", "warmup",
            "d_model", "heads", "layers", "seed")
    return {key: getattr(args, key) for key in keys}


def accuracies(results: dict, label: str) -> list[float]:
    """Every stored seed's accuracy of ``label``: the ``rows`` run (model seed = ``--seed``),
    then the ``--model-seeds`` runs (``seed_rows``, same data)."""
    return [results["rows"][label]["accuracy"],
            *(row["accuracy"] for row in results.get("seed_rows", {}).get(label, {}).values())]


def seed_accuracies(results: dict, label: str) -> dict[int, float]:
    """``{seed: accuracy}`` of ``label``, in seed order: the ``rows`` run (seed ``--seed``) and the
    ``--model-seeds`` runs (``seed_rows``)."""
    runs = {results["settings"]["seed"]: results["rows"][label]["accuracy"]}
    runs.update({int(seed): row["accuracy"]
                 for seed, row in results.get("seed_rows", {}).get(label, {}).items()})
    return dict(sorted(runs.items()))


def query_only_ceiling(test) -> float:
    """The best accuracy on ``test`` (the binding task) of answers read from the query alone,
    each key's answer chosen *after* seeing the labels (its most frequent value there). Every
    pair token occurs once in every sequence, so no content-blind guess does better on these
    sequences: a run at or below it has shown nothing more (07 section 7 computes the same)."""
    tokens, labels = test
    asked = tokens[:, -1]  # (n_test,): the query token, i.e. the key asked for
    best = sum(int(labels[asked == key].bincount().max()) for key in asked.unique())
    return best / len(labels)


def task_ceiling(task: str, test) -> float | None:
    """:func:`query_only_ceiling` for the binding task, whose query is asked at the end; ``None``
    (no ceiling drawn) for another task."""
    return query_only_ceiling(test) if task == "binding" else None


def markdown(results: dict, chance: float, ceiling: float) -> str:
    """The README's table of the stored picture, every seed of every row (best mean first), and
    the lines below it, all read from ``results``; ``chance`` and ``ceiling``
    (:func:`query_only_ceiling`) come from the task."""
    rows = results["rows"]
    runs = {label: seed_accuracies(results, label) for label in rows}
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed})
    mean = {label: sum(by_seed.values()) / len(by_seed) for label, by_seed in runs.items()}
    above = {label: [s for s, a in by_seed.items() if a > ceiling] for label, by_seed in runs.items()}
    lines = ["| attention | family | " + " | ".join(f"seed {s}" for s in seeds)
             + " | mean | seeds above the ceiling | steps / s (together) | peak memory (MiB) |",
             "|---|---|" + "---:|" * (len(seeds) + 4)]
    for label in sorted(rows, key=lambda name: -mean[name]):
        row = rows[label]
        accuracy = " | ".join(f"{runs[label][s]:.3f}" if s in runs[label] else "-" for s in seeds)
        lines.append(f"| {label} | {row['family']} | {accuracy} | {mean[label]:.3f} | "
                     f"{len(above[label])} of {len(runs[label])} | {row['steps_per_s']:.2f} | "
                     f"{row['peak_mib']:.1f} |")
    full = [a for label, row in rows.items() if row["family"] == "full" for a in runs[label].values()]
    some = [f"{label} ({', '.join(f'{runs[label][s]:.3f}' for s in above[label])} on seed "
            f"{', '.join(map(str, above[label]))})"
            for label in rows if 0 < len(above[label]) < len(runs[label])]
    never = [label for label in rows if not above[label]]
    lines += [
        "",
        f"Chance {chance:.3f}; the best answers read from the query alone reach {ceiling:.3f} on "
        f"these {results['settings']['n_test']} held-out sequences (the ceiling). Full "
        f"attention's {len(full)} runs (both kernels) span {min(full):.3f}-{max(full):.3f}. Above "
        f"the ceiling on some seeds only: {'; '.join(some) or 'none'}. At or below it on every "
        f"seed ({len(never)}): {', '.join(never)}.",
    ]
    return "\n".join(lines)


#: The picture draws Longformer and Big Bird as their papers use them, with the global token on the
#: task's question (the query): these rows of ``long_range_global_on_query.json`` replace the
#: registry's (global token at position 0) when that file holds them under the same settings.
ON_QUERY = {"Longformer": "Longformer (global on the query)",
            "Big Bird": "Big Bird (global on the query)"}


def closing_picture(results: dict, on_query: Path = HERE / "long_range_global_on_query.json") -> dict:
    """``results`` with the rows of :data:`ON_QUERY` taken from ``on_query`` (their accuracies,
    every seed) at the registry rows' cost (speed and memory: the same masks, the global token
    elsewhere); unchanged when that file is absent or was run with other settings."""
    if not on_query.exists():
        return results
    other = json.loads(on_query.read_text())
    if other.get("settings") != results["settings"]:
        return results
    rows, seed_rows = {}, {}
    for label, row in results["rows"].items():
        moved = ON_QUERY.get(label)
        if moved in other["rows"]:
            rows[moved] = {**row, "accuracy": other["rows"][moved]["accuracy"],
                           "cls": other["rows"][moved]["cls"]}
            seed_rows[moved] = other.get("seed_rows", {}).get(moved, {})
        else:
            rows[label] = row
            seed_rows[label] = results.get("seed_rows", {}).get(label, {})
    return {**results, "rows": rows, "seed_rows": seed_rows}


def plot(results: dict, path: Path, ceiling: float | None = None) -> None:
    """The picture: one marker per variant (area ~ peak memory) at the mean of its seeds, a line
    from the worst seed to the best and a tick at each, numbered; the numbers are listed beside
    the axes (so that close markers never hide each other's names). ``ceiling``
    (:func:`query_only_ceiling` of the held-out set) is drawn as a dashed line. Longformer and
    Big Bird are drawn with the global token on the query (:func:`closing_picture`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = closing_picture(results)
    settings, rows = results["settings"], results["rows"]
    families = list(dict.fromkeys(row["family"] for row in rows.values()))
    colours = dict(zip(families, plt.cm.tab10.colors, strict=False))
    fig, (ax, key) = plt.subplots(1, 2, figsize=(10.8, 5.5), gridspec_kw={"width_ratios": [2.2, 1]})
    biggest = max(row["peak_mib"] for row in rows.values())
    for number, (label, row) in enumerate(rows.items(), start=1):
        seen = accuracies(results, label)
        x, y = row["steps_per_s"], sum(seen) / len(seen)  # the mean over the stored seeds
        ax.scatter(x, y, s=20 + 600 * row["peak_mib"] / biggest, color=colours[row["family"]],
                   alpha=0.45, edgecolors="black", linewidths=0.5)
        if len(seen) > 1:  # the spread over seeds: min to max, and every seed's run as a dot
            ax.plot([x, x], [min(seen), max(seen)], color=colours[row["family"]], linewidth=1.2)
            ax.scatter([x] * len(seen), seen, s=9, color=colours[row["family"]], marker="_",
                       linewidths=1.5, zorder=3)
        ax.annotate(str(number), (x, y), fontsize=7, ha="center", va="center")
        spread = f" ({min(seen):.2f}-{max(seen):.2f}, {len(seen)} seeds)" if len(seen) > 1 else ""
        key.text(0.0, 0.99 - 0.029 * (number - 1), f"{number:2d}  {label}: {y:.2f}{spread}, "
                 f"{row['peak_mib']:.0f} MiB",
                 color=colours[row["family"]], fontsize=7.5,
                 va="center", transform=key.transAxes)
    key.axis("off")
    for family, colour in colours.items():
        ax.scatter([], [], color=colour, label=family, s=30)
    ax.axhline(0.25, color="grey", linestyle=":", label="chance")
    if ceiling is not None:
        ax.axhline(ceiling, color="black", linestyle="--", linewidth=0.8,
                   label=f"ceiling {ceiling:.3f}: the best answers from the query alone")
    ax.set_xscale("log")
    together = all(row.get("timed") for row in rows.values())  # --retime: one process, one load
    ax.set_xlabel("training steps per second (log scale; higher = faster"
                  + ("; all timed together, one thread)" if together else ")"))
    ax.set_ylabel("held-out accuracy (marker: mean over seeds; ticks: each seed)")
    ax.set_ylim(0, 1.05)
    width = f"d_model {settings['d_model']}, " if "d_model" in settings else ""
    ax.set_title(f"{settings['task']} task, N = {settings['seq_len']}, {settings['layers']} layers, "
                 f"{width}{settings['steps']} steps of "
                 f"{settings['batch_size']}\none CPU thread; marker area ~ peak memory", fontsize=9)
    handles, names = ax.get_legend_handles_labels()
    key.legend(handles, names, loc="lower left", fontsize=7, frameon=False)  # families, below the key
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


SWEEP_VARIANTS = {
    "full": ("MultiHeadAttention", {}),
    "uniform average": ("UniformAttention", {}),
    "Synthesizer (random)": ("RandomSynthesizerAttention", {}),
    "Linformer (k = 8)": ("LinformerAttention", {"k": 8}),
}
#: Run only when named by ``--variants``: the content-comparing models at chance at N = 512 with 4x
#: the steps, swept over N to see where they stop learning (07 section 7, issue 31).
SWEEP_EXTRA = {
    "compressed (conv)": ("CompressedAttention", {"stride": 8}),
    "linear (elu+1)": ("LinearAttention", {}),
}


def sweep_settings(args, task: str) -> dict:
    """What a sweep row of ``task`` depends on (stored beside the rows)."""
    settings = {"steps": args.steps, "batch_size": args.batch_size, "lr": args.lr,
                "schedule": args.schedule, "n_train": args.n_train, "n_test": args.n_test,
                "layers": args.layers if task == "binding" else 1,
                "d_model": 32, "num_heads": 2, "d_ff": 64, "grad_clip": 1.0}
    if args.schedule != "constant":
        settings["warmup"] = args.warmup
    return settings


def sweep(args) -> None:
    """Accuracy against N, every (task, variant, N, seed) one row of ``args.sweep_json``."""
    found = dict(discover())
    path = args.sweep_json
    results = json.loads(path.read_text()) if path.exists() else {}
    settings = results.setdefault("settings", {})
    if "steps" in settings:  # the older layout: one block for both tasks, layers per task
        settings = results["settings"] = {
            task: {**{k: v for k, v in settings.items() if k != "layers"},
                   "layers": settings["layers"][task]}
            for task in settings["layers"]}
    rows = results.setdefault("rows", [])
    for task in args.tasks:
        wanted = sweep_settings(args, task)
        if not (args.resume and settings.get(task) == wanted):  # rows of other settings go
            rows[:] = [r for r in rows if r["task"] != task]
        settings[task] = wanted
    done = {(r["task"], r["variant"], r["seq_len"], r["seed"]) for r in rows}
    known = {**SWEEP_VARIANTS, **SWEEP_EXTRA}
    variants_run = {label: known[label] for label in (args.variants or SWEEP_VARIANTS)}
    for task in args.tasks:
        for seq_len in args.seq_lens:
            train, vocab, n_labels = make_task(task, args.n_train, seq_len, seed=0)
            test = make_task(task, args.n_test, seq_len, seed=1)[0]
            for label, (name, overrides) in variants_run.items():
                for seed in args.seeds:
                    if (task, label, seq_len, seed) in done:
                        continue
                    run_args = argparse.Namespace(**vars(args))
                    run_args.seq_len, run_args.seed = seq_len, seed
                    run_args.layers = settings[task]["layers"]
                    row = run_variant(factory_for(found[name], seq_len, overrides), run_args,
                                      train, test, vocab, n_labels)
                    rows.append({"task": task, "variant": label, "seq_len": seq_len,
                                 "seed": seed, "accuracy": row["accuracy"]})
                    temporary = path.with_suffix(".tmp")
                    temporary.write_text(json.dumps(results, indent=1) + "\n")
                    temporary.replace(path)  # atomic: an interrupted run keeps the file whole
                    print(f"{task} N={seq_len} {label} seed {seed}: {row['accuracy']:.3f}",
                          flush=True)


def more_seeds(args, results: dict, train, test, vocab, n_labels) -> None:
    """Train every stored variant again with each of ``args.model_seeds`` (model initialisation
    and batch order; the data of ``--seed``), one (variant, seed) at a time, seed by seed; each
    row is stored as soon as it finishes (``seed_rows[label][seed]``), so a rerun resumes."""
    from tqdm import tqdm

    found = dict(discover(EXTRA))
    todo = [(seed, label) for seed in args.model_seeds for label, row in results["rows"].items()
            if row["cls"] in found and (not args.only or row["cls"] in args.only)
            and row["cls"] not in args.skip
            and str(seed) not in results.get("seed_rows", {}).get(label, {})]
    progress = tqdm(todo, unit="run", mininterval=30, file=sys.stdout)
    for seed, label in progress:
        row = results["rows"][label]
        progress.set_description(f"{label} / seed {seed}")
        overrides = SETTINGS.get(row["cls"], (label, "other", {}))[2]
        run_args = argparse.Namespace(**vars(args))
        run_args.seed = seed
        start = time.perf_counter()
        try:
            new = run_variant(factory_for(found[row["cls"]], args.seq_len, overrides), run_args,
                              train, test, vocab, n_labels)
        except Exception as error:  # noqa: BLE001 - one broken variant must not stop the others
            tqdm.write(f"{label} / seed {seed}: failed: {type(error).__name__}: {error}")
            continue
        new["train_seconds"] = time.perf_counter() - start
        results.setdefault("seed_rows", {}).setdefault(label, {})[str(seed)] = new
        results.update(store(results, args.json))
        seen = accuracies(results, label)
        tqdm.write(f"{label} / seed {seed}: accuracy {new['accuracy']:.3f} ({len(seen)} seeds: "
                   f"{min(seen):.3f} ... {max(seen):.3f}), {new['train_seconds']:.0f} s",
                   file=sys.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("binding", "retrieval"), default="binding")
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--n-train", type=int, default=4096)
    parser.add_argument("--n-test", type=int, default=1024)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3, help="peak learning rate")
    parser.add_argument("--schedule", choices=("warmup_cosine", "one_cycle", "constant"),
                        default="constant", help="lectures_lib.training.lr_schedule")
    parser.add_argument("--warmup", type=float, default=0.1, help="warm-up fraction of --steps")
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model-seeds", nargs="*", type=int, default=[],
                        help="more seeds of the model and the batch order (the data stay those of "
                             "--seed), stored as seed_rows beside the --seed rows; with --resume "
                             "the (variant, seed) already stored are skipped")
    parser.add_argument("--only", nargs="*", help="class names to run (default: all found)")
    parser.add_argument("--skip", nargs="*", default=[], help="class names not to run")
    parser.add_argument("--json", type=Path, default=HERE / "long_range.json")
    parser.add_argument("--plot", type=Path, default=HERE / "long_range.png")
    parser.add_argument("--resume", action="store_true", help="keep stored rows of these settings")
    parser.add_argument("--plot-only", action="store_true", help="redraw the plot from --json")
    parser.add_argument("--markdown", action="store_true",
                        help="print the README's table of every seed from --json (trains nothing)")
    parser.add_argument("--retime", action="store_true",
                        help="time every stored variant again, together (needs the same settings)")
    parser.add_argument("--sweep", action="store_true", help="accuracy against N instead")
    parser.add_argument("--tasks", nargs="*", default=["binding", "retrieval"])
    parser.add_argument("--seq-lens", nargs="*", type=int, default=[32, 64, 128, 256])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1])
    parser.add_argument("--sweep-json", type=Path, default=HERE / "long_range_sweep.json")
    parser.add_argument("--variants", nargs="*", choices=[*SWEEP_VARIANTS, *SWEEP_EXTRA],
                        help="sweep only these (default: the first four; compressed and linear only "
                             "when named)")
    args = parser.parse_args()
    torch.set_num_threads(1)  # one thread per process: the timings and the shared machine
    if args.sweep:
        sweep(args)
        return

    if args.plot_only or args.markdown:  # the stored settings' held-out set: chance, ceiling
        stored = json.loads(args.json.read_text())
        s = stored["settings"]
        test = make_task(s["task"], s["n_test"], s["seq_len"], seed=s["seed"] + 1)[0]
        if args.plot_only:
            plot(stored, args.plot, task_ceiling(s["task"], test))
        else:
            print(markdown(stored, 1 / len(test[1].unique()), query_only_ceiling(test)))
        return
    settings = settings_of(args)
    results = {"settings": settings, "rows": {}}
    if (args.resume or args.model_seeds) and args.json.exists():
        stored = json.loads(args.json.read_text())
        if stored.get("settings") == settings:
            results = stored
    results["environment"] = (f"torch {torch.__version__}, {platform.machine()}, one thread, "
                              f"{os.cpu_count()} cores (shared)")
    seed_everything(args.seed)
    (train, vocab, n_labels) = make_task(args.task, args.n_train, args.seq_len, seed=args.seed)
    test = make_task(args.task, args.n_test, args.seq_len, seed=args.seed + 1)[0]
    if args.retime:
        if not results["rows"]:
            parser.error("--retime needs stored rows of these settings (and --resume)")
        print("| attention | steps / s while training | steps / s, retimed together |")
        print("|---|---:|---:|")
        retime(results, args, train, vocab, n_labels)
        store(results, args.json)
        plot(results, args.plot, task_ceiling(args.task, test))
        return
    print(f"# {args.task}, seq_len={args.seq_len}, d_model={args.d_model}, {args.heads} heads, "
          f"{args.layers} layers, {args.steps} steps of {args.batch_size}, lr={args.lr} "
          f"({args.schedule}, warm-up {args.warmup}); {results['environment']}; chance 0.25")
    if args.model_seeds:
        more_seeds(args, results, train, test, vocab, n_labels)
        if args.plot:
            plot(results, args.plot, task_ceiling(args.task, test))
        return
    print("| attention | family | accuracy | steps / s | peak memory (MiB) |")
    print("|---|---|---:|---:|---:|")
    named = {name: cls for name, cls in EXTRA.items() if args.only and name in args.only}
    for name, cls in discover(named):
        if (args.only and name not in args.only) or name in args.skip:
            continue
        label, family, overrides = SETTINGS.get(name, (name, "other", {}))
        if label in results["rows"]:
            continue
        try:
            row = run_variant(factory_for(cls, args.seq_len, overrides), args, train, test, vocab,
                              n_labels)
        except Exception as error:  # noqa: BLE001 - one broken variant must not stop the others
            print(f"| {label} | {family} | failed: {type(error).__name__}: {error} | | |", flush=True)
            continue  # nothing stored: --resume runs it again
        row.update(family=family, cls=name)
        results["rows"][label] = row
        results = store(results, args.json)
        print(f"| {label} | {family} | {row['accuracy']:.3f} | {row['steps_per_s']:.2f} | "
              f"{row['peak_mib']:.1f} |", flush=True)
    if args.plot:
        plot(results, args.plot, task_ceiling(args.task, test))
        print(f"# plot saved to {args.plot}")


if __name__ == "__main__":
    main()
