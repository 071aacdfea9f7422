"""``python -m course_tools grade``: every kind of submission gets the right score.

Submissions of ``01_self_attention`` (its one autograded exercise is worth 4 points): correct,
wrong, empty (the student version as released), a function that sleeps for an hour, a solution
cell that loops for ever at top level, one that crashes, one that overrides the checker, and a
file that is not a notebook. They are graded in one command with a short time limit; each gets
its report and the right score, and the run ends (each grading process is bounded by the
command's ``--timeout``; the test's own subprocess limit only guards against a hang).
"""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.exercises import annotate_notebook, find_exercises, release_notebook

from ..conftest import require_system_package

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
COURSE = ROOT / "notebooks" / "01_self_attention.ipynb"
NAME = COURSE.stem
TIMEOUT = 40  # seconds per submission: the kernel starts in ~5-10 s, the exercises take ~2 s

SOLUTION_BODIES = {
    "wrong": """def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    scores = ((q @ w_q).unsqueeze(-2) + (k @ w_k).unsqueeze(-3)) @ w_score  # no tanh
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights""",
    "sleeping": """import time


def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    time.sleep(3600)""",
    "looping": """while True:
    pass""",
    "crashing": """def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    return q @ k  # shapes do not even fit""",
    "overriding": """from lectures_lib.checks import CheckResult


def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    return None


def check_additive_attention(student_fn, **options):
    return CheckResult("additive_attention", True, "looks perfect to me")""",
}


def _course():
    return nbformat.read(COURSE, as_version=4)


def _submission(kind: str):
    original = _course()
    student = release_notebook(original, NAME)
    if kind == "empty":
        return student
    annotated = annotate_notebook(original, NAME)
    exercise = next(e for e in find_exercises(original) if e.tests)
    for index, cell in enumerate(annotated.cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            student.cells[index].source = cell.source  # every answer solved ...
    if kind != "correct":
        student.cells[exercise.solutions[0]].source = SOLUTION_BODIES[kind]  # ... but this one
    return student


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    require_system_package("bubblewrap")  # `grade` refuses to run without its sandbox
    folder = tmp_path_factory.mktemp("submissions")
    kinds = ["correct", "wrong", "empty", *[k for k in SOLUTION_BODIES if k != "wrong"]]
    for kind in kinds:
        nbformat.write(_submission(kind), folder / f"{kind}_{NAME}.ipynb")
    (folder / f"garbage_{NAME}.ipynb").write_text("this is { not a notebook")
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", *sorted(folder.iterdir()),
         "--json", "--timeout", str(TIMEOUT)],
        capture_output=True, text=True, timeout=len(kinds) * (TIMEOUT + 120), cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    return folder, {Path(r["submission"]).name.split("_")[0]: r for r in reports}


def _code_exercise(report):
    return next(row for row in report["exercises"] if not row["manual"])


def test_every_submission_gets_one_report_with_the_named_keys(graded):
    _, reports = graded
    assert sorted(reports) == sorted(["correct", "wrong", "empty", "garbage",
                                      *[k for k in SOLUTION_BODIES if k != "wrong"]])
    for report in reports.values():
        assert {"submission", "score", "max_score", "exercises"} <= set(report)
        assert report["max_score"] == 4.0, "01's autograded exercise is worth 4 points"
        for row in report["exercises"]:
            assert {"id", "points", "max_points", "passed", "message"} <= set(row)


def test_correct_submission_gets_full_points(graded):
    report = graded[1]["correct"]
    assert report["score"] == report["max_score"] == 4.0, report
    row = _code_exercise(report)
    assert row["passed"] is True and row["id"] == f"{NAME}-ex1"
    manual = [row for row in report["exercises"] if row["manual"]]
    assert manual and all(row["passed"] is None and "by hand" in row["message"] for row in manual)
    assert report["manual_max_score"] == sum(row["max_points"] for row in manual)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("wrong", "missing_tanh|skip the tanh"),
        ("empty", "not implemented"),
        ("sleeping", "timed out after"),
        ("crashing", "raised"),
        ("overriding", "returned None"),
        ("looping", "time limit"),
        ("garbage", "cannot read the submission"),
    ],
)
def test_failing_submissions_get_zero_and_a_reason(graded, kind, expected):
    import re

    report = graded[1][kind]
    assert report["score"] == 0.0, report
    row = _code_exercise(report)
    assert row["passed"] is False and row["points"] == 0.0
    reason = row["message"] + " " + (report.get("error") or "")
    assert re.search(expected, reason), f"{kind}: {reason}"


def test_overriding_the_checker_does_not_help(graded):
    """The submission's own `check_additive_attention` says PASSED; the hidden tests decide."""
    row = _code_exercise(graded[1]["overriding"])
    assert "looks perfect" not in row["message"] or row["passed"] is False
    assert row["passed"] is False


def test_table_and_csv_gradebook(graded, tmp_path):
    from course_tools.grading import format_csv, format_table

    _, reports = graded
    table = format_table(reports["correct"])
    assert "4 / 4 automatic points" in table and f"{NAME}-ex1" in table
    rows = list(csv.DictReader(io.StringIO(format_csv([reports["correct"], reports["empty"]]))))
    assert [row["score"] for row in rows] == ["4", "0"]
    assert rows[0][f"{NAME}-ex1"] == "4" and rows[0][f"{NAME}-ex2"] == "hand"
    # A folder gives the CSV gradebook on the command line (an unreadable file: no kernel).
    (tmp_path / f"garbage_{NAME}.ipynb").write_text("")
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", tmp_path],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    (row,) = csv.DictReader(io.StringIO(result.stdout))
    assert row["score"] == "0" and row["max_score"] == "4" and "cannot read" in row["error"]


# ------------------------------------------------------------------------------------------
# A class: each job's process forks one grading process per submission
# ------------------------------------------------------------------------------------------


def test_a_broken_job_process_costs_one_report_and_is_restarted(tmp_path):
    """A job's process that dies (or answers garbage) fails that submission only; the next
    submission gets a new process."""
    from course_tools import grading

    zygote = grading._Zygote(40, COURSE.parent, None, True)
    try:
        zygote.command = [sys.executable, "-c", "import sys; sys.stdin.readline(); sys.exit(3)"]
        first = zygote.grade(tmp_path / f"alice_{NAME}.ipynb")
        assert first["score"] == 0.0 and "grading process failed" in first["error"], first
        assert first["submission"].endswith(f"alice_{NAME}.ipynb")
        echo = ("import json, sys\nfor line in sys.stdin:\n"
                "    path = json.loads(line)['path']\n"
                "    print(json.dumps({'submission': path, 'notebook': None, 'score': 1.0, "
                "'max_score': 4.0, 'manual_max_score': 0.0, 'error': '', 'exercises': []}), "
                "flush=True)\n")
        zygote.command = [sys.executable, "-c", echo]
        for name in ("bob", "carol"):  # a new process, kept for the next submission
            report = zygote.grade(tmp_path / f"{name}_{NAME}.ipynb")
            assert report["score"] == 1.0 and report["submission"].endswith(f"{name}_{NAME}.ipynb")
        started = zygote.process
        assert zygote.grade(tmp_path / f"dave_{NAME}.ipynb")["score"] == 1.0
        assert zygote.process is started, "one process per job, not per submission"
    finally:
        zygote.close()
    assert zygote.process is None
