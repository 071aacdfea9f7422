"""Peak memory and time of one forward pass of section 06's local and clustered modules against
N, each size in a fresh process, next to PyTorch's fused dense kernel; prints the crossover N.

    python benchmarks/clustered_memory.py --markdown            # the table in benchmarks/README.md
    python benchmarks/clustered_memory.py --sizes 1024 4096 --only reformer fused

The issue-19 setting: batch 1, d_model 64, 2 heads (d_head 32), float32, one thread, no autograd;
clusters / buckets grow with N (N / 64, so a cluster holds about 64 vectors), Reformer's chunks
hold 64 positions and hash twice, local attention has window 32. Memory is
``peak_tensor_memory`` (every tensor the forward creates, inputs and weights excluded) and the
process's peak resident set (``ru_maxrss``, which includes Python and torch themselves); time is
the median CPU time of ``--repeats`` runs after one warm-up (one thread: far less noisy than
wall-clock time on a shared machine). The old padded-bucket ``LSHAttention`` is run only up to
``--max-padded`` (its memory grows like N^2: when the padded buckets would hold more scores than
the N x N matrix it computes the masked dense form, about 7 GB at N = 16384).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib.attention import MultiHeadAttention  # noqa: E402
from lectures_lib.measure import peak_tensor_memory  # noqa: E402
from lectures_lib.variants import LocalAttention, LSHAttention, RoutingAttention  # noqa: E402
from lectures_lib.variants.chunked import BalancedRoutingAttention, ReformerAttention  # noqa: E402

D_MODEL, HEADS, PER_CLUSTER, WINDOW = 64, 2, 64, 32
DEFAULT_SIZES = (1024, 2048, 4096, 8192, 16384)
NAMES = ("fused", "local (unfold)", "local (blocked)", "lsh (padded buckets)", "reformer",
         "routing (nearest)", "routing (balanced)")


class UnfoldLocal(LocalAttention):
    """The course's earlier local engine, kept here to measure it: sliding windows (``unfold``),
    whose product with the queries copies the keys 2w + 1 times."""

    def efficient_attend(self, q, k, v, key_mask, need_weights, dropout_p):
        width = 2 * self.window + 1
        keys = torch.nn.functional.pad(k, (0, 0, self.window, self.window)).unfold(-2, width, 1)
        values = torch.nn.functional.pad(v, (0, 0, self.window, self.window)).unfold(-2, width, 1)
        scores = (q.unsqueeze(-2) @ keys).squeeze(-2) / math.sqrt(q.shape[-1])  # (..., n, 2w + 1)
        index = torch.arange(q.shape[-2])[:, None] + torch.arange(-self.window, self.window + 1)
        scores = scores.masked_fill((index < 0) | (index >= q.shape[-2]), float("-inf"))
        return (values @ scores.softmax(-1).unsqueeze(-1)).squeeze(-1), None


def build(name: str, n: int) -> torch.nn.Module:
    clusters = max(n // PER_CLUSTER, 2)
    buckets = clusters + clusters % 2  # even
    if name == "fused":
        return MultiHeadAttention(D_MODEL, HEADS)
    if name == "local (unfold)":
        return UnfoldLocal(D_MODEL, HEADS, window=WINDOW)
    if name == "local (blocked)":
        return LocalAttention(D_MODEL, HEADS, window=WINDOW)
    if name == "lsh (padded buckets)":
        return LSHAttention(D_MODEL, HEADS, n_buckets=buckets, n_hashes=2)
    if name == "reformer":
        return ReformerAttention(D_MODEL, HEADS, n_buckets=buckets, n_hashes=2, chunk_size=PER_CLUSTER)
    if name == "routing (nearest)":
        return RoutingAttention(D_MODEL, HEADS, n_clusters=clusters)
    if name == "routing (balanced)":
        return BalancedRoutingAttention(D_MODEL, HEADS, n_clusters=clusters)
    raise ValueError(f"name must be one of {NAMES}, got {name!r}")


def measure_one(name: str, n: int, repeats: int) -> dict:
    """One module at one N in this (fresh) process."""
    torch.set_num_threads(1)
    torch.manual_seed(0)
    module = build(name, n).eval()
    x = torch.randn(1, n, D_MODEL)
    with torch.no_grad():
        def forward():
            return module(x, x, x, need_weights=False)[0]

        report = peak_tensor_memory(forward)
        forward()  # warm-up
        times = []
        for _ in range(repeats):
            start = time.process_time()
            forward()
            times.append(time.process_time() - start)
    times.sort()
    return {"name": name, "n": n, "peak_tensor_mib": report.peak_bytes / 2**20,
            "largest": list(report.largest_tensor_shape),
            "maxrss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "seconds": times[len(times) // 2]}


def run_fresh(name: str, n: int, repeats: int) -> dict:
    command = [sys.executable, __file__, "--one", name, str(n), "--repeats", str(repeats)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def crossover(rows: list[dict], name: str) -> int | None:
    """The smallest measured N from which ``name`` is faster than the fused kernel at every
    larger measured N (None if it never is)."""
    fused = {r["n"]: r["seconds"] for r in rows if r["name"] == "fused"}
    mine = {r["n"]: r["seconds"] for r in rows if r["name"] == name}
    sizes = sorted(set(fused) & set(mine))
    for i, n in enumerate(sizes):
        if all(mine[m] < fused[m] for m in sizes[i:]):
            return n
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--only", nargs="+", choices=NAMES, default=list(NAMES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-padded", type=int, default=4096,
                        help="largest N for the padded-bucket LSHAttention (N^2 memory)")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument("--one", nargs=2, metavar=("NAME", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(measure_one(args.one[0], int(args.one[1]), args.repeats)))
        return
    rows = []
    for n in args.sizes:
        for name in args.only:
            if name == "lsh (padded buckets)" and n > args.max_padded:
                continue
            rows.append(run_fresh(name, n, args.repeats))
            print(json.dumps(rows[-1]), file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    names = [name for name in args.only if any(r["name"] == name for r in rows)]
    if args.markdown:
        print(f"torch {torch.__version__}, 1 thread, batch 1, d_model {D_MODEL}, {HEADS} heads, "
              f"float32, forward only; N / {PER_CLUSTER} clusters or buckets, window {WINDOW}; "
              f"CPU time, median of {args.repeats} after 1 warm-up; each cell a fresh process\n")
        print("| N | " + " | ".join(names) + " |")
        print("| --- | " + " | ".join("---" for _ in names) + " |")
        for n in args.sizes:
            cells = []
            for name in names:
                row = next((r for r in rows if r["name"] == name and r["n"] == n), None)
                cells.append("—" if row is None else
                             f"{row['peak_tensor_mib']:.0f} MiB, {1000 * row['seconds']:.0f} ms")
            print(f"| {n} | " + " | ".join(cells) + " |")
        print()
    for name in names:
        points = sorted((r["n"], r["peak_tensor_mib"]) for r in rows if r["name"] == name)
        if len(points) >= 2:
            (n0, m0), (n1, m1) = points[-2], points[-1]
            slope = math.log(m1 / m0) / math.log(n1 / n0)
            print(f"* {name}: memory slope {slope:.2f} between N = {n0} and {n1}"
                  + ("" if name == "fused" else
                     f"; faster than the fused kernel from N = {crossover(rows, name)}"))


if __name__ == "__main__":
    main()
