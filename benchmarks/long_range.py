"""Every attention variant on one long-range task, side by side (section 06, part 2; the table in
``benchmarks/README.md``; ``07_efficient_attention.ipynb`` runs a reduced version).

Run it with ``python benchmarks/long_range.py`` (``--help`` for options); it is not part of the
tests. The task is :func:`lectures_lib.data.retrieval_task` (the value paired with a key at least
``seq_len / 2`` positions away, chance = 1/4) at ``--seq-len`` (512). Every variant trains the
same small encoder (``EncoderTagger``, 1 layer, d_model 32, 2 heads) through the attention
factory with the same data, steps and learning rate, and reports:

* held-out accuracy (the query position's prediction);
* training time per step (median of timed steps, wall-clock: noisy on a shared machine);
* peak tensor memory of one forward + backward on one batch, measured with
  :func:`lectures_lib.measure.peak_tensor_memory` (on a CPU; not computed from shapes).

The variants are discovered: every attention class that ``lectures_lib.variants`` exports (a
subclass of ``MultiHeadAttention``) is built with its defaults (plus ``seq_len`` where it needs
one; the settings below override a few defaults to fit the task), so a variant merged later shows
up without editing this file. ``--plot FILE`` saves the speed-vs-accuracy scatter.
"""

from __future__ import annotations

import argparse
import inspect
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib import seed_everything, variants  # noqa: E402
from lectures_lib.attention import MultiHeadAttention  # noqa: E402
from lectures_lib.data import retrieval_task, retrieval_vocab_size  # noqa: E402
from lectures_lib.measure import peak_tensor_memory  # noqa: E402
from lectures_lib.models import EncoderTagger  # noqa: E402
from lectures_lib.training import cross_entropy, evaluate  # noqa: E402


class ExplicitFullAttention(MultiHeadAttention):
    """Full attention that always takes the explicit path (stores the N x N weights), as a learner
    writes it; ``MultiHeadAttention`` itself uses PyTorch's fused kernel when no weights are
    asked for, and on a CPU that kernel (flash attention) never stores N x N either."""

    def attend(self, q, k, v, mask, need_weights):
        return super().attend(q, k, v, mask, True)


# Preferred order and display names; settings that differ from the class defaults.
KNOWN = {
    "MultiHeadAttention": ("full (fused kernel)", {}),
    "ExplicitFullAttention": ("full (explicit N x N)", {}),
    "LocalAttention": ("local", {}),
    "LongformerAttention": ("Longformer", {}),
    "BigBirdAttention": ("Big Bird", {}),
    "LSHAttention": ("LSH (Reformer)", {}),
    "RoutingAttention": ("Routing (k-means)", {}),
    "SinkhornAttention": ("Sinkhorn", {"block_size": 32}),
    "LinformerAttention": ("Linformer", {"k": 64}),
    "CompressedAttention": ("compressed (conv)", {"stride": 8}),
    "LinearAttention": ("linear (elu+1)", {}),
    "PerformerAttention": ("Performer", {}),
    "DenseSynthesizerAttention": ("Synthesizer (dense)", {}),
    "RandomSynthesizerAttention": ("Synthesizer (random)", {}),
}


def discover() -> list[tuple[str, type]]:
    """``(class name, class)`` for full attention and every variant class the package exports."""
    found = {"MultiHeadAttention": MultiHeadAttention, "ExplicitFullAttention": ExplicitFullAttention}
    for name in getattr(variants, "__all__", dir(variants)):
        obj = getattr(variants, name, None)
        if inspect.isclass(obj) and issubclass(obj, MultiHeadAttention):
            found[name] = obj
    order = list(KNOWN) + sorted(set(found) - set(KNOWN))
    return [(name, found[name]) for name in order if name in found]


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


def run_variant(factory, train, test, seq_len, steps, batch_size, lr, seed=0) -> dict:
    seed_everything(seed)
    model = EncoderTagger(retrieval_vocab_size(), 4, d_model=32, num_heads=2, num_layers=1,
                          d_ff=64, max_len=seq_len, attention=factory)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    step_times = []
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, train[0].shape[0], (batch_size,), generator=generator)
        start = time.perf_counter()
        logits, labels = last_position(model, (train[0][idx], train[1][idx]))
        loss = cross_entropy(logits, labels)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        step_times.append(time.perf_counter() - start)
    accuracy = evaluate(model, test, forward_fn=last_position)
    batch = (train[0][:batch_size], train[1][:batch_size])

    def forward_backward():
        logits, labels = last_position(model, batch)
        cross_entropy(logits, labels).backward()

    memory = peak_tensor_memory(forward_backward)
    return {
        "accuracy": accuracy,
        "step_ms": 1000 * sorted(step_times)[len(step_times) // 2],
        "peak_mib": memory.peak_bytes / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq-len", type=int, default=512)
    parser.add_argument("--n-train", type=int, default=4096)
    parser.add_argument("--n-test", type=int, default=512)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--only", nargs="*", help="class names to run (default: all found)")
    parser.add_argument("--plot", type=Path, help="save the speed-vs-accuracy scatter here")
    args = parser.parse_args()

    seed_everything(0)
    train = retrieval_task(args.n_train, args.seq_len, seed=0)
    test = retrieval_task(args.n_test, args.seq_len, seed=1)
    print(f"# long-range retrieval, seq_len={args.seq_len}, {args.steps} steps of {args.batch_size},"
          f" lr={args.lr}; torch {torch.__version__}, {platform.processor() or platform.machine()},"
          f" {torch.get_num_threads()} thread(s); chance accuracy 0.25")
    missing = [name for name in KNOWN if name not in dict(discover())]
    if missing:
        print(f"# not in lectures_lib.variants on this branch: {', '.join(missing)}")
    print("| attention | accuracy | ms / training step | peak memory (MiB) |")
    print("|---|---:|---:|---:|")
    rows = []
    for name, cls in discover():
        if args.only and name not in args.only:
            continue
        label, overrides = KNOWN.get(name, (name, {}))
        result = run_variant(factory_for(cls, args.seq_len, overrides), train, test,
                             args.seq_len, args.steps, args.batch_size, args.lr)
        rows.append((label, result))
        print(f"| {label} | {result['accuracy']:.3f} | {result['step_ms']:.1f} | "
              f"{result['peak_mib']:.1f} |", flush=True)
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.5, 4.5))
        for label, result in rows:
            ax.scatter(result["step_ms"], result["accuracy"], s=20 + 4 * result["peak_mib"] ** 0.5)
            ax.annotate(label, (result["step_ms"], result["accuracy"]), fontsize=8,
                        xytext=(4, 4), textcoords="offset points")
        ax.axhline(0.25, color="grey", linestyle=":", label="chance")
        ax.set_xscale("log")
        ax.set_xlabel("ms per training step (log scale)")
        ax.set_ylabel("held-out accuracy")
        ax.set_title(f"Long-range retrieval, N = {args.seq_len} (marker area ~ memory)")
        ax.legend(loc="lower right")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)
        print(f"# plot saved to {args.plot}")


if __name__ == "__main__":
    main()
