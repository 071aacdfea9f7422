"""How long do the course's toy models train before they reach the quality the notebooks assert?

Run it with ``python benchmarks/training_speed.py`` (``--help`` for options); it is not part of
the tests. Each task is trained with exactly the recipe of its notebook, evaluated on its
held-out set after every epoch, and stopped at the first epoch that reaches the target:

* ``translation`` (``05_transformer_decoder.ipynb``, section 7): digits -> number words, a
  2+2-layer ``Transformer`` (d_model 64), batches of 64, AdamW with a one-cycle schedule planned
  for 3 epochs; target: exact match >= 0.999 with greedy decoding on the 1000 held-out numbers;
* ``reverse`` (``04_transformer_encoder.ipynb``, section 9): reverse a sequence of 10 tokens,
  a 2-layer ``EncoderTagger`` (d_model 32) trained like ``training.fit`` (constant learning
  rate); target: per-token accuracy >= 0.99 on 1000 held-out sequences.

Reported per task: the epochs needed, the training time to that point as wall-clock and as this
process's CPU time (evaluation excluded), the evaluation time, and the metric reached. The issue's
requirement for the translation: the target within 20 s of training on a 2-core CPU, one thread.
On a shared machine trust the CPU seconds more than the wall-clock ones.
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import seed_everything  # noqa: E402
from lectures_lib.data.sequences import sequence_task_splits  # noqa: E402
from lectures_lib.data.translation import (  # noqa: E402
    BOS_ID,
    EOS_ID,
    PAD_ID,
    make_translation_data,
)
from lectures_lib.decoding import exact_match, greedy_decode  # noqa: E402
from lectures_lib.training import cross_entropy, evaluate  # noqa: E402
from lectures_lib.transformer import EncoderTagger, Transformer  # noqa: E402

TASKS = ("translation", "reverse")


@dataclass
class Result:
    task: str
    target: str
    reached: bool
    epochs: int
    train_wall_s: float
    train_cpu_s: float
    eval_wall_s: float
    metric: float


def train_until(
    task: str,
    target_name: str,
    target: float,
    max_epochs: int,
    train_one_epoch: Callable[[int], None],
    evaluate_model: Callable[[], float],
    verbose: bool,
) -> Result:
    """Alternate one training epoch and one evaluation until ``evaluate_model() >= target``."""
    train_wall = train_cpu = eval_wall = 0.0
    metric = float("nan")
    for epoch in range(max_epochs):
        wall, cpu = time.perf_counter(), time.process_time()
        train_one_epoch(epoch)
        train_wall += time.perf_counter() - wall
        train_cpu += time.process_time() - cpu
        wall = time.perf_counter()
        metric = evaluate_model()
        eval_wall += time.perf_counter() - wall
        if verbose:
            print(f"  {task} epoch {epoch + 1}: {target_name} {metric:.4f} "
                  f"(training so far {train_cpu:.1f} s CPU)", file=sys.stderr)
        if metric >= target:
            return Result(task, f"{target_name} >= {target}", True, epoch + 1, train_wall,
                          train_cpu, eval_wall, metric)
    return Result(task, f"{target_name} >= {target}", False, max_epochs, train_wall, train_cpu,
                  eval_wall, metric)


def translation(device: torch.device, verbose: bool) -> Result:
    """The recipe of ``05_transformer_decoder.ipynb``, section 7 (keep the two in sync)."""
    epochs, batch_size, lr, target = 3, 64, 1.5e-3, 0.999
    seed_everything(0)
    data = make_translation_data(n_train=9000, n_test=1000, seed=0)
    seed_everything(0)
    model = Transformer(
        len(data.src_vocab), len(data.tgt_vocab), d_model=64, num_heads=4, num_encoder_layers=2,
        num_decoder_layers=2, d_ff=128, pad_id=PAD_ID,
    ).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    steps = epochs * math.ceil(len(data.train) / batch_size)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=lr, total_steps=steps, pct_start=0.15
    )
    order = torch.Generator().manual_seed(0)
    test_src, test_tgt_out = data.test.src.to(device), data.test.tgt_out.to(device)

    def train_one_epoch(epoch: int) -> None:
        model.train()
        for rows in torch.randperm(len(data.train), generator=order).split(batch_size):
            src, tgt_in, tgt_out = (t[rows].to(device) for t in data.train.tensors())
            loss = cross_entropy(model(src, tgt_in), tgt_out, ignore_index=PAD_ID)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            schedule.step()

    def greedy_exact_match() -> float:
        outputs = greedy_decode(model, test_src, test_tgt_out.shape[1], BOS_ID, EOS_ID, PAD_ID)
        return exact_match(outputs, test_tgt_out)

    return train_until("translation (05)", "held-out exact match", target, epochs,
                       train_one_epoch, greedy_exact_match, verbose)


def reverse(device: torch.device, verbose: bool) -> Result:
    """The recipe of ``04_transformer_encoder.ipynb``, section 9 (Post-LN), as ``fit`` runs it."""
    epochs, batch_size, lr, target = 5, 64, 3e-3, 0.99
    seq_len, vocab_size = 10, 10
    train_data, test_data = sequence_task_splits("reverse", 3000, 1000, seq_len, vocab_size, seed=0)
    seed_everything(0)
    model = EncoderTagger(
        vocab_size, vocab_size, d_model=32, num_heads=2, num_layers=2, d_ff=64, max_len=seq_len,
    ).to(device)
    # the same optimiser, shuffling and clipping as lectures_lib.training.fit
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    order = torch.Generator().manual_seed(0)

    def train_one_epoch(epoch: int) -> None:
        model.train()
        for rows in torch.randperm(len(train_data[0]), generator=order).split(batch_size):
            tokens, targets = (t[rows].to(device) for t in train_data)
            loss = cross_entropy(model(tokens), targets)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

    return train_until("reverse (04)", "held-out token accuracy", target, epochs,
                       train_one_epoch, lambda: evaluate(model, test_data, device=device),
                       verbose)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", nargs="+", choices=TASKS, default=list(TASKS))
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default 1, as the notebooks use)")
    parser.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--quiet", action="store_true", help="no per-epoch progress on stderr")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[Result]:
    args = parse_args(argv)
    if args.threads < 1:
        raise SystemExit(f"--threads must be >= 1, got {args.threads}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda was asked for, but CUDA is not available")
    seed_everything(0, num_threads=args.threads)
    runners = {"translation": translation, "reverse": reverse}
    results = []
    for task in args.tasks:
        results.append(runners[task](device, not args.quiet))

    print(f"torch {torch.__version__}, {platform.machine()}, device {device}, "
          f"{torch.get_num_threads()} thread(s)")
    header = ("task", "target", "reached", "epochs", "train CPU s", "train wall s",
              "eval wall s", "metric")
    rows = [
        (r.task, r.target, "yes" if r.reached else "NO", str(r.epochs), f"{r.train_cpu_s:.1f}",
         f"{r.train_wall_s:.1f}", f"{r.eval_wall_s:.1f}", f"{r.metric:.4f}")
        for r in results
    ]
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join("---" if i < 2 else "---:" for i in range(len(header))) + "|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    else:
        widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
        for row in rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)))
    return results


if __name__ == "__main__":
    main()
