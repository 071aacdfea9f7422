"""The sweep behind ``fit``'s default recipe: schedule, peak learning rate and warm-up.

Run it with ``python benchmarks/schedule_sweep.py`` (``--markdown`` for the table of
``benchmarks/README.md``; ``--seeds 0 1 2``). Not part of the tests. Each setting trains the two
peer tasks of :mod:`peer_tasks` (copy: default ``Transformer``, 300 fresh batches of 80;
reversal: default ``EncoderTagger``, batches of 128 from 50 000 sequences, one planned epoch,
stopped after ``--reversal-steps`` steps) and reports the optimiser steps to 99 % and 99.9 %
(greedy exact match for copy, held-out per-token accuracy for reversal), worst over the seeds.
Everything else is ``fit``'s default (AdamW, no weight decay, gradient norm clipped at 1).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peer_tasks import TARGETS, copy_run, reversal_run  # noqa: E402

SETTINGS = [
    {"schedule": "constant", "lr": 1e-3},  # fit's old default
    {"schedule": "constant", "lr": 3e-3},
    {"schedule": "warmup_cosine", "lr": 1e-3, "warmup": 0.1},
    {"schedule": "warmup_cosine", "lr": 3e-3, "warmup": 0.1},
    {"schedule": "warmup_cosine", "lr": 5e-3, "warmup": 0.1},
    {"schedule": "warmup_cosine", "lr": 3e-3, "warmup": 0.03},
    {"schedule": "warmup_cosine", "lr": 3e-3, "warmup": 0.3},
    {"schedule": "one_cycle", "lr": 3e-3, "warmup": 0.1},
    {"schedule": "warmup_cosine", "lr": 5e-3, "warmup": 0.05},
]


def _worst(runs, target):
    steps = [r.reached.get(target) for r in runs]
    return None if any(s is None for s in steps) else max(s[0] for s in steps)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--reversal-steps", type=int, default=200)
    parser.add_argument("--settings", type=int, nargs="+", help="indices into SETTINGS")
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    chosen = [SETTINGS[i] for i in args.settings] if args.settings else SETTINGS
    rows = []
    for setting in chosen:
        copies = [copy_run(seed, **setting) for seed in args.seeds]
        reversals = [reversal_run(seed, max_steps=args.reversal_steps, **setting)
                     for seed in args.seeds]
        cells = [str(_worst(runs, t) or "not reached") for runs in (copies, reversals)
                 for t in TARGETS]
        label = ", ".join(f"{k} {v:g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in setting.items())
        finals = f"{min(r.final_metric for r in copies):.4f}"
        rows.append((label, *cells, finals))
        print("  " + " | ".join(rows[-1]), file=sys.stderr, flush=True)
    header = ("setting", "copy: steps to 99%", "copy: steps to 99.9%", "reversal: steps to 99%",
              "reversal: steps to 99.9%", "copy: exact match after 300 steps (worst seed)")
    print(f"seeds {args.seeds}; worst seed shown; evaluated every 10 steps")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|---|" + "---:|" * (len(header) - 1))
    for row in rows:
        print("| " + " | ".join(row) + " |" if args.markdown else "  ".join(row))


if __name__ == "__main__":
    main()
