"""Greedy decoding with and without the key/value cache: time against the output length.

Run it with ``python benchmarks/decoding_speed.py`` (``--markdown`` for the table of
``benchmarks/README.md``); it is not part of the tests. The model is the course's default
``Transformer`` (2 + 2 layers, d_model 64, untrained: its speed does not depend on its weights)
with the END logit pushed down, so every one of the ``--sources`` outputs is exactly ``length``
tokens long. For each length the two forms take turns ``--repeats`` times (a change of load hits
both alike) and the median CPU time of this process is reported. Before timing, the script
asserts that both give the same tokens (and scores up to float32 rounding).
The issue's target: the cache at least 2x faster for 1000 outputs of length 20.
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
from lectures_lib.decoding import greedy_decode  # noqa: E402
from lectures_lib.models import Transformer  # noqa: E402

PAD, BOS, EOS = 0, 1, 2


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[5, 10, 20, 40])
    parser.add_argument("--sources", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    seed_everything(0, num_threads=args.threads)
    model = Transformer(13, 13).eval()
    with torch.no_grad():
        model.output.bias[EOS] = -1e4  # never END: every output runs to max_len
    src = torch.randint(3, 13, (args.sources, 10))
    rows = []
    for length in args.lengths:
        cached, cached_scores = greedy_decode(model, src, length, BOS, EOS, PAD,
                                              return_scores=True)
        plain, plain_scores = greedy_decode(model, src, length, BOS, EOS, PAD,
                                            return_scores=True, use_cache=False)
        assert cached.shape == (args.sources, length) and torch.equal(cached, plain)
        assert torch.allclose(cached_scores, plain_scores, rtol=0, atol=1e-4)
        times = {True: [], False: []}
        for _ in range(args.repeats):
            for use_cache in (True, False):
                start = time.process_time()
                greedy_decode(model, src, length, BOS, EOS, PAD, use_cache=use_cache)
                times[use_cache].append(time.process_time() - start)
        fast, slow = statistics.median(times[True]), statistics.median(times[False])
        rows.append((str(length), f"{slow:.2f}", f"{fast:.2f}", f"{slow / fast:.1f}"))
        print("  " + "  ".join(rows[-1]), file=sys.stderr, flush=True)
    print(f"torch {torch.__version__}, {platform.machine()}, {torch.get_num_threads()} thread(s), "
          f"{args.sources} sources, CPU time, median of {args.repeats}")
    header = ("output length", "recompute s", "cache s", "speed-up")
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|---:|---:|---:|---:|")
    for row in [header] * (not args.markdown) + rows:
        print("| " + " | ".join(row) + " |" if args.markdown else "  ".join(row))


if __name__ == "__main__":
    main()
