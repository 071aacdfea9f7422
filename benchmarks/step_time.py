"""Per-step training time of the course's default ``Transformer`` (forward + backward + AdamW).

Run it with ``python benchmarks/step_time.py`` (``--help`` for options); it is not part of the
tests. It exists to check one promise of the attention seam (``MultiHeadAttention.project`` ->
``attend``, inputs checked once at the public boundary): the redesign must not make a training
step slower. Run it on two checkouts (before / after) and compare the medians.

``--compare-with OTHER_CHECKOUT`` loads that checkout's ``lectures_lib`` too (under another name,
in the same process) and alternates blocks of steps between the two, so a change of load on a
shared machine hits both alike; it prints both medians and their ratio.

The model is ``Transformer(src_vocab, tgt_vocab)`` with every default (d_model 64, 4 heads, 2+2
layers, d_ff 128), the batch a fixed random batch of ``--batch`` source and target sequences
(``--src-len`` / ``--tgt-len`` tokens, a few padded). Each reported number is the median over
``--repeats`` blocks of ``--steps`` steps, in this process's CPU time (``--clock wall`` for
wall-clock time); one thread by default, which is also the least noisy on a shared machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import seed_everything  # noqa: E402
from lectures_lib.training import cross_entropy  # noqa: E402

try:  # the module layout after the seam redesign; before it, everything was in `transformer`
    from lectures_lib.models import Transformer  # noqa: E402
except ImportError:  # pragma: no cover - the "before" checkout
    from lectures_lib.models import Transformer  # noqa: E402

VOCAB, PAD_ID = 20, 0


def make_batch(batch: int, src_len: int, tgt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed batch of token ids in [1, VOCAB), the last quarter of the rows padded by 2."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(1, VOCAB, (batch, src_len), generator=generator)  # (batch, src_len)
    tgt = torch.randint(1, VOCAB, (batch, tgt_len + 1), generator=generator)  # (batch, tgt_len+1)
    src[-(batch // 4) :, -2:] = PAD_ID
    tgt[-(batch // 4) :, -2:] = PAD_ID
    return src, tgt


def load_other_library(checkout: Path):
    """Import ``checkout/lectures_lib`` as the package ``lectures_lib_other`` (its imports are
    relative, so it runs beside this checkout's ``lectures_lib``); return its Transformer."""
    init = checkout / "lectures_lib" / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"--compare-with: no lectures_lib package in {checkout}")
    spec = importlib.util.spec_from_file_location(
        "lectures_lib_other", init, submodule_search_locations=[str(init.parent)]
    )
    package = importlib.util.module_from_spec(spec)
    sys.modules["lectures_lib_other"] = package
    spec.loader.exec_module(package)
    try:
        return importlib.import_module("lectures_lib_other.models").Transformer
    except ImportError:  # a checkout from before the split into layers and models
        return importlib.import_module("lectures_lib_other.transformer").Transformer


def make_step(transformer_class, args: argparse.Namespace):
    """One training step (forward, loss, backward, AdamW) of a fresh default Transformer."""
    torch.manual_seed(0)
    model = transformer_class(VOCAB, VOCAB, pad_id=PAD_ID)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    src, tgt = make_batch(args.batch, args.src_len, args.tgt_len)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # teacher forcing

    def step() -> None:
        optimizer.zero_grad()
        logits = model(src, tgt_in)  # (batch, tgt_len, VOCAB)
        loss = cross_entropy(logits, tgt_out, ignore_index=PAD_ID)
        loss.backward()
        optimizer.step()

    return step


def time_steps(steps: dict, args: argparse.Namespace) -> dict[str, list[float]]:
    """Milliseconds per training step of each named step function, one number per block of
    ``args.steps`` steps; the functions take turns block by block."""
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    for step in steps.values():
        for _ in range(args.warmup):
            step()
    blocks = {name: [] for name in steps}
    for _ in range(args.repeats):
        for name, step in steps.items():
            start = clock()
            for _ in range(args.steps):
                step()
            blocks[name].append(1000 * (clock() - start) / args.steps)
    return blocks


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--src-len", type=int, default=12)
    parser.add_argument("--tgt-len", type=int, default=12)
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=7, help="timed blocks (median reported)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed steps first")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--clock", choices=("cpu", "wall"), default="cpu")
    parser.add_argument("--compare-with", type=Path, default=None, metavar="OTHER_CHECKOUT",
                        help="also time the lectures_lib of another checkout, interleaved")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict[str, float]:
    args = parse_args(argv)
    seed_everything(0, num_threads=args.threads)
    steps = {"this checkout": make_step(Transformer, args)}
    if args.compare_with is not None:
        steps[f"{args.compare_with}"] = make_step(load_other_library(args.compare_with), args)
    blocks = time_steps(steps, args)
    print(
        f"torch {torch.__version__}, {platform.machine()}, {args.threads} thread(s), "
        f"{args.clock} time; default Transformer, batch {args.batch}, "
        f"src {args.src_len} / tgt {args.tgt_len} tokens, median of {args.repeats} blocks "
        f"of {args.steps} steps"
    )
    medians = {name: statistics.median(times) for name, times in blocks.items()}
    for name, times in blocks.items():
        print(f"{name}: ms per step, per block: {', '.join(f'{b:.2f}' for b in times)}")
        print(f"{name}: median ms per training step: {medians[name]:.2f}")
    if len(medians) == 2:
        this, other = medians.values()
        print(f"ratio this / other: {this / other:.3f}")
    return medians


if __name__ == "__main__":
    main()
