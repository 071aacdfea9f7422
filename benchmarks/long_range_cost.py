"""The cost of every row of the long-range picture against N: the LRA's speed and memory table
(Tay et al. 2021, Table 2), on this CPU, with no training.

For every row of ``long_range.py`` (full attention on the fused kernel and on the explicit N x N
path, then every class of ``lectures_lib.variants.VARIANTS`` and ``variants.ATTENTION_FREE``, with
the picture's settings: ``long_range.SETTINGS``) and every N of ``--sizes`` (default 1024, 2048,
4096), the script builds the picture's model (``EncoderTagger``, d_model 32, 2 heads, 2 layers) at
that length and measures one training step (forward, backward, clipping and the optimiser, on a
batch of ``--batch-size`` binding-task sequences):

* **time**: the median of ``--repeats`` steps after one warm-up step, all rows of one N in one
  process, round-robin (so a change of load hits every row alike), on one thread; ``--clock cpu``
  (default) counts this thread's CPU time, the least disturbed by other jobs on a shared machine;
* **peak memory**: :func:`lectures_lib.measure.peak_tensor_memory` of one forward + backward
  (every tensor created, measured, not computed). PyTorch's fused kernel keeps its scratch
  memory inside one call; what it allocates as tensors is counted.

The models are at their initial weights (learning rate 0): the cost of a step, not of learning;
the cost of LSH and k-means Routing depends on how balanced their clusters are, so theirs is the
cost at initialisation. A row whose step raises (e.g. out of memory) is stored with its error.
Results go to ``--json`` (default ``benchmarks/long_range_cost.json``), with the ratios against
both baselines (``speed`` = baseline step time / row's step time, as the LRA's table reports
steps per second relative to the Transformer; ``memory`` = row's peak / baseline's peak).
``07_efficient_attention.ipynb`` (section 7) reads it. The stored run::

    nice -n 10 .venv/bin/python benchmarks/long_range_cost.py

``--markdown`` prints the table from the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # long_range.py, beside this file
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

import long_range  # noqa: E402

from lectures_lib.data import binding_task, binding_vocab_size  # noqa: E402
from lectures_lib.measure import peak_tensor_memory  # noqa: E402
from lectures_lib.training import cross_entropy  # noqa: E402

HERE = Path(__file__).resolve().parent
BASELINES = ("full (fused kernel)", "full (explicit N x N)")
CLOCKS = {"wall": time.perf_counter, "cpu": time.thread_time}


def step(model, optimizer, batch, clock) -> float:
    """One training step (as ``long_range.train_step``); its seconds on ``clock``."""
    start = clock()
    logits, labels = long_range.last_position(model, batch)
    loss = cross_entropy(logits, labels)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return clock() - start


def measure(seq_len: int, args) -> dict:
    """Every row's step time and peak memory at ``seq_len``, round-robin over the rows."""
    clock = CLOCKS[args.clock]
    tokens, labels = binding_task(args.batch_size, seq_len, seed=0)
    batch = (tokens, labels)
    model_args = argparse.Namespace(seed=0, d_model=args.d_model, heads=args.heads,
                                    layers=args.layers, seq_len=seq_len)
    rows, models = {}, {}
    for name, cls in long_range.discover():
        label, family, overrides = long_range.SETTINGS.get(name, (name, "other", {}))
        try:
            model = long_range.build_model(long_range.factory_for(cls, seq_len, overrides),
                                           model_args, binding_vocab_size(), 4).train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=0.0)  # a step's cost, no learning

            def forward_backward(model=model):
                logits, target = long_range.last_position(model, batch)
                cross_entropy(logits, target).backward()

            peak = peak_tensor_memory(forward_backward).peak_bytes / 2**20
            first = step(model, optimizer, batch, clock)  # warm-up
        except Exception as error:  # noqa: BLE001 - one row's failure (memory) must not stop the rest
            rows[label] = {"family": family, "cls": name, "error": f"{type(error).__name__}: {error}"}
            print(f"N={seq_len} {label}: failed: {rows[label]['error']}", flush=True)
            continue
        rows[label] = {"family": family, "cls": name, "peak_mib": peak, "times": []}
        models[label] = (model, optimizer, first)
    for _ in range(args.repeats):
        for label, (model, optimizer, first) in models.items():
            if first > args.slow and rows[label]["times"]:
                continue  # a step slower than --slow seconds: one timed step is enough
            rows[label]["times"].append(step(model, optimizer, batch, clock))
    for row in rows.values():
        if "times" in row:
            times = sorted(row["times"])
            row["step_s"] = times[len(times) // 2]
    for label, row in rows.items():
        if "step_s" not in row:
            continue
        for base in BASELINES:
            if "step_s" in rows.get(base, {}):
                key = "fused" if "fused" in base else "explicit"
                row[f"speed_vs_{key}"] = rows[base]["step_s"] / row["step_s"]
                row[f"memory_vs_{key}"] = row["peak_mib"] / rows[base]["peak_mib"]
        print(f"N={seq_len} {label}: {row['step_s']:.3f} s, {row['peak_mib']:.1f} MiB", flush=True)
    return rows


def markdown(results: dict) -> str:
    sizes = [str(n) for n in results["settings"]["sizes"]]
    lines = ["| attention | family | "
             + " | ".join(f"N = {n}: s / step (x fused, x explicit)" for n in sizes)
             + " | " + " | ".join(f"N = {n}: MiB (x fused)" for n in sizes) + " |",
             "|---|---|" + "---:|" * (2 * len(sizes))]
    labels = list(results["rows"][sizes[0]])
    for label in labels:
        cells_t, cells_m = [], []
        for n in sizes:
            row = results["rows"][n].get(label, {})
            if "step_s" not in row:
                cells_t.append("failed")
                cells_m.append("-")
                continue
            cells_t.append(f"{row['step_s']:.3f} ({row.get('speed_vs_fused', 0):.2f}x, "
                           f"{row.get('speed_vs_explicit', 0):.2f}x)")
            cells_m.append(f"{row['peak_mib']:.0f} ({row.get('memory_vs_fused', 0):.2f}x)")
        family = results["rows"][sizes[0]][label]["family"]
        lines.append(f"| {label} | {family} | " + " | ".join(cells_t) + " | " + " | ".join(cells_m)
                     + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--slow", type=float, default=20.0,
                        help="a row whose warm-up step takes longer is timed once")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu")
    parser.add_argument("--json", type=Path, default=HERE / "long_range_cost.json")
    parser.add_argument("--markdown", action="store_true", help="print the table from --json")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.json.read_text())))
        return
    torch.set_num_threads(1)
    settings = {key: getattr(args, key.replace("-", "_")) for key in
                ("sizes", "batch_size", "d_model", "heads", "layers", "repeats", "clock")}
    results = {"settings": settings,
               "environment": f"torch {torch.__version__}, {platform.machine()}, one thread, "
                              f"{os.cpu_count()} cores (shared), load {os.getloadavg()[0]:.1f}",
               "rows": {}}
    for seq_len in args.sizes:
        results["rows"][str(seq_len)] = measure(seq_len, args)
        temporary = args.json.with_suffix(".tmp")
        temporary.write_text(json.dumps(results, indent=1) + "\n")
        temporary.replace(args.json)  # an interrupted run keeps the sizes that finished
    print(markdown(results))


if __name__ == "__main__":
    main()
