"""Why Reformer's chunked form trains poorly on 06's far lookup: the chunks, the hashing, or the
shared query-key?

06 section 7's task (letters labelled with the value of their far-away definition, N = 34 with two
added tokens in front), 06's recipe (``EncoderTagger``, 2 layers, 4 heads, d_model 32, ``fit``
4 epochs, lr 3e-3 constant), seeds 0, 1, 2, one attention at a time:

* ``full``: ``MultiHeadAttention``;
* ``full, shared QK``: full attention whose keys are the normalised queries
  (:math:`k_j = q_j / \\lVert q_j \\rVert`, Reformer's tie), no hashing, no chunks;
* ``Reformer``: ``ReformerAttention`` with its defaults (8 buckets, 2 rounds, chunks of 32,
  shared QK, a query reads itself only when nothing else is allowed), and with 2 buckets, and with
  ``exclude_self=False``;
* ``LSH (q, k separate)``: ``LSHAttention`` (8 buckets, 2 rounds, queries and keys hashed
  apart, exact attention inside the bucket mask).

If shared-QK full attention (no hashing, no chunks) trains as poorly as Reformer, and LSH with
separate queries and keys trains as well as full attention, the cause is the shared QK, not the
chunks or the buckets. Why: with :math:`k_j = q_j / \\lVert q_j \\rVert`,
:math:`q_i \\cdot k_j \\le \\lVert q_i \\rVert` with equality exactly when :math:`q_j` is parallel
to :math:`q_i` (Cauchy-Schwarz): every other occurrence of the same letter (same embedding, only
the position differs) scores as high as the definition can, so the definition's weight is at most
about one over the number of occurrences of the letter; only the positions (and layer 1's
context) can break the tie. ``tests/variants/test_capacity.py`` asserts the bound on the module.

``python benchmarks/reformer_lookup.py`` writes ``benchmarks/reformer_lookup.json`` one
(attention, seed) at a time (atomic; a rerun skips the rows stored). A few minutes on one thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from lectures_lib.attention import MultiHeadAttention  # noqa: E402
from lectures_lib.data import (  # noqa: E402
    LOOKUP_IGNORE_INDEX,
    lookup_labelling_splits,
    lookup_pad_id,
    lookup_vocab_size,
)
from lectures_lib.models import EncoderTagger  # noqa: E402
from lectures_lib.training import fit  # noqa: E402
from lectures_lib.variants import LSHAttention, ReformerAttention  # noqa: E402

HERE = Path(__file__).resolve().parent


class SharedQKAttention(MultiHeadAttention):
    """Full attention with Reformer's shared query-key: the keys are the normalised queries."""

    def attend(self, q, k, v, mask, need_weights):
        return super().attend(q, F.normalize(q, dim=-1), v, mask, need_weights)


ATTENTIONS = {
    "full": None,
    "full, shared QK": SharedQKAttention,
    "Reformer (8 buckets, chunks of 32)": ReformerAttention,
    "Reformer (2 buckets)": partial(ReformerAttention, n_buckets=2),
    "Reformer (reads itself too)": partial(ReformerAttention, exclude_self=False),
    "LSH (q, k separate, 8 buckets)": LSHAttention,
}


def lookup_data():
    """06 section 7's splits, two added tokens in front (as its local + global model needs)."""
    train, test = lookup_labelling_splits(1000, 300, n_symbols=2, n_values=4, min_len=24,
                                          max_len=32, min_distance=6, seed=0)
    first = lookup_vocab_size(2, 4)

    def with_added(split):
        count = split.tokens.shape[0]
        tokens = torch.cat([torch.arange(first, first + 2).expand(count, -1), split.tokens], 1)
        labels = torch.cat([torch.full((count, 2), LOOKUP_IGNORE_INDEX), split.labels], 1)
        return tokens, labels

    return with_added(train), with_added(test), first + 2, lookup_pad_id(2, 4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="*", type=int, default=[0, 1, 2])
    parser.add_argument("--json", type=Path, default=HERE / "reformer_lookup.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    train, test, vocab, pad_id = lookup_data()
    settings = {"task": "06 section 7 lookup (2 symbols, 4 values, 24-32 letters, distance > 6, "
                        "2 added tokens)", "n_train": 1000, "n_test": 300, "layers": 2, "heads": 4,
                "d_model": 32, "d_ff": 64, "epochs": 4, "lr": 3e-3, "schedule": "constant"}
    results = {"settings": settings, "rows": {}}
    if args.json.exists() and json.loads(args.json.read_text()).get("settings") == settings:
        results = json.loads(args.json.read_text())
    for name, factory in ATTENTIONS.items():
        for seed in args.seeds:
            key = f"{name} / seed {seed}"
            if key in results["rows"]:
                continue
            torch.manual_seed(seed)
            model = EncoderTagger(vocab, 4, d_model=32, num_heads=4, num_layers=2, d_ff=64,
                                  pad_id=pad_id, max_len=train[0].shape[1], attention=factory)
            start = time.perf_counter()
            history = fit(model, train, epochs=4, lr=3e-3, schedule="constant", eval_data=test,
                          ignore_index=LOOKUP_IGNORE_INDEX, desc=key)
            results["rows"][key] = {"attention": name, "seed": seed,
                                    "accuracy": history.final_accuracy,
                                    "train_seconds": time.perf_counter() - start}
            temporary = args.json.with_suffix(".tmp")
            temporary.write_text(json.dumps(results, indent=1) + "\n")
            temporary.replace(args.json)
            print(f"{key}: held-out accuracy {history.final_accuracy:.3f}", flush=True)


if __name__ == "__main__":
    main()
