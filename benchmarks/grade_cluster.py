"""Grade a class on Dask distributed: submissions per minute with 1, 2, ... worker processes.

    python benchmarks/grade_cluster.py [--n 8] [--workers 1 2] [--routes tls tcp] [--json FILE]

For each worker count and each route (``tls``: mutual TLS, the documented route; ``tcp``: plain
tcp, which ``grade`` allows only with ``--insecure-plain-tcp-anyone-can-run-code``; the routes
alternate their order from one worker count to the next, so neither always runs first) it starts a real scheduler and that many ``dask worker`` processes on
127.0.0.1 (one thread each: one submission at a time per worker, as on a machine per worker),
grades the same ``--n`` correct submissions of 05 with ``grade --scheduler``'s code
(:func:`~course_tools.grading._cluster.grade_on_cluster`, sandbox included), and prints
the wall time, the submissions per minute, whether each got full marks and the load
average before and after (the machine may be shared: the numbers are only as good as its
quiet). Fails unless every submission gets full marks. The workers' start (imports) is not
timed: a cluster's workers are started before the class is graded.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def _route(route: str, here: Path) -> dict:
    """grade_on_cluster's options for a route: local_cluster's client certificates for mutual
    TLS, the explicit flag for plain tcp."""
    if route == "tls":
        return {"tls": here / "tls" / "client"}
    return {"insecure_plain_tcp": True}


def _warm(address: str, folder: Path, timeout: float, route: dict) -> None:
    """One submission per worker first: each worker's zygote imports the grader once."""
    from distributed import Client

    from course_tools.grading._tls import security

    tls = route.get("tls")
    with Client(address, security=security(tls) if tls else None) as client:
        count = len(client.scheduler_info()["workers"])
    warm = folder.parent / "warm"
    shutil.rmtree(warm, ignore_errors=True)
    warm.mkdir()
    for path in sorted(folder.iterdir())[:count]:
        (warm / ("warm-" + path.name)).write_bytes(path.read_bytes())
    grade_on_cluster([warm], address, timeout=timeout, course=COURSE_NOTEBOOKS, notebook=None,
                     sandbox=True, progress=False, **route)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--routes", nargs="+", choices=["tls", "tcp"], default=["tls"])
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--json", type=Path, default=None,
                        help="also write the rows to this file (e.g. benchmarks/grade_cluster.json)")
    args = parser.parse_args()
    rows, ok = [], True
    with tempfile.TemporaryDirectory() as here:
        here = Path(here)
        folder = here / "class"
        folder.mkdir()
        _write_class(folder, args.n)
        for k, workers in enumerate(args.workers):
            for name in (args.routes if k % 2 == 0 else args.routes[::-1]):
                route = _route(name, here)
                with local_cluster(workers, here, logs=False,
                                   plain_tcp=name == "tcp") as (address, _):
                    _warm(address, folder, args.timeout, route)
                    load = os.getloadavg()
                    started = time.perf_counter()
                    reports, _ = grade_on_cluster([folder], address, timeout=args.timeout,
                                                  course=COURSE_NOTEBOOKS, notebook=None,
                                                  sandbox=True, progress=True, **route)
                    seconds = time.perf_counter() - started
                    after = os.getloadavg()
                full = sum(r["score"] == r["max_score"] > 0 for r in reports)
                ok = ok and full == args.n == len(reports)
                rows.append({"route": name, "workers": workers, "wall_s": round(seconds, 1),
                             "per_min": round(60 * len(reports) / seconds, 2), "full": full,
                             "n": args.n, "load_before": [round(x, 2) for x in load],
                             "load_after": [round(x, 2) for x in after]})
    print(f"{args.n} submissions of {NOTEBOOK.stem}, on {os.cpu_count()} cores:")
    print("| route | worker processes | wall s | submissions / min | full marks | "
          "load before (1/5/15) | load after |")
    for row in rows:
        print(f"| {row['route']} | {row['workers']} | {row['wall_s']:.1f} | {row['per_min']:.2f} |"
              f" {row['full']}/{row['n']} | {' '.join(f'{x:.2f}' for x in row['load_before'])} |"
              f" {' '.join(f'{x:.2f}' for x in row['load_after'])} |")
    if args.json is not None:
        args.json.write_text(json.dumps({"notebook": NOTEBOOK.stem, "cores": os.cpu_count(),
                                         "rows": rows}, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
