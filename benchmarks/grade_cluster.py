"""Grade a class on Dask distributed: submissions per minute with 1, 2, ... worker processes.

    python benchmarks/grade_cluster.py [--n 8] [--workers 1 2]

For each worker count it starts a real scheduler and that many ``dask worker`` processes on
127.0.0.1 (one thread each: one submission at a time per worker, as on a machine per worker),
grades the same ``--n`` correct submissions of 05 with ``grade --scheduler``'s code
(:func:`~course_tools.grading._cluster.grade_on_cluster`, sandbox included), and prints
the wall time, the submissions per minute, the scaling against the first count and the load
average before and after (the machine may be shared: the numbers are only as good as its
quiet). Fails unless every submission gets full marks. The workers' start (imports) is not
timed: a cluster's workers are started before the class is graded.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_tools.grading._cluster import grade_on_cluster  # noqa: E402
from course_tools.grading._collect import COURSE_NOTEBOOKS  # noqa: E402
from course_tools.grading._local_cluster import local_cluster  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "05_transformer_decoder.ipynb"


def _write_class(folder: Path, n: int) -> None:
    import nbformat

    from course_tools.publish.exercises import annotate_notebook, release_notebook

    course = nbformat.read(NOTEBOOK, as_version=4)
    solved = release_notebook(course, NOTEBOOK.stem)
    for cell, annotated in zip(solved.cells, annotate_notebook(course, NOTEBOOK.stem).cells):
        if annotated.metadata.get("nbgrader", {}).get("solution"):
            cell.source = annotated.source
    for i in range(n):
        nbformat.write(solved, folder / f"student{i:03d}_{NOTEBOOK.name}")


def _warm(address: str, folder: Path, timeout: float) -> None:
    """One submission per worker first: each worker's zygote imports the grader once."""
    from distributed import Client

    from course_tools.grading._tls import security

    tls = folder.parent / "tls" / "client"  # local_cluster's certificates (mutual TLS)
    with Client(address, security=security(tls)) as client:
        count = len(client.scheduler_info()["workers"])
    warm = folder.parent / "warm"
    warm.mkdir(exist_ok=True)
    for path in sorted(folder.iterdir())[:count]:
        (warm / ("warm-" + path.name)).write_bytes(path.read_bytes())
    grade_on_cluster([warm], address, timeout=timeout, course=COURSE_NOTEBOOKS, notebook=None,
                     sandbox=True, progress=False, tls=tls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--timeout", type=float, default=300)
    args = parser.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as here:
        here = Path(here)
        folder = here / "class"
        folder.mkdir()
        _write_class(folder, args.n)
        for workers in args.workers:
            with local_cluster(workers, here, logs=False) as (address, _):
                _warm(address, folder, args.timeout)
                load = os.getloadavg()
                started = time.perf_counter()
                reports, _ = grade_on_cluster([folder], address, timeout=args.timeout,
                                              course=COURSE_NOTEBOOKS, notebook=None,
                                              sandbox=True, progress=True,
                                              tls=here / "tls" / "client")
                seconds = time.perf_counter() - started
                after = os.getloadavg()
            full = sum(r["score"] == r["max_score"] > 0 for r in reports)
            ok = ok and full == args.n == len(reports)
            rows.append((workers, seconds, 60 * len(reports) / seconds, full, load, after))
    first = rows[0][2]
    print(f"{args.n} submissions of {NOTEBOOK.stem}, on {os.cpu_count()} cores:")
    print("| worker processes | wall s | submissions / min | scaling | full marks | "
          "load before (1/5/15) | load after |")
    for workers, seconds, rate, full, load, after in rows:
        print(f"| {workers} | {seconds:.1f} | {rate:.2f} | {rate / first:.2f} | {full}/{args.n} |"
              f" {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} | {after[0]:.2f} {after[1]:.2f} "
              f"{after[2]:.2f} |")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
