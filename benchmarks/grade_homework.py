"""Grade section 08's homework (the translation recipe) through the grade command: what each kind
of submission gets, and what one costs.

    nice -n 10 python benchmarks/grade_homework.py [--kinds solved untrained ...]

Builds the homework's exercise (the cells notebook 08 holds: ``EXERCISE_CELLS``) as an
assignment of its own, ``08_translation_homework``, writes one submission per kind
(:data:`KINDS`: the reference recipe, the student version as released, an untrained recipe, a
recipe that reads the sentences' package and hands translations in, one over the CPU budget),
and grades each with ``python -m course_tools grade --secret-file`` (the sandbox, the test split
drawn from a secret) as a separate command, so the CPU seconds of every grading and sandboxed
process of that submission are measured (this process is their subreaper, as in
``grade_class.py``). Results, one row per kind, go to ``benchmarks/grade_homework.json``.
``tests/tooling/test_homework_grading.py`` builds the same notebook from here.
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

NAME = "08_translation_homework"
SOLUTION = "return dict(label_smoothing=0.1, lr=2e-3, epochs=50)  # smoothed-long, beam 4, lp 1"
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
EXERCISE_CELLS = [
    ("markdown", "## Exercises"),
    ("markdown", "**Exercise 1 — the homework: your translation recipe (8 points).** Write "
                 "`my_recipe()`: it returns your recipe, a dict of `RECIPE_CHOICES`' fields. The "
                 "grader trains it on the training pairs and scores BLEU on sentences you never "
                 "see; 2 points a tier."),
    ("code", "from lectures_lib.checks import (check_translation_boss, check_translation_medium,\n"
             "                                 check_translation_simple, check_translation_strong)\n"
             "from lectures_lib.real_sentences import RECIPE_CHOICES, RECIPE_DEFAULTS\n\n"
             "STARTER = dict(d_model=64, d_ff=128, layers=1, epochs=10, lr=2e-3, "
             "label_smoothing=0.1)"),
    ("code", "def my_recipe():\n"
             "    \"\"\"Your recipe: a dict of RECIPE_CHOICES' fields (the others keep "
             "RECIPE_DEFAULTS).\"\"\"\n"
             "    ### BEGIN SOLUTION\n"
             f"    {SOLUTION}\n"
             "    ### END SOLUTION"),
    *[("code", f"display(check_translation_{tier}(my_recipe))\n"
               "### BEGIN HIDDEN TESTS\n"
               f"from lectures_lib.checks import check_translation_{tier} as course_check\n\n"
               "result = course_check(my_recipe)\n"
               "assert result.passed, result\n"
               "### END HIDDEN TESTS") for tier in ("simple", "medium", "strong", "boss")],
]


def course_notebook():
    """The homework as an assignment of its own (notebook 08's exercise cells)."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 08 homework: English -> Chinese")]
    for kind, source in EXERCISE_CELLS:
        make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        nb.cells.append(make(source))
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    return nb


def submission(kind: str):
    """The student version with ``my_recipe``'s body for ``kind`` (None: the solution)."""
    from course_tools.publish.exercises import annotate_notebook, release_notebook

    course = course_notebook()
    student = release_notebook(course, NAME)
    body = KINDS[kind]
    if body == "":
        return student
    index = next(i for i, c in enumerate(course.cells) if "def my_recipe" in c.source)
    source = annotate_notebook(course, NAME).cells[index].source
    if body is not None:
        source = source.split("    ### BEGIN SOLUTION")[0] + f"    {body}\n"
    student.cells[index].source = source
    return student


def write_course(folder: Path) -> Path:
    import nbformat

    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(course_notebook(), folder / f"{NAME}.ipynb")
    return folder


def grade(path: Path, course: Path, secret: Path, timeout: float) -> dict:
    """One submission through the grade command; its report and the CPU of its processes."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", str(path), "--course", str(course),
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
        course = write_course(Path(folder) / "course")
        secret = Path(folder) / "secret"
        secret.write_text("a benchmark's grading secret, not a class's\n")
        secret.chmod(0o600)
        for kind in args.kinds:
            path = Path(folder) / f"{kind}_{NAME}.ipynb"
            nbformat.write(submission(kind), path)
            load = os.getloadavg()[0]
            graded = grade(path, course, secret, args.timeout)
            report = graded["report"]
            row = {"kind": kind, "score": report["score"], "max_score": report["max_score"],
                   "cpu_s": graded["cpu_s"], "wall_s": graded["wall_s"],
                   "messages": [r["message"] for r in report["exercises"] if not r["manual"]],
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
