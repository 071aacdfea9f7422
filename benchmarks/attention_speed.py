"""How fast is the course's attention? The explicit path, the fast path and PyTorch's fused kernel.

Run it with ``make bench`` (or ``python benchmarks/attention_speed.py --help``); it is not part of
the tests. It times, at sequence lengths N (batch 1, 4 heads, d_head 64, float32 by default):

* ``fused``: ``torch.nn.functional.scaled_dot_product_attention``, the reference;
* ``fast``: ``lectures_lib.attention.fused_attention``, the course's fast path (what
  ``MultiHeadAttention(..., need_weights=False)`` uses): the fused kernel plus input checks;
* ``explicit``: ``lectures_lib.attention.scaled_dot_product_attention``, the didactic path that
  builds the N x N weights (what ``need_weights=True`` uses);

forward only and forward + backward, as the median of ``--repeats`` runs after warm-up. Then
``MultiHeadAttention`` (explicit ``need_weights=True``, fast ``need_weights=False``) against
``nn.MultiheadAttention(need_weights=False)`` at a few N. Ratios are against the fused reference
(1.00 = as fast; 2.00 = twice as slow). Before timing, the script asserts that the fast path and
the explicit path give the same output on the very inputs it times.

The issue's target: the fast path within 1.2x of the fused kernel at N = 1024.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib.attention import (  # noqa: E402
    MultiHeadAttention,
    fused_attention,
    scaled_dot_product_attention,
)

DEFAULT_SIZES = (256, 512, 1024, 2048, 4096)
DEFAULT_MHA_SIZES = (256, 1024, 4096)
CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES),
                        help="sequence lengths N for the attention kernels")
    parser.add_argument("--mha-sizes", type=int, nargs="*", default=list(DEFAULT_MHA_SIZES),
                        help="sequence lengths N for the MultiHeadAttention modules (none: skip)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                        help="torch CPU threads (default: all cores)")
    parser.add_argument("--repeats", type=int, default=10, help="timed runs per measurement")
    parser.add_argument("--warmup", type=int, default=2, help="untimed runs before timing")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-head", type=int, default=64)
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="wall-clock time (default) or this process's CPU time: on a busy "
                        "machine, --threads 1 --clock cpu is far less noisy")
    parser.add_argument("--markdown", action="store_true", help="print Markdown tables")
    args = parser.parse_args(argv)
    if args.clock == "cpu" and torch.device(args.device).type != "cpu":
        parser.error("--clock cpu measures the CPU, not a GPU: use --clock wall with --device cuda")
    for name in ("threads", "repeats", "batch", "heads", "d_head"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if any(n < 1 for n in [*args.sizes, *args.mha_sizes]):
        parser.error("sizes must be >= 1")
    return args


def median_seconds(
    fns: dict[str, Callable[[], object]], args: argparse.Namespace, device: torch.device
) -> dict[str, float]:
    """Median seconds of each ``fn()`` over ``args.repeats`` runs, after ``args.warmup`` runs.

    The functions take turns (fused, fast, explicit, then fast, explicit, fused, ...: each round
    starts with the next one), so that a change in the load of the machine, or the state of the
    caches a function leaves to the next, hits all of them alike.
    """
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    clock = CLOCKS[args.clock]
    for _ in range(args.warmup):
        for fn in fns.values():
            fn()
    sync()
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for round_ in range(args.repeats):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            fn = fns[name]
            start = clock()
            fn()
            sync()
            times[name].append(clock() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def forward_only(attention: Callable, *tensors: torch.Tensor) -> Callable[[], None]:
    """A closure running ``attention`` forward, without autograd."""

    def run() -> None:
        with torch.no_grad():
            attention(*tensors)

    return run


def forward_backward(attention: Callable, *tensors: torch.Tensor) -> Callable[[], None]:
    """A closure running ``attention`` forward and backward (gradients w.r.t. q, k and v)."""

    def run() -> None:
        for t in tensors:
            t.grad = None
        out = attention(*tensors)
        out = out[0] if isinstance(out, tuple) else out
        out.sum().backward()

    return run


def kernel_table(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> list[dict]:
    rows = []
    for n in args.sizes:
        generator = torch.Generator().manual_seed(n)
        shape = (args.batch, args.heads, n, args.d_head)  # (batch, heads, N, d_head)
        q, k, v = (torch.randn(shape, generator=generator, dtype=dtype).to(device) for _ in "qkv")

        with torch.no_grad():  # the two paths must agree on exactly these inputs
            explicit_out, _ = scaled_dot_product_attention(q, k, v)
            fast_out = fused_attention(q, k, v)
        tolerance = 1e-4 if dtype == torch.float32 else 1e-10
        assert torch.allclose(fast_out, explicit_out, atol=tolerance, rtol=tolerance), (
            f"fast path and explicit path disagree at N={n}: max |diff| = "
            f"{(fast_out - explicit_out).abs().max().item():.3g}"
        )

        kernels = {
            "fused": torch.nn.functional.scaled_dot_product_attention,
            "fast": fused_attention,
            "explicit": scaled_dot_product_attention,
        }
        forward = median_seconds(
            {name: forward_only(f, q, k, v) for name, f in kernels.items()}, args, device
        )
        rows.append({"N": n, "pass": "forward", **forward})
        q, k, v = (t.requires_grad_() for t in (q, k, v))
        backward = median_seconds(
            {name: forward_backward(f, q, k, v) for name, f in kernels.items()}, args, device
        )
        rows.append({"N": n, "pass": "forward+backward", **backward})
    return rows


def mha_table(args: argparse.Namespace, device: torch.device, dtype: torch.dtype) -> list[dict]:
    rows = []
    d_model = args.heads * args.d_head
    torch.manual_seed(0)
    reference = nn.MultiheadAttention(d_model, args.heads, batch_first=True)
    reference = reference.to(device=device, dtype=dtype)
    ours = MultiHeadAttention.from_torch(reference)
    for n in args.mha_sizes:
        generator = torch.Generator().manual_seed(n)
        x = torch.randn(args.batch, n, d_model, generator=generator, dtype=dtype).to(device)
        modules = {
            "fused": lambda x: reference(x, x, x, need_weights=False),
            "fast": lambda x: ours(x, x, x, need_weights=False),
            "explicit": lambda x: ours(x, x, x, need_weights=True),
        }
        with torch.no_grad():
            expected = reference(x, x, x, need_weights=False)[0]
            tolerance = 1e-4 if dtype == torch.float32 else 1e-10
            for name in ("fast", "explicit"):
                got = modules[name](x)[0]
                assert torch.allclose(got, expected, atol=tolerance, rtol=tolerance), (
                    f"MultiHeadAttention ({name}) disagrees with nn.MultiheadAttention at N={n}"
                )
        for module in (reference, ours):
            module.eval()  # PyTorch's own fast path (native MHA) needs eval mode and no_grad
        forward = median_seconds(
            {name: forward_only(f, x) for name, f in modules.items()}, args, device
        )
        rows.append({"N": n, "pass": "forward (eval)", **forward})
        for module in (reference, ours):
            module.train()  # dropout is 0: training mode changes nothing but the code path
        x.requires_grad_()
        backward = median_seconds(
            {name: forward_backward(f, x) for name, f in modules.items()}, args, device
        )
        rows.append({"N": n, "pass": "forward+backward", **backward})
    return rows


def format_table(rows: list[dict], title: str, reference_name: str, markdown: bool) -> str:
    headers = ["N", "pass", f"{reference_name} ms", "fast ms", "explicit ms",
               f"fast / {reference_name}", f"explicit / {reference_name}"]
    lines = []
    for row in rows:
        lines.append([
            str(row["N"]), row["pass"],
            f"{row['fused'] * 1e3:.2f}", f"{row['fast'] * 1e3:.2f}", f"{row['explicit'] * 1e3:.2f}",
            f"{row['fast'] / row['fused']:.2f}", f"{row['explicit'] / row['fused']:.2f}",
        ])
    if markdown:
        out = [f"**{title}**", "", "| " + " | ".join(headers) + " |",
               "|" + "|".join("---:" if i != 1 else "---" for i in range(len(headers))) + "|"]
        out += ["| " + " | ".join(line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(headers)]
    out = [title, "  ".join(h.rjust(w) for h, w in zip(headers, widths, strict=True))]
    out += ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    print(
        f"torch {torch.__version__}, {platform.processor() or platform.machine()}, "
        f"device {device}, {torch.get_num_threads()} thread(s) of {os.cpu_count()} cores, "
        f"batch {args.batch}, {args.heads} heads, d_head {args.d_head}, {args.dtype}, "
        f"{args.clock} time, median of {args.repeats} interleaved runs after {args.warmup} "
        "warm-up runs"
    )
    print("fast path == explicit path on every input below: asserted before timing.\n")
    rows = kernel_table(args, device, dtype)
    print(format_table(rows, "Attention kernels (no mask)", "fused", args.markdown))
    target = [r for r in rows if r["N"] == 1024 and r["pass"] == "forward"]
    if target:
        ratio = target[0]["fast"] / target[0]["fused"]
        verdict = "meets" if ratio <= 1.2 else "MISSES"
        print(f"\nN=1024 forward: fast / fused = {ratio:.2f} ({verdict} the 1.2x target); "
              f"explicit / fused = {target[0]['explicit'] / target[0]['fused']:.2f}")
    if args.mha_sizes:
        print()
        mha_rows = mha_table(args, device, dtype)
        print(format_table(
            mha_rows,
            f"MultiHeadAttention (d_model {args.heads * args.d_head}) vs nn.MultiheadAttention",
            "torch MHA", args.markdown,
        ))


if __name__ == "__main__":
    main()
