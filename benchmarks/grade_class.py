"""Grade a class: N correct submissions of 05 (the course's own solutions), sandbox included.

    python benchmarks/grade_class.py [--n 40] [--jobs 2]

Prints the wall-clock seconds per submission (the issue's target: <= 6 s on a 2-core machine),
the CPU seconds per submission of every grading and sandboxed process (what does not depend on
the other load of the machine) and the load average before the run; fails unless every
submission gets full marks. Measure on a quiet machine.

bubblewrap's outer process exits without reaping the sandbox's init, so the sandboxed worker's
CPU time would be lost to ``getrusage``: on Linux this process becomes a child subreaper and
reaps the orphaned sandbox processes itself (their time then counts in ``RUSAGE_CHILDREN``).
"""

from __future__ import annotations

import argparse
import ctypes
import os
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from course_tools.grading import grade_paths  # noqa: E402
from course_tools.publish.exercises import annotate_notebook, release_notebook  # noqa: E402

NOTEBOOK = ROOT / "notebooks" / "05_transformer_decoder.ipynb"


def _reap_orphans(stop: threading.Event) -> None:
    """Reap the sandbox processes reparented to this subreaper (only those: the grader's own
    children are reaped by the grader)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            info = None
        if info is not None:
            try:
                comm = Path(f"/proc/{info.si_pid}/comm").read_text().strip()
            except OSError:
                comm = ""
            if comm == "bwrap":
                os.waitpid(info.si_pid, 0)
                continue
        if stop.wait(0.05):
            return


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
        load = os.getloadavg()
        stop = threading.Event()
        if sys.platform.startswith("linux"):
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
            threading.Thread(target=_reap_orphans, args=(stop,), daemon=True).start()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        reports, _ = grade_paths([Path(folder)], timeout=args.timeout, jobs=args.jobs,
                                 progress=True)
        seconds = time.perf_counter() - started
        time.sleep(0.5)
        stop.set()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    full = sum(r["score"] == r["max_score"] > 0 for r in reports)
    print(f"{len(reports)} submissions of {NOTEBOOK.stem}: {seconds:.1f} s, "
          f"{seconds / len(reports):.2f} s per submission; {full} at full marks; CPU "
          f"{cpu / len(reports):.2f} s per submission (grading and sandboxed processes); load "
          f"average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    for report in reports:
        if report["score"] != report["max_score"]:
            print(f"  {report['submission']}: {report['score']}/{report['max_score']} "
                  f"{report['error']} {[r['message'] for r in report['exercises']][:3]}")
    return 0 if full == len(reports) else 1


if __name__ == "__main__":
    raise SystemExit(main())
