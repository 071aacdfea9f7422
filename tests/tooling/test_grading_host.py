"""What the grader leaves on its own machine (issue 33, item 6), one cause at a time:

1. a job's files (``/tmp/lectures-job-*/spec.json``: a student's code, the graded task variant)
   are private to the grader while it grades, and the sandboxed worker still reads them;
2. ``--format nbgrader-csv`` takes student ids from an explicit source (a CSV that maps each
   submission to its id, or nbgrader's ``submitted/<student>/<assignment>/`` folders), never
   from a file name; it refuses an id that is not a plain identifier, and no cell of a gradebook
   starts a spreadsheet formula;
3. a submission's name (a file name may hold a newline) is printed on one line in the table
   report, the CSV gradebook and the JSON lines: it cannot forge a line of the report.
"""

from __future__ import annotations

import csv
import io
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from course_tools import grading
from course_tools.grading import sandbox

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
# skips naming the package without it, fails under CI (tests/conftest.py)
needs_sandbox = pytest.mark.system_package("bubblewrap")


# ------------------------------------------------------------------------------------------
# 1. A job's files are the grader's alone
# ------------------------------------------------------------------------------------------


@needs_sandbox
def test_a_jobs_spec_is_private_to_the_grader_and_read_by_its_worker():
    secret = "answer = 'only the grader may read this cell'"
    session = sandbox.Session([secret], grading._student_checks(),
                              deadline=time.monotonic() + 60)
    with session:
        session.start()
        job = Path(session._folder.name)
        for path in (job, job / "spec.json"):
            mode = stat.S_IMODE(os.stat(path).st_mode)
            assert mode & 0o077 == 0, f"{path} is open to other local users: {oct(mode)}"
            assert os.stat(path).st_uid == os.geteuid()
        assert secret in (job / "spec.json").read_text()
        assert session.run_until(1) == []  # the sandboxed worker read its cells all the same
        assert session.lookup("answer") == "only the grader may read this cell"
        if os.geteuid() == 0 and subprocess.run(["which", "setpriv"],
                                                capture_output=True).returncode == 0:
            other = subprocess.run(["setpriv", "--reuid", "65533", "--regid", "65533",
                                    "--clear-groups", "cat", str(job / "spec.json")],
                                   capture_output=True, text=True)
            assert other.returncode != 0 and secret not in other.stdout, other


# ------------------------------------------------------------------------------------------
# 2. nbgrader-csv: ids from the instructor's source; no cell is a formula
# ------------------------------------------------------------------------------------------

NAME = "01_self_attention"


def _grade(*args: object) -> subprocess.CompletedProcess:
    """The grade command on unreadable (empty) submissions: a report each, no kernel."""
    return subprocess.run([sys.executable, "-m", "course_tools", "grade", *map(str, args),
                           "--quiet"], capture_output=True, text=True, timeout=300, cwd=ROOT)


def _empty(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    return path


@needs_sandbox  # the grade command refuses to run without its sandbox
def test_nbgrader_csv_takes_ids_from_a_file_the_instructor_holds(tmp_path):
    folder = tmp_path / "submissions"
    # Bob hands in a file named for Alice, and one named as a formula; neither name is an id.
    bob = _empty(folder / f"alice_{NAME}.ipynb")
    carol = _empty(folder / f'=HYPERLINK("x")_{NAME}.ipynb')
    ids = tmp_path / "ids.csv"

    def write_ids(*rows):
        with ids.open("w", newline="") as file:
            csv.writer(file).writerows([("submission", "student_id"), *rows])

    write_ids((f"submissions/{bob.name}", "bob"), (f"submissions/{carol.name}", "carol"))
    result = _grade(folder, "--format", "nbgrader-csv", "--student-ids", ids)
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert sorted(row["student_id"] for row in rows) == ["bob", "carol"], result.stdout
    assert {row["assignment"] for row in rows} == {NAME}
    assert not any(cell.startswith(("=", "+", "-", "@")) for row in rows
                   for cell in row.values()), result.stdout
    # Without a source of ids the command refuses before grading; so it does for a missing id
    # and for an id that is not a plain identifier.
    refused = _grade(folder, "--format", "nbgrader-csv")
    assert refused.returncode == 2 and "--student-ids" in refused.stderr, refused.stderr
    write_ids((f"submissions/{bob.name}", "bob"))
    refused = _grade(folder, "--format", "nbgrader-csv", "--student-ids", ids)
    assert refused.returncode == 2 and "gives no id for 1 submission" in refused.stderr, \
        refused.stderr
    write_ids((f"submissions/{bob.name}", "bob"), (str(carol), "=1+1"))  # (a path, absolute)
    refused = _grade(folder, "--format", "nbgrader-csv", "--student-ids", ids)
    assert refused.returncode == 2 and "must be a plain student id" in refused.stderr, \
        refused.stderr


def test_nbgrader_csv_takes_ids_from_nbgrader_folders():
    from course_tools.grading import ids_from_csv, ids_from_folders  # noqa: F401

    submitted = Path("/course/submitted")
    paths = [submitted / "alice" / "ps1" / f"{NAME}.ipynb",
             submitted / "bob" / "ps1" / f"{NAME}.ipynb"]
    assert ids_from_folders(paths) == ["alice", "bob"]
    with pytest.raises(ValueError, match="not in nbgrader's layout"):
        ids_from_folders([Path(f"/elsewhere/alice_{NAME}.ipynb")])
    with pytest.raises(ValueError, match="must be a plain student id"):
        ids_from_folders([submitted / "=cmd" / "ps1" / f"{NAME}.ipynb"])


def test_no_gradebook_cell_is_a_formula():
    report = {"submission": "=cmd|' /C calc'!A0", "notebook": f"{NAME}.ipynb", "score": 0.0,
              "max_score": 4.0, "manual_max_score": 0.0, "error": "@SUM(1+1)", "exercises": []}
    (row,) = csv.DictReader(io.StringIO(grading.format_csv([report])))
    assert row["submission"] == "'=cmd|' /C calc'!A0" and row["error"] == "'@SUM(1+1)"
    with pytest.raises(ValueError, match="must be a plain student id"):
        grading.format_nbgrader_csv([report], ["+alice"])
    (row,) = csv.DictReader(io.StringIO(grading.format_nbgrader_csv([report], ["alice"])))
    assert row["student_id"] == "alice" and row["assignment"] == NAME


# ------------------------------------------------------------------------------------------
# 3. A submission's name is printed on one line
# ------------------------------------------------------------------------------------------

FORGED = f"evil\nforged ({NAME}.ipynb): 4 / 4 automatic points"


@needs_sandbox  # the grade command refuses to run without its sandbox
def test_a_newline_in_a_file_name_forges_no_line_of_a_report(tmp_path):
    folder = tmp_path / "submissions"
    newline = _empty(folder / f"{FORGED}_{NAME}.ipynb")
    separator = _empty(folder / f"evil\u2028forged\x85too_{NAME}.ipynb")
    table = _grade(newline, "--format", "table")
    assert table.returncode == 0, table.stderr
    assert not any(line.startswith("forged") for line in table.stdout.splitlines()), table.stdout
    assert "evil\\nforged" in table.stdout.splitlines()[0]
    lines = _grade(folder, "--format", "json")
    assert lines.returncode == 0, lines.stderr
    reports = [json.loads(line) for line in lines.stdout.splitlines()]  # splitlines: every break
    assert sorted(report["submission"] for report in reports) == sorted(
        [str(newline), str(separator).replace("\x85", "")])  # (control characters removed)
    for report in reports:
        for text in (grading.format_table(report), grading.format_csv([report])):
            assert text.splitlines() == text.rstrip("\n").split("\n"), repr(text)  # no U+2028
            assert not any(line.startswith(("forged", "too")) for line in text.splitlines())
        assert len(grading.format_table(report).splitlines()) == 3 + len(report["exercises"])


# ------------------------------------------------------------------------------------------
# 4. One bad submission never costs the others their rows (issue 38, cause 7)
# ------------------------------------------------------------------------------------------


def _released(path: Path) -> Path:
    """The student version of 01 (its exercises' ids name 01) at ``path``, under any name."""
    import nbformat

    from course_tools.publish.exercises import release_notebook

    course = nbformat.read(ROOT / "notebooks" / f"{NAME}.ipynb", as_version=4)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(release_notebook(course, NAME), path)
    return path


@needs_sandbox  # the grade command refuses to run without its sandbox
def test_a_second_notebook_for_one_assignment_gets_its_own_row_and_loses_no_other(tmp_path):
    submitted = tmp_path / "submitted"
    alice = _empty(submitted / "alice" / NAME / f"{NAME}.ipynb")
    copy = _empty(submitted / "alice" / NAME / f"{NAME}-Copy1.ipynb")  # JupyterLab's copy
    bob = _empty(submitted / "bob" / NAME / f"{NAME}.ipynb")
    _empty(submitted / "carol" / NAME / "notes.ipynb")  # not a course notebook
    # two notebooks of 01 (their ids say so), neither under the assignment's own name
    dave = [_released(submitted / "dave" / NAME / name) for name in ("a.ipynb", "b.ipynb")]
    result = _grade(submitted, bob, "--format", "nbgrader-csv", "--student-ids-from-folders")
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [row["student_id"] for row in rows] == ["alice", "alice", "bob", "carol", "dave",
                                                   "dave", "bob"], result.stdout
    graded = [row for row in rows if row["score"] != ""]
    assert len(graded) == 3, result.stdout  # alice's own file, bob once, carol's unread file
    # alice's own file is graded; her copy has a row with no score that says why
    (copy_row,) = [row for row in rows if f"{copy.name}" in row["note"]
                   and row["score"] == ""]
    assert copy_row["student_id"] == "alice" and copy_row["assignment"] == NAME
    (own,) = [row for row in rows[:2] if row is not copy_row]
    assert own["score"] == "0.0" and "cannot read the submission" in own["note"], own
    assert alice.name in copy_row["note"]
    assert "handed in 2 notebooks" in copy_row["note"] and "is graded" in copy_row["note"]
    # bob's file given twice: graded once
    assert rows[-1]["score"] == "" and "given twice" in rows[-1]["note"], rows[-1]
    assert rows[2]["score"] == "0.0" and rows[2]["student_id"] == "bob"
    # carol's notebook names no assignment: a row of its own with the reason
    assert rows[3]["assignment"] == "" and "no course notebook matches" in rows[3]["note"]
    # dave's two copies of 01: neither graded, each row saying so, naming the other
    for row in rows[4:6]:
        assert row["score"] == "" and row["assignment"] == NAME, row
        assert "none is graded" in row["note"] and all(p.name in row["note"] for p in dave)


@needs_sandbox  # the grade command refuses to run without its sandbox
def test_a_file_name_that_is_not_utf8_loses_no_gradebook(tmp_path):
    folder = tmp_path / "submissions"
    good = _empty(folder / f"good_{NAME}.ipynb")
    bad = Path(os.fsdecode(bytes(folder) + b"/\xff_" + NAME.encode() + b".ipynb"))
    _empty(bad)
    for format in ("csv", "json", "table"):
        book = tmp_path / f"book.{format}"
        result = _grade(folder, "--format", format, "-o", book)
        assert result.returncode == 0, result.stderr
        text = book.read_text(encoding="utf-8")
        assert str(good) in text and "\\udcff_" + NAME in text, text
        assert "the grading process failed" not in text, text  # the bad one graded too
