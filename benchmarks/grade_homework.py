"""Grade section 08's homework (the translation recipe) through the grade command: what each kind
of submission gets, and what one costs.

    nice -n 10 python benchmarks/grade_homework.py [--kinds solved untrained ...]

The homework is Exercise 5 of notebook 08 (``notebooks/08_real_sentences.ipynb``: ``my_recipe``,
its quick check, one grader's cell per tier). Each submission is 08's student version as
released (:func:`~course_tools.publish.exercises.release_notebook`) with ``my_recipe``'s body
for its kind (:data:`KINDS`: the notebook's own solution, the release as it is, an untrained
recipe, a recipe that reads the sentences' package and hands translations in, one over the CPU
budget); the rest of 08's exercises are left as released. Each is graded with ``python -m
course_tools grade --notebook 08_real_sentences --secret-file`` against the course's notebooks
(the sandbox, the test split drawn from a secret) as a separate command, so the CPU seconds of
every grading and sandboxed process of that submission are measured (this process is their
subreaper, as in ``grade_class.py``). Results, one row per kind (the homework's points:
:func:`homework_points`), go to ``benchmarks/grade_homework.json``.
``tests/tooling/test_homework_grading.py`` and ``test_homework_routes.py`` build the same
submissions from here.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

NAME = "08_real_sentences"
COURSE = ROOT / "notebooks"  # the course's notebooks: grade's --course (the installed course's)
HOMEWORK = f"{NAME}-ex5"  # the homework's exercise id in a report
KINDS = {
    "solved": None,  # the notebook's own solution
    "empty": "",  # the student version as released: raise NotImplementedError()
    "untrained": "return dict(d_model=32, heads=2, layers=1, d_ff=64, epochs=1, beam=1)",
    "reads-test": (
        "from lectures_lib.data.sentences import load_sentences\n"
        "    known = {p.english: p.simplified for p in load_sentences()}  # every pair, test too\n"
        "    return dict(epochs=1, memorised=known)"),
    "over-budget": "return dict(d_model=256, layers=4, d_ff=1024, epochs=200)",
}


def course_notebook():
    """Notebook 08 as the course holds it (solutions and hidden tests)."""
    import nbformat

    return nbformat.read(COURSE / f"{NAME}.ipynb", as_version=4)


def recipe_cell(nb) -> int:
    """The index of the cell that defines ``my_recipe``."""
    return next(i for i, c in enumerate(nb.cells)
                if c.cell_type == "code" and "def my_recipe" in c.source)


def submission(kind: str, course=None):
    """08's student version with ``my_recipe``'s body for ``kind`` (None: the solution)."""
    from course_tools.publish.exercises import annotate_notebook, release_notebook

    course = course_notebook() if course is None else course
    student = release_notebook(course, NAME)
    body = KINDS[kind]
    if body == "":
        return student
    index = recipe_cell(course)
    source = annotate_notebook(course, NAME).cells[index].source
    if body is not None:
        source = source.split("    ### BEGIN SOLUTION")[0] + f"    {body}\n"
    student.cells[index].source = source
    return student


def homework_points(report: dict) -> tuple[float, float]:
    """(points, max points) of the homework (Exercise 5) in a grade report."""
    (row,) = [r for r in report["exercises"] if r["id"] == HOMEWORK]
    return row["points"], row["max_points"]


def grade(path: Path, secret: Path, timeout: float) -> dict:
    """One submission through the grade command; its report and the CPU of its processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", str(path), "--course", str(COURSE),
         "--notebook", NAME, "--json", "--timeout", str(timeout), "--secret-file", str(secret),
         "--quiet"],
        capture_output=True, text=True, cwd=ROOT, timeout=4 * timeout + 300)
    wall = time.perf_counter() - started
    time.sleep(0.5)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"grade failed ({result.returncode}): {result.stderr[-2000:]}")
    report = json.loads(result.stdout.splitlines()[-1])
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return {"report": report, "cpu_s": round(cpu, 1), "wall_s": round(wall, 1)}


def main() -> int:
    from grade_class import _reap_orphans

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=list(KINDS))
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "grade_homework.json")
    args = parser.parse_args()
    import nbformat

    stop = threading.Event()
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        threading.Thread(target=_reap_orphans, args=(stop,), daemon=True).start()
    stored = json.loads(args.json.read_text()) if args.json.exists() else {"rows": []}
    with tempfile.TemporaryDirectory() as folder:
        secret = Path(folder) / "secret"
        secret.write_text("a benchmark's grading secret, not a class's\n")
        secret.chmod(0o600)
        for kind in args.kinds:
            path = Path(folder) / f"{kind}_{NAME}.ipynb"
            nbformat.write(submission(kind), path)
            load = os.getloadavg()[0]
            graded = grade(path, secret, args.timeout)
            report = graded["report"]
            points, most = homework_points(report)
            row = {"kind": kind, "score": points, "max_score": most,
                   "cpu_s": graded["cpu_s"], "wall_s": graded["wall_s"],
                   "messages": [r["message"] for r in report["exercises"] if r["id"] == HOMEWORK],
                   "graded": f"{NAME}'s release, every exercise (the homework is {HOMEWORK})",
                   "load_average_before": round(load, 2), "cores": os.cpu_count(),
                   "python": platform.python_version(),
                   "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
            print(json.dumps(row, ensure_ascii=False)[:600], flush=True)
            stored["rows"] = [r for r in stored["rows"] if r["kind"] != kind] + [row]
            args.json.write_text(json.dumps(stored, indent=1, ensure_ascii=False) + "\n")
    stop.set()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
