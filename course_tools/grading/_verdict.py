"""One submission's verdict: its report, exercise by exercise.
"""

from __future__ import annotations

from pathlib import Path

from course_tools.grading._collect import (
    COURSE_NOTEBOOKS,
    DEFAULT_TIMEOUT,
    _assignment,
    _check_options,
    _entries,
    _grade_id,
    _source_text,
    read_submission,
)
from course_tools.grading._report import _short, clean_text
from course_tools.grading._run import REVIEW, _check_sandbox, _grade_tests
from course_tools.publish.exercises import annotate_notebook
from lectures_lib.utils import check_path


def grade_submission(path: Path, *, timeout: float = DEFAULT_TIMEOUT,
                     course: Path = COURSE_NOTEBOOKS, notebook: str | None = None,
                     sandbox: bool = True, allow_root_without_cgroup: bool = False) -> dict:
    """Grade one submitted notebook; returns the report (see the module docstring).

    ``{"submission", "notebook", "score", "max_score", "manual_max_score", "error",
    "exercises": [{"id", "title", "points", "max_points", "passed", "manual", "message",
    "review"}]}``; ``review`` is True where an exercise's rule flagged the solution for a human
    (it earned nothing; an instructor decides);
    ``passed`` is None for a written answer (graded by hand). ``notebook`` names the assignment
    (a course notebook's name); ``sandbox=False`` runs the submission without a sandbox (only in
    a throwaway machine); with ``sandbox=True`` and none available it raises
    :class:`SandboxRefused`, as it does for a grader running as root where no cgroup can limit
    the sandbox's processes (unless ``allow_root_without_cgroup``).
    """

    path = check_path(path, "path")
    timeout, course = _check_options(timeout, course)
    if notebook is not None and not isinstance(notebook, str):
        raise TypeError(f"notebook must be a course notebook's name (str) or None, got "
                        f"{type(notebook).__name__}")
    sandbox = _check_sandbox(sandbox, allow_root_without_cgroup)
    submission, unread = None, ""
    try:
        submission = read_submission(path)
    except Exception as problem:  # garbage, empty file, not JSON, not a notebook, missing,
        # too large, not a plain file, or over the grading process's memory (MemoryError)
        unread = unreadable(problem)
    return _verdict(path, submission, unread, timeout, course, notebook, sandbox)


def unreadable(problem: BaseException) -> str:
    """The report's error for a submission that cannot be read."""
    return f"cannot read the submission ({type(problem).__name__}: {_short(str(problem), 160)})"


def _verdict(path: Path, submission, unread: str, timeout: float, course: Path,
             notebook: str | None, sandbox: bool) -> dict:
    """The report of ``submission`` (the notebook read from ``path``, or None and why not)."""
    import nbformat

    report = {"submission": clean_text(path), "notebook": None, "score": 0.0, "max_score": 0.0,
              "manual_max_score": 0.0, "error": unread, "exercises": []}
    course_path, refused = _assignment(path, submission, course, notebook)
    if course_path is None:
        report["error"] = report["error"] or refused
        return report
    report["notebook"] = course_path.name
    course_nb = annotate_notebook(nbformat.read(course_path, as_version=4), course_path.stem)
    entries = _entries(course_nb, course_path.stem)
    results: dict[str, tuple[bool, str]] = {}
    if refused:
        report["error"] = refused
    elif submission is not None:
        try:
            results = _grade_tests(submission, course_nb, entries, timeout, sandbox, report)
        except Exception as problem:  # anything odd in one file: this report, not the batch
            report["error"] = f"cannot grade the submission ({type(problem).__name__}: " \
                              f"{_short(str(problem), 160)})"
    _fill_rows(report, entries, results, submission)
    return report


def _fill_rows(report, entries, results, submission) -> None:
    for entry in entries:
        row = {"id": entry["id"], "title": clean_text(entry["title"]),
               "max_points": entry["max_points"], "points": 0.0, "passed": None,
               "manual": not entry["tests"], "message": "", "review": False}
        if entry["tests"]:
            share = entry["max_points"] / len(entry["tests"])
            outcomes = [results.get(gid, (False, report["error"] or "not graded"))
                        for gid, _ in entry["tests"]]
            row["passed"] = all(ok for ok, _ in outcomes)
            row["points"] = sum(share for ok, _ in outcomes if ok)
            row["message"] = "; ".join(message for _, message in outcomes)
            row["review"] = any(message.startswith(REVIEW) for _, message in outcomes)
            report["max_score"] += entry["max_points"]
            report["score"] += row["points"]
        else:
            answers = [c for c in (submission.cells if submission is not None else [])
                       if _grade_id(c) in entry["answers"]]
            try:
                answer = " ".join(" ".join(_source_text(c).split())[-160:] for c in answers)
            except ValueError:
                answer = ""
            row["message"] = _short("graded by hand; the answer cell ends: " + (
                answer or "(no answer cell found)"), 400)
            report["manual_max_score"] += entry["max_points"]
        report["exercises"].append(row)
