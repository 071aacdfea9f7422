"""Per-step training time of the course's default ``Transformer`` (forward + backward + AdamW).

Run it with ``python benchmarks/step_time.py`` (``--help`` for options); it is not part of the
tests. It exists to check one promise of the attention seam (``MultiHeadAttention.project`` ->
``attend``, inputs checked once at the public boundary): the redesign must not make a training
step slower. Run it on two checkouts (before / after) and compare the medians.

The model is ``Transformer(src_vocab, tgt_vocab)`` with every default (d_model 64, 4 heads, 2+2
layers, d_ff 128), the batch a fixed random batch of ``--batch`` source and target sequences
(``--src-len`` / ``--tgt-len`` tokens, a few padded). Each reported number is the median over
``--repeats`` blocks of ``--steps`` steps, in this process's CPU time (``--clock wall`` for
wall-clock time); one thread by default, which is also the least noisy on a shared machine.
"""

from __future__ import annotations

import argparse
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
    from lectures_lib.transformer import Transformer  # noqa: E402

VOCAB, PAD_ID = 20, 0


def make_batch(batch: int, src_len: int, tgt_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed batch of token ids in [1, VOCAB), the last quarter of the rows padded by 2."""
    generator = torch.Generator().manual_seed(0)
    src = torch.randint(1, VOCAB, (batch, src_len), generator=generator)  # (batch, src_len)
    tgt = torch.randint(1, VOCAB, (batch, tgt_len + 1), generator=generator)  # (batch, tgt_len+1)
    src[-(batch // 4) :, -2:] = PAD_ID
    tgt[-(batch // 4) :, -2:] = PAD_ID
    return src, tgt


def time_steps(args: argparse.Namespace) -> list[float]:
    """Milliseconds per training step, one number per block of ``args.steps`` steps."""
    seed_everything(0, num_threads=args.threads)
    model = Transformer(VOCAB, VOCAB, pad_id=PAD_ID)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    src, tgt = make_batch(args.batch, args.src_len, args.tgt_len)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]  # teacher forcing
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    def step() -> None:
        optimizer.zero_grad()
        logits = model(src, tgt_in)  # (batch, tgt_len, VOCAB)
        loss = cross_entropy(logits, tgt_out, ignore_index=PAD_ID)
        loss.backward()
        optimizer.step()

    for _ in range(args.warmup):
        step()
    blocks = []
    for _ in range(args.repeats):
        start = clock()
        for _ in range(args.steps):
            step()
        blocks.append(1000 * (clock() - start) / args.steps)
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
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> float:
    args = parse_args(argv)
    blocks = time_steps(args)
    median = statistics.median(blocks)
    print(
        f"torch {torch.__version__}, {platform.machine()}, {args.threads} thread(s), "
        f"{args.clock} time; default Transformer, batch {args.batch}, "
        f"src {args.src_len} / tgt {args.tgt_len} tokens"
    )
    print(f"ms per step, per block: {', '.join(f'{b:.2f}' for b in blocks)}")
    print(f"median ms per training step: {median:.2f}")
    return median


if __name__ == "__main__":
    main()
