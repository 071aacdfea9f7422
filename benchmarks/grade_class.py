"""Grade a class: N correct submissions of 05 (the course's own solutions), sandbox included.

    python benchmarks/grade_class.py [--n 40] [--jobs 2]

Prints the wall-clock seconds per submission (the issue's target: <= 6 s on a 2-core machine)
and fails unless every submission gets full marks. Measure on a quiet machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lectures_lib.tooling.exercises import annotate_notebook, release_notebook  # noqa: E402
from lectures_lib.tooling.grading import grade_paths  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "05_transformer_decoder.ipynb"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--timeout", type=float, default=120)
    args = parser.parse_args()
    import nbformat

    course = nbformat.read(NOTEBOOK, as_version=4)
    solved = release_notebook(course, NOTEBOOK.stem)  # what a student got, with every answer in
    for cell, annotated in zip(solved.cells, annotate_notebook(course, NOTEBOOK.stem).cells):
        if annotated.metadata.get("nbgrader", {}).get("solution"):
            cell.source = annotated.source
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.n):
            nbformat.write(solved, Path(folder) / f"student{i:03d}_{NOTEBOOK.name}")
        started = time.perf_counter()
        reports, _ = grade_paths([Path(folder)], timeout=args.timeout, jobs=args.jobs,
                                 progress=True)
        seconds = time.perf_counter() - started
    full = sum(r["score"] == r["max_score"] > 0 for r in reports)
    print(f"{len(reports)} submissions of {NOTEBOOK.stem}: {seconds:.1f} s, "
          f"{seconds / len(reports):.2f} s per submission; {full} at full marks")
    for report in reports:
        if report["score"] != report["max_score"]:
            print(f"  {report['submission']}: {report['score']}/{report['max_score']} "
                  f"{report['error']} {[r['message'] for r in report['exercises']][:3]}")
    return 0 if full == len(reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
