"""Grading submissions without nbgrader: ``python -m lectures_lib grade SUBMISSION ...``.

For each submitted notebook (matched to the course's notebook by its exercises' ``grade_id``s,
else by file name):

1. a *grading copy* is built from the code cells of the submission's ``## Exercises`` section
   (the exercises are self-contained: they import what they use), in which every autograded test
   cell is replaced by the **course's own** copy of that cell, hidden tests included (found by
   ``grade_id``, else by its visible source). Whatever the submission did to its test cells, or
   to the checkers' names, the course's hidden tests decide;
2. the copy runs in a fresh kernel, in a separate process, under a time limit for the whole
   submission (``--timeout``, 300 s by default). Each checker call is limited too
   (``LECTURES_CHECK_TIMEOUT``: a tenth of the limit, at most 10 s) and a training function to
   half of it. A cell that runs out of time is interrupted; the process is killed if it does not
   stop; the cells that did run keep their results;
3. an exercise's points are earned when its test cell ran without an error. Written answers are
   listed with their maximum points, to be graded by hand (with the start of the answer).

A submission that cannot be read, crashes, loops or sleeps gets a report like any other, with
each exercise failed and the reason in its message.
"""

from __future__ import annotations

import argparse
import copy
import csv
import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..utils import check_path, check_positive_float
from . import ROOT
from .exercises import annotate_notebook, find_exercises, strip_solutions

__all__ = ["DEFAULT_TIMEOUT", "grade_submission", "grade_paths", "format_table", "format_csv"]

DEFAULT_TIMEOUT = 300.0
COURSE_NOTEBOOKS = ROOT / "notebooks"
_EXERCISES = re.compile(r"^##\s+Exercises?\b", re.MULTILINE)
_HEADING = re.compile(r"^##\s", re.MULTILINE)
_RESULT = re.compile(r"\[(?:PASSED|FAILED)\] [^\n]*")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _check_options(timeout: object, course: object) -> tuple[float, Path]:
    """The grader's options: a time limit in seconds (> 0, finite) and the course's folder."""
    timeout = check_positive_float(timeout, "timeout")
    course = check_path(course, "course")
    if not course.is_dir():
        raise ValueError(f"course must be the folder of the course's notebooks, got {course} "
                         "(not a folder)")
    return timeout, course


_REPORT_KEYS = ("submission", "notebook", "score", "max_score", "manual_max_score", "error",
                "exercises")


def _check_report(report: object, name: str = "report") -> None:
    """A report as :func:`grade_submission` returns it."""
    if not isinstance(report, dict):
        raise TypeError(f"{name} must be a report dict from grade_submission, got "
                        f"{type(report).__name__}")
    missing = [key for key in _REPORT_KEYS if key not in report]
    if missing:
        raise ValueError(f"{name} must be a report from grade_submission (keys "
                         f"{list(_REPORT_KEYS)}), missing {missing}")


def _course_notebooks(course: Path) -> dict[str, Path]:
    return {path.stem: path for path in sorted(course.glob("*.ipynb"))}


def _grade_ids(nb) -> set[str]:
    return {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in nb.cells} - {None}


def _match_course(path: Path, nb, course: Path) -> Path | None:
    notebooks = _course_notebooks(course)
    if nb is not None:
        ids = _grade_ids(nb)
        for stem, course_path in notebooks.items():
            if any(grade_id.startswith(f"{stem}-ex") for grade_id in ids):
                return course_path
    stem = path.stem
    for candidate, course_path in notebooks.items():
        if candidate in stem:
            return course_path
    return None


def _exercise_cells(nb) -> list[int]:
    """The code cells of the ``## Exercises`` section (every code cell if there is none)."""
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    start = next((i for i, cell in enumerate(nb.cells) if cell.cell_type == "markdown"
                  and _EXERCISES.search(cell.source)), None)
    if start is None:
        return code
    end = next((i for i, cell in enumerate(nb.cells) if i > start and cell.cell_type == "markdown"
                and _HEADING.search(cell.source)), len(nb.cells))
    return [i for i in code if start < i < end]


def _entries(course_nb, name: str) -> list[dict]:
    """One entry per exercise: id, points, and the course's test cells (or answer cells)."""
    entries = []
    for exercise in find_exercises(course_nb):
        tests = [(exercise.grade_id(name, "test", k), course_nb.cells[i])
                 for k, i in enumerate(exercise.tests)]
        answers = [exercise.grade_id(name, "answer", k) for k in range(len(exercise.answers))]
        entries.append({
            "id": f"{name}-ex{exercise.number}",
            "title": exercise.title,
            "max_points": exercise.points,
            "tests": tests,
            "answers": answers,
        })
    return entries


def _grading_copy(submission, course_nb, entries) -> tuple[object, dict[str, str]]:
    """The notebook to run, and for each test id the reason it could not be included."""
    import nbformat
    from nbformat.v4 import new_notebook

    by_id = {cell.metadata.get("nbgrader", {}).get("grade_id"): i
             for i, cell in enumerate(submission.cells)}
    by_source = {}
    for i, cell in enumerate(submission.cells):
        by_source.setdefault(cell.source.strip(), i)
    replacement, missing = {}, {}
    for entry in entries:
        for grade_id, course_cell in entry["tests"]:
            visible = strip_solutions(course_cell.source).strip()
            index = by_id.get(grade_id, by_source.get(visible))
            if index is None:
                missing[grade_id] = "its test cell is missing from the submission"
            else:
                replacement[index] = (grade_id, course_cell)
    cells = []
    for index in _exercise_cells(submission):
        cell = copy.deepcopy(submission.cells[index])
        if index in replacement:
            grade_id, course_cell = replacement[index]
            cell.source = course_cell.source
            cell.metadata["lectures_grade_id"] = grade_id
        cell.outputs, cell.execution_count = [], None
        cells.append(cell)
    for grade_id in {gid for gid, _ in replacement.values()}:
        if not any(c.metadata.get("lectures_grade_id") == grade_id for c in cells):
            missing[grade_id] = "its test cell is outside the exercises section"
    for number, cell in enumerate(cells):
        cell.id = f"grading-{number}"
    run = new_notebook(cells=cells, metadata=copy.deepcopy(course_nb.metadata))
    nbformat.validate(run)
    return run, missing


def _run_in_child(notebook_path: Path, out_path: Path, timeout: float) -> None:
    """Execute ``notebook_path`` cell by cell in a fresh kernel; save after every cell.

    Runs in the child process the grade command starts (``_execute`` subcommand)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook_path, as_version=4)
    deadline = time.monotonic() + timeout
    client = NotebookClient(nb, timeout=timeout, startup_timeout=120, kernel_name="python3",
                            allow_errors=True, interrupt_on_timeout=True,
                            resources={"metadata": {"path": str(notebook_path.parent)}})
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            client.timeout = max(1, int(remaining))
            try:
                client.execute_cell(cell, index)
            except Exception as error:  # a cell timeout that could not be interrupted, ...
                cell.outputs.append(nbformat.v4.new_output(
                    "error", ename=type(error).__name__, evalue=str(error)[:500], traceback=[]))
            cell.metadata["lectures_ran"] = True
            if time.monotonic() >= deadline - 0.5 or any(
                output.output_type == "error" and output.ename in ("KeyboardInterrupt",
                                                                    "CellTimeoutError")
                for output in cell.outputs
            ):
                cell.metadata["lectures_stopped"] = True  # it ran into the time limit
            nbformat.write(nb, out_path)


def _execute(run, timeout: float) -> tuple[object, str]:
    """Run the grading copy in a separate process; kill it at the limit. Returns (nb, note)."""
    import nbformat

    with tempfile.TemporaryDirectory(prefix="lectures-grade-") as folder:
        source, result = Path(folder) / "grading.ipynb", Path(folder) / "graded.ipynb"
        nbformat.write(run, source)
        env = dict(os.environ)
        env["LECTURES_CHECK_TIMEOUT"] = str(max(1.0, min(10.0, timeout / 10)))
        env["LECTURES_TRAIN_TIMEOUT"] = str(max(1.0, timeout / 2))
        process = subprocess.Popen(
            [sys.executable, "-m", "lectures_lib.tooling.grading", "_execute", str(source), str(result),
             "--timeout", str(timeout)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, start_new_session=True,
        )
        note = ""
        try:
            output, _ = process.communicate(timeout=timeout + 90)  # + kernel start-up
            if process.returncode:
                note = output.decode(errors="replace")[-300:]
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the kernel too: it is in the same session
            process.communicate()
            note = f"the submission ran past the time limit of {timeout:g} s and was stopped"
        graded = nbformat.read(result, as_version=4) if result.exists() else run
        return graded, note


def _text(outputs) -> tuple[list[str], list[str]]:
    """(CheckResult lines displayed, error messages) of a cell's outputs."""
    shown, errors = [], []
    for output in outputs:
        if output.output_type == "error":
            errors.append(f"{output.ename}: {_ANSI.sub('', str(output.evalue))}".strip())
        elif output.output_type == "stream":
            shown += _RESULT.findall(output.text)
        else:
            shown += _RESULT.findall(output.get("data", {}).get("text/plain", ""))
    return shown, errors


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def grade_submission(path: Path, *, timeout: float = DEFAULT_TIMEOUT,
                     course: Path = COURSE_NOTEBOOKS) -> dict:
    """Grade one submitted notebook; returns the report (see the module docstring).

    ``{"submission", "notebook", "score", "max_score", "manual_max_score", "error",
    "exercises": [{"id", "title", "points", "max_points", "passed", "manual", "message"}]}``;
    ``passed`` is None for a written answer (graded by hand).
    """
    import nbformat

    path = check_path(path, "path")
    timeout, course = _check_options(timeout, course)
    submission, error = None, ""
    try:
        submission = nbformat.read(path, as_version=4)
    except Exception as problem:  # garbage, empty file, not JSON, not a notebook, missing
        error = f"cannot read the submission ({type(problem).__name__}: {_short(str(problem), 160)})"
    course_path = _match_course(path, submission, Path(course))
    report = {"submission": str(path), "notebook": course_path.name if course_path else None,
              "score": 0.0, "max_score": 0.0, "manual_max_score": 0.0, "error": error,
              "exercises": []}
    if course_path is None:
        report["error"] = error or "no course notebook matches this submission"
        return report
    course_nb = annotate_notebook(nbformat.read(course_path, as_version=4), course_path.stem)
    entries = _entries(course_nb, course_path.stem)
    results: dict[str, tuple[bool, str]] = {}
    if submission is not None:
        try:
            run, missing = _grading_copy(submission, course_nb, entries)
        except Exception as problem:
            run, missing = None, {}
            report["error"] = f"cannot build the grading copy ({_short(str(problem), 160)})"
        for grade_id, reason in missing.items():
            results[grade_id] = (False, reason)
        if run is not None:
            graded, note = _execute(run, timeout)
            if not note and any(c.metadata.get("lectures_stopped") for c in graded.cells):
                note = (f"a cell ran into the time limit of {timeout:g} s for the submission "
                        "and was interrupted (an endless loop or a sleep at the top level?)")
            if note:
                report["error"] = _short(note)
            for cell in graded.cells:
                grade_id = cell.metadata.get("lectures_grade_id")
                if not grade_id:
                    continue
                if not cell.metadata.get("lectures_ran"):
                    results[grade_id] = (False, "not run: " + (
                        note or f"the time limit of {timeout:g} s was used up before this cell"))
                    continue
                shown, errors = _text(cell.outputs)
                if errors:
                    results[grade_id] = (False, _short(errors[-1]))
                else:
                    results[grade_id] = (True, _short(shown[0] if shown else "hidden tests passed"))
    for entry in entries:
        row = {"id": entry["id"], "title": entry["title"], "max_points": entry["max_points"],
               "points": 0.0, "passed": None, "manual": not entry["tests"], "message": ""}
        if entry["tests"]:
            share = entry["max_points"] / len(entry["tests"])
            outcomes = [results.get(gid, (False, report["error"] or "not graded"))
                        for gid, _ in entry["tests"]]
            row["passed"] = all(ok for ok, _ in outcomes)
            row["points"] = sum(share for ok, _ in outcomes if ok)
            row["message"] = "; ".join(message for _, message in outcomes)
            report["max_score"] += entry["max_points"]
            report["score"] += row["points"]
        else:
            answers = [c for c in (submission.cells if submission is not None else [])
                       if c.metadata.get("nbgrader", {}).get("grade_id") in entry["answers"]]
            answer = " ".join(" ".join(c.source.split())[-160:] for c in answers)
            row["message"] = "graded by hand; the answer cell ends: " + (
                answer or "(no answer cell found)")
            report["manual_max_score"] += entry["max_points"]
        report["exercises"].append(row)
    return report


def grade_paths(paths: list[Path], *, timeout: float = DEFAULT_TIMEOUT,
                course: Path = COURSE_NOTEBOOKS) -> tuple[list[dict], bool]:
    """Grade every notebook given or found in a given folder. Returns (reports, any_folder)."""
    if isinstance(paths, (str, os.PathLike)) or not isinstance(paths, (list, tuple)):
        raise TypeError(f"paths must be a list of paths, got {type(paths).__name__} ({paths!r:.60})")
    if not paths:
        raise ValueError("paths must name at least one notebook or folder, got an empty list")
    paths = [check_path(path, f"paths[{i}]") for i, path in enumerate(paths)]
    timeout, course = _check_options(timeout, course)
    found, any_folder = [], False
    for path in paths:
        if path.is_dir():
            any_folder = True
            found += sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        else:
            found.append(path)
    return [grade_submission(p, timeout=timeout, course=course) for p in found], any_folder


def format_table(report: dict) -> str:
    """A per-exercise table for a terminal."""
    _check_report(report)
    lines = [f"{report['submission']} ({report['notebook'] or 'unknown notebook'}): "
             f"{report['score']:g} / {report['max_score']:g} automatic points"
             + (f", + {report['manual_max_score']:g} graded by hand"
                if report["manual_max_score"] else "")]
    if report["error"]:
        lines.append(f"  note: {report['error']}")
    lines.append(f"  {'exercise':<30} {'points':>9}  {'passed':<6}  message")
    for row in report["exercises"]:
        passed = "hand" if row["manual"] else ("yes" if row["passed"] else "no")
        points = f"{row['points']:g}/{row['max_points']:g}"
        lines.append(f"  {row['id']:<30} {points:>9}  {passed:<6}  {_short(row['message'], 160)}")
    return "\n".join(lines)


def format_csv(reports: list[dict]) -> str:
    """A gradebook: one row per submission, one column per exercise (automatic points)."""
    if not isinstance(reports, (list, tuple)):
        raise TypeError(f"reports must be a list of report dicts, got {type(reports).__name__}")
    for i, report in enumerate(reports):
        _check_report(report, f"reports[{i}]")
    columns = []
    for report in reports:
        for row in report["exercises"]:
            if row["id"] not in columns:
                columns.append(row["id"])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["submission", "notebook", "score", "max_score", "manual_max_score",
                     *columns, "error"])
    for report in reports:
        points = {row["id"]: ("hand" if row["manual"] else f"{row['points']:g}")
                  for row in report["exercises"]}
        writer.writerow([report["submission"], report["notebook"] or "", f"{report['score']:g}",
                         f"{report['max_score']:g}", f"{report['manual_max_score']:g}",
                         *(points.get(c, "") for c in columns), report["error"]])
    return buffer.getvalue()


def to_json(report: dict) -> str:
    return json.dumps(report, ensure_ascii=False)


def _grade_main(args) -> int:
    try:
        reports, any_folder = grade_paths(args.submissions, timeout=args.timeout)
    except (TypeError, ValueError) as error:  # e.g. --timeout 0: the message says what is wrong
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not reports:
        print("error: no submissions found", file=sys.stderr)
        return 1
    if args.json:
        for report in reports:
            print(to_json(report), flush=True)
    elif any_folder:
        print(format_csv(reports), end="")
    else:
        print("\n\n".join(format_table(report) for report in reports))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m lectures_lib grade SUBMISSION ...`` (and the grader's internal ``_execute``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["_execute"]:  # internal: the grade command's child
        execute = argparse.ArgumentParser(prog="python -m lectures_lib.tooling.grading _execute")
        execute.add_argument("notebook", type=Path)
        execute.add_argument("out", type=Path)
        execute.add_argument("--timeout", type=float, required=True)
        args = execute.parse_args(argv[1:])
        _run_in_child(args.notebook, args.out, args.timeout)
        return 0
    parser = argparse.ArgumentParser(
        prog="python -m lectures_lib grade",
        description="Run each submission's exercises in a fresh kernel under a time limit, with "
        "the course's own test cells (hidden tests included); print a per-exercise table, one "
        "JSON object per submission (--json), or a CSV gradebook when a folder is given.",
    )
    parser.add_argument("submissions", type=Path, nargs="+",
                        help="submitted notebooks, or folders of them")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per submission, one per line")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds for each submission (default {DEFAULT_TIMEOUT:g})")
    return _grade_main(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
