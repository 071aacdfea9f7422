"""Time and peak memory against N: dense attention and the efficient forms of section 06.

Run it with ``make bench`` (or ``python benchmarks/variants_speed.py --help``); it is not part of
the tests. At each sequence length N (batch 1, 4 heads, d_head 32, float32 by default) it measures
the forward pass of

* ``dense``: ``scaled_dot_product_attention`` (explicit, builds the N x N weights) and
  ``fused``: PyTorch's fused kernel (``fused_attention``; time only: its scratch memory is inside
  one kernel, which ``peak_tensor_memory`` cannot see);
* ``local``: ``local_attention``, window w;
* ``strided``: ``strided_attention``, stride s (reshaped into s groups, N^2 / s scores);
* ``longformer``: ``sparse_attention`` with a window w and one global token;
* ``bigbird``: ``sparse_attention`` with a window, r random keys per query and one global token;
* ``lsh``: ``clustered_attention`` on LSH buckets (``lsh_buckets``, 2 rounds, about N / 64
  buckets: Reformer grows the number of buckets with N, so a bucket holds about 64 vectors);
* ``linear``: ``linear_attention`` (kernel feature map elu + 1).

Time is the median of ``--repeats`` runs after ``--warmup`` (``--clock cpu`` counts this
process's CPU time: with one thread it is far less noisy on a shared machine); memory is
``peak_tensor_memory``: every tensor the forward creates, measured, not computed. Before timing,
the script asserts at a small N that every efficient form equals dense attention under its mask
(linear attention is its own model and is checked against its quadratic form in the tests).
``--plot PATH`` writes a log-log plot of both; ``--markdown`` prints a Markdown table.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib.attention import fused_attention, scaled_dot_product_attention  # noqa: E402
from lectures_lib.measure import peak_tensor_memory  # noqa: E402
from lectures_lib.variants import (  # noqa: E402
    cluster_mask,
    clustered_attention,
    linear_attention,
    local_attention,
    local_mask,
    lsh_buckets,
    random_keys,
    random_rotations,
    sparse_attention,
    sparse_pattern,
    stride_mask,
    strided_attention,
)

DEFAULT_SIZES = (256, 512, 1024, 2048, 4096, 8192)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--dense-max", type=int, default=4096,
                        help="largest N for dense attention (its memory grows like N^2)")
    parser.add_argument("--window", type=int, default=16, help="local window w (each side)")
    parser.add_argument("--stride", type=int, default=32, help="stride s")
    parser.add_argument("--random", type=int, default=3, help="Big Bird's random keys per query")
    parser.add_argument("--bucket-size", type=int, default=64,
                        help="LSH: N / bucket-size buckets per round (Reformer grows them with N)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-head", type=int, default=32)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument("--plot", type=Path, default=None, help="write a log-log plot here")
    args = parser.parse_args(argv)
    for name in ("window", "stride", "random", "bucket_size", "threads", "repeats", "heads", "d_head"):
        if getattr(args, name) < (0 if name in ("window", "random") else 1):
            parser.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")
    return args


def window_index(n: int, window: int) -> torch.Tensor:
    index = torch.arange(n)[:, None] + torch.arange(-window, window + 1)  # (n, 2w + 1)
    return index.masked_fill((index < 0) | (index >= n), -1)


def forms(n: int, args: argparse.Namespace) -> dict[str, tuple[Callable, torch.Tensor | None]]:
    """name -> (attention(q, k, v), the mask it equals dense attention under, or None)."""
    local = window_index(n, args.window)
    bigbird = torch.cat([window_index(n, args.window), random_keys(n, args.random, seed=0)], dim=-1)
    buckets = max(2, 2 * round(n / (2 * args.bucket_size)))  # even, about n / bucket_size
    rotations = random_rotations(args.d_head, buckets, 2, heads=args.heads, seed=0)

    def lsh(q, k, v):
        return clustered_attention(q, k, v, lsh_buckets(q, rotations), lsh_buckets(k, rotations),
                                   buckets)

    def lsh_mask(q, k):
        return cluster_mask(lsh_buckets(q, rotations), lsh_buckets(k, rotations))

    return {
        "local": (lambda q, k, v: local_attention(q, k, v, args.window), local_mask(n, args.window)),
        "strided": (lambda q, k, v: strided_attention(q, k, v, args.stride), stride_mask(n, args.stride)),
        "longformer": (lambda q, k, v: sparse_attention(q, k, v, local, [0]), sparse_pattern(n, local, [0])),
        "bigbird": (lambda q, k, v: sparse_attention(q, k, v, bigbird, [0]), sparse_pattern(n, bigbird, [0])),
        "lsh": (lsh, lsh_mask),
        "linear": (linear_attention, None),
    }


def check_equal_to_dense(args: argparse.Namespace) -> None:
    n = 200
    q, k, v = (torch.randn(1, args.heads, n, args.d_head, dtype=torch.float64) for _ in range(3))
    for name, (attention, mask) in forms(n, args).items():
        if mask is None:
            continue
        if callable(mask):
            mask = mask(q, k)
        expected, _ = scaled_dot_product_attention(q, k, v, mask)
        torch.testing.assert_close(attention(q, k, v), expected, msg=f"{name} != dense under its mask")


def timed(fn: Callable[[], object], args: argparse.Namespace) -> float:
    clock = CLOCKS[args.clock]
    for _ in range(args.warmup):
        fn()
    times = []
    for _ in range(args.repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return sorted(times)[len(times) // 2]


def measure(args: argparse.Namespace) -> list[dict]:
    rows = []
    for n in args.sizes:
        qkv = tuple(torch.randn(1, args.heads, n, args.d_head) for _ in range(3))
        cases: dict[str, Callable] = {}
        if n <= args.dense_max:
            cases["dense"] = partial(scaled_dot_product_attention, *qkv)
            cases["fused"] = partial(fused_attention, *qkv)
        for name, (attention, _) in forms(n, args).items():
            cases[name] = partial(attention, *qkv)
        for name, fn in cases.items():
            with torch.no_grad():
                seconds = timed(fn, args)
                memory = None if name == "fused" else peak_tensor_memory(fn).peak_bytes
            rows.append({"n": n, "form": name, "ms": 1000 * seconds, "mib": memory and memory / 2**20})
            print(f"  N={n:5d} {name:10s} {1000 * seconds:9.2f} ms"
                  + (f" {memory / 2**20:9.2f} MiB" if memory else ""), file=sys.stderr)
    return rows


def slope(rows: list[dict], form: str, key: str) -> float | None:
    points = [(r["n"], r[key]) for r in rows if r["form"] == form and r[key] and r["n"] >= 1024]
    if len(points) < 2:
        return None
    (n0, y0), (n1, y1) = points[0], points[-1]
    return math.log(y1 / y0) / math.log(n1 / n0)


def print_table(rows: list[dict], args: argparse.Namespace) -> None:
    forms_ = list(dict.fromkeys(r["form"] for r in rows))
    sizes = list(dict.fromkeys(r["n"] for r in rows))
    cell = {(r["n"], r["form"]): r for r in rows}
    for key, unit in (("ms", "time (ms)"), ("mib", "peak memory (MiB)")):
        shown = [f for f in forms_ if any(cell.get((n, f), {}).get(key) for n in sizes)]
        print(f"\n**{unit}**\n" if args.markdown else f"\n{unit}")
        print("| N | " + " | ".join(shown) + " |")
        print("|---:|" + "---:|" * len(shown))
        for n in sizes:
            values = [cell.get((n, f), {}).get(key) for f in shown]
            print(f"| {n} | " + " | ".join("-" if x is None else f"{x:.2f}" for x in values) + " |")
        slopes = [slope(rows, f, key) for f in shown]
        print("| slope (N >= 1024) | " + " | ".join("-" if s is None else f"{s:.2f}" for s in slopes) + " |")


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    forms_ = list(dict.fromkeys(r["form"] for r in rows))
    colours = {form: f"C{index}" for index, form in enumerate(forms_)}  # same colour in both panels
    sizes = sorted({r["n"] for r in rows})
    for key, ax, label in (("ms", axes[0], "time (ms)"), ("mib", axes[1], "peak memory (MiB)")):
        for form in forms_:
            points = [(r["n"], r[key]) for r in rows if r["form"] == form and r[key]]
            if points:
                ax.loglog(*zip(*points), "o-", color=colours[form], label=form)
        ax.set(xlabel="sequence length N", ylabel=label)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.minorticks_off()
        ax.legend(fontsize=8)
    fig.suptitle("dense attention vs the efficient forms of section 06 (forward, log-log)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    check_equal_to_dense(args)
    print(f"torch {torch.__version__}, {platform.machine()}, {args.threads} thread(s) of "
          f"{os.cpu_count()} cores, batch 1, {args.heads} heads, d_head {args.d_head}, float32, "
          f"{args.clock} time, median of {args.repeats} after {args.warmup} warm-up; window "
          f"{args.window}, stride {args.stride}, {args.random} random keys, LSH buckets of "
          f"about {args.bucket_size} x 2 rounds")
    print("command: python benchmarks/variants_speed.py " + " ".join(argv or sys.argv[1:]))
    rows = measure(args)
    print_table(rows, args)
    if args.plot is not None:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
