"""Grading submissions without nbgrader: ``python -m lectures_lib grade SUBMISSION ...``.

What a submission can and cannot do. Each submission is graded on its own:

1. its assignment is the one named with ``--notebook``, else the one its exercises' ``grade_id``s
   name (else its file name); a notebook whose ids name another assignment earns nothing for
   this one (a solved 01 handed in as 05 gets 0 for 05);
2. the code cells of its ``## Exercises`` section run in a **sandboxed worker process**
   (:mod:`lectures_lib.tooling.sandbox`: bubblewrap, an unprivileged user, no network, a
   read-only library whose ``checks`` hold no checker, reference or probe, a private scratch
   folder, sized writable mounts, hard rlimits on address space, file size, CPU time and open
   files, and a cgroup of its own whose ``pids.max`` and memory limit hold for root too; every
   process it starts ends with it). Its own test cells never run;
3. the **course's** test cells (hidden tests included) run here, in the grader, with the
   course's checkers. The names they use that the course's own imports do not bind (the
   student's function, training function or model) are stand-ins: calling one sends the probe's
   tensors to the worker and brings back its answer as plain data (:mod:`lectures_lib.tooling.
   wire`: ``torch.load(weights_only=True)``, never an unpickled object). The expected answers,
   probes and verdict never enter the submission's process, so patching checkers, ``assert``,
   builtins or IPython there, or reading frames, gains nothing. Nothing the submission names is
   imported, run or looked up here (a module is a stand-in too), every answer is decoded under a
   budget (:data:`~lectures_lib.tooling.sandbox.BUDGET`) and the call's deadline, and the
   grader never imports from the folder it grades in (:func:`_safe_python`);
4. an exercise's points are earned when its test cell ran here without an error; a checker that
   reports a failure fails the cell's ``assert``. Written answers are listed with their maximum
   points, to be graded by hand (with the start of the answer).

A submission that cannot be read (not a plain file, over :data:`MAX_SUBMISSION_BYTES`),
crashes, loops, sleeps, exits, floods its output or breaks the protocol gets a report like any
other, each exercise failed and the reason in its message; the batch goes on. Each
submission's grading process (the trusted side) has a memory limit of its own
(:data:`GRADER_MEMORY` of data, ``RLIMIT_DATA``). Folders are graded in parallel (``--jobs``: each job is a trusted process that
imports the grader once and forks a fresh grading process per submission, each with its own
sandbox, so no state of one submission's grading reaches the next), with a progress bar on
stderr. Reports are plain text: terminal control characters are removed.

What it cannot see: a student who copies the public reference solution (the notebooks are in a
public repository) writes correct code; exercises for credit need private variants. Where no
sandbox can be made (no bubblewrap, user namespaces disabled) the command refuses to grade
unless ``--no-sandbox`` is given: the verdict stays outside the submission's process, but its
code then runs with the grader's rights (do that only in a throwaway container or VM). Run as
root where no cgroup can be made, it refuses too (the kernel does not apply ``RLIMIT_NPROC`` to
root, so nothing would limit a submission's processes) unless ``--root-without-cgroup``.
"""

from __future__ import annotations

import argparse
import ast
import builtins
import csv
import gc
import hashlib
import importlib
import io
import json
import os
import queue
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..utils import check_path, check_positive_float
from . import ROOT
from .exercises import annotate_notebook, find_exercises, strip_solutions
from .exercises import exercise_cells as _exercise_cells

__all__ = ["DEFAULT_TIMEOUT", "SandboxRefused", "grade_submission", "grade_paths",
           "format_table", "format_csv", "format_nbgrader_csv", "clean_text"]

DEFAULT_TIMEOUT = 300.0
SECRET_ENV = "LECTURES_GRADING_SECRET"  # the same name as lectures_lib.checks._base.SECRET_ENV
COURSE_NOTEBOOKS = ROOT / "notebooks"
# Terminal control: CSI/OSC escape sequences first, then every other C0/C1 control character.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class SandboxRefused(RuntimeError):
    """No sandbox can be made here and ``sandbox=False`` (``--no-sandbox``) was not given."""


def clean_text(text: object) -> str:
    """``text`` without terminal escape sequences or control characters (tabs, newlines kept)."""
    return _CONTROL.sub("", _ESCAPES.sub("", str(text)))


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


def _nbgrader_meta(cell) -> dict:
    meta = cell.get("metadata", {}) if isinstance(cell, dict) else {}
    meta = meta.get("nbgrader", {}) if isinstance(meta, dict) else {}
    return meta if isinstance(meta, dict) else {}


def _grade_id(cell) -> str | None:
    grade_id = _nbgrader_meta(cell).get("grade_id")
    return grade_id if isinstance(grade_id, str) else None


def _source_text(cell) -> str:
    source = cell.get("source", "") if isinstance(cell, dict) else ""
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return "".join(source)
    if not isinstance(source, str):
        raise ValueError(f"a cell's source is a {type(source).__name__}, not text")
    return source


def _named_assignments(nb, notebooks: dict[str, Path]) -> set[str]:
    """The course notebooks the submission's grade_ids say it is (``{stem}-ex...``, ``-cell-``)."""
    ids = {_grade_id(cell) for cell in nb.cells} - {None}
    return {stem for stem in notebooks
            if any(grade_id.startswith((f"{stem}-ex", f"{stem}-cell-")) for grade_id in ids)}


def _assignment(path: Path, nb, course: Path, notebook: str | None) -> tuple[Path | None, str]:
    """(the course notebook to grade against, or None; the reason when it is refused)."""
    notebooks = _course_notebooks(course)
    named = _named_assignments(nb, notebooks) if nb is not None else set()
    if notebook is not None:
        stem = Path(notebook).stem
        if stem not in notebooks:
            return None, (f"--notebook {notebook!r} is not a notebook of the course (choose from "
                          f"{', '.join(notebooks)})")
        others = named - {stem}
        if others:
            return notebooks[stem], (f"this submission is {', '.join(sorted(others))} (its "
                                     f"exercises' ids say so), not {stem}: it earns nothing "
                                     f"for {stem}")
        return notebooks[stem], ""
    if len(named) == 1:
        return notebooks[named.pop()], ""
    if len(named) > 1:
        return None, (f"the submission's exercise ids name several assignments "
                      f"({', '.join(sorted(named))}): grade it with --notebook NAME")
    matches = [stem for stem in notebooks if stem in path.stem]
    if matches:
        return notebooks[max(matches, key=len)], ""
    return None, "no course notebook matches this submission (grade it with --notebook NAME)"


def _plan(submission, course_nb, entries) -> tuple[list[str], list[tuple], dict[str, str]]:
    """The submission's program (its exercise cells but the test cells), the course's tests
    with the number of program cells to run before each, and the tests that cannot run."""
    by_id, by_source = {}, {}
    for i, cell in enumerate(submission.cells):
        grade_id = _grade_id(cell)
        if grade_id is not None:
            by_id.setdefault(grade_id, i)
        by_source.setdefault(_source_text(cell).strip(), i)
    replacement, missing = {}, {}
    for entry in entries:
        for grade_id, course_cell in entry["tests"]:
            visible = strip_solutions(course_cell.source).strip()
            index = by_id.get(grade_id, by_source.get(visible))
            if index is None:
                missing[grade_id] = "its test cell is missing from the submission"
            else:
                replacement.setdefault(index, (grade_id, course_cell.source))
    cells, tests = [], []
    for index in _exercise_cells(submission):
        if index in replacement:
            tests.append((len(cells), *replacement.pop(index)))
        else:
            cells.append(_source_text(submission.cells[index]))
    for grade_id, _ in replacement.values():
        missing[grade_id] = "its test cell is outside the exercises section"
    return cells, tests, missing


# --------------------------------------------------------------------------------------------
# Running the course's test cells here, against the submission's stand-ins
# --------------------------------------------------------------------------------------------


def _course_imports(course_nb) -> str:
    """Every import statement of the course's exercise cells: what its test cells' names mean."""
    statements = []
    for index in _exercise_cells(course_nb):
        try:
            tree = ast.parse(course_nb.cells[index].source)
        except SyntaxError:
            continue
        statements += [ast.unparse(node) for node in tree.body
                       if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(dict.fromkeys(statements))


def _free_names(source: str) -> list[str]:
    tree = ast.parse(source)
    loaded, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded.append(node.id) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
    return [name for name in dict.fromkeys(loaded) if name not in bound]


# With a rule to enforce, a solution may not reach names indirectly either.
_INDIRECT = {"getattr", "setattr", "exec", "eval", "compile", "__import__", "importlib",
             "globals", "vars", "locals", "__dict__", "_C", "__getattribute__"}


def _rule_broken(sources: list[str], checks: list) -> str:
    """The first place the exercise's solution breaks a rule its checkers state, or ''."""
    from .worker import _python_source

    forbidden = [word for check in checks for word in getattr(check, "forbidden", ())]
    limits = {k: v for check in checks for k, v in getattr(check, "positional_limit", {}).items()}
    if not forbidden and not limits:
        return ""
    for source in sources:
        try:
            tree = ast.parse(_python_source(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            words = []
            if isinstance(node, ast.Name):
                words.append(node.id)
            elif isinstance(node, ast.Attribute):
                words.append(node.attr)
            elif isinstance(node, ast.keyword):
                if node.arg is None:
                    return ("it passes keyword arguments with ** (the exercise's rule forbids "
                            f"{', '.join(map(repr, forbidden))}: pass them by name)")
                words.append(node.arg)
            elif isinstance(node, ast.alias):
                words += [node.name, node.asname or ""]
            elif isinstance(node, ast.Call):
                called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
                    node.func, "id", "")
                if called in limits and (len(node.args) > limits[called] or any(
                        isinstance(arg, ast.Starred) for arg in node.args)):
                    return (f"it passes {len(node.args)} positional arguments to {called} (at "
                            f"most {limits[called]}: the next one is forbidden by the exercise)")
            for word in words:
                if word in forbidden:
                    return f"it uses `{word}`, which the exercise forbids"
                if word in _INDIRECT:
                    return (f"it uses `{word}`: an exercise with a rule (no "
                            f"{', '.join(map(repr, forbidden))}) is solved without reaching "
                            "names indirectly")
    return ""


def _run_test(source: str, imports: str, session, solution: list[str] = ()) -> tuple[bool, str]:
    """Run one course test cell here; (passed, message). The student's names are stand-ins;
    ``solution`` is the exercise's source, held to the rules its checkers state."""
    from .sandbox import SandboxError

    shown: list = []
    namespace: dict = {"__name__": "__course_test__"}
    exec(compile(imports, "<course imports>", "exec"), namespace)  # noqa: S102 - course code
    namespace["display"] = lambda *objects, **_: shown.extend(objects)
    checks = [value for value in namespace.values()  # the checkers this test cell calls
              if hasattr(value, "forbidden") and getattr(value, "__name__", "?") in source]
    broken = _rule_broken(list(solution), checks)
    if broken:
        return False, f"the solution breaks the exercise's rule: {broken}"
    try:
        for name in _free_names(source):
            if name in namespace or hasattr(builtins, name):
                continue
            try:  # data, or a stand-in (a module too): nothing it names is imported here
                namespace[name] = session.lookup(name)
            except NameError:
                continue  # the cell's NameError says it
        exec(compile(source, "<course test cell>", "exec"), namespace)  # noqa: S102
    except BaseException as error:  # an assert, a NameError, the sandbox's end, ...
        failed = [str(item) for item in shown if getattr(item, "passed", True) is False]
        if failed:  # the first check that failed says the most (e.g. "timed out")
            return False, clean_text(failed[0])
        if isinstance(error, SandboxError):
            return False, str(error)
        if isinstance(error, AssertionError):
            return False, clean_text(str(error) or "an assert of the hidden tests failed")
        return False, clean_text(f"{type(error).__name__}: {error}")
    results = [str(item) for item in shown if hasattr(item, "passed")]
    return True, results[0] if results else "hidden tests passed"


_STUDENT_CHECKS: dict[str, Path] = {}


def _student_checks() -> Path:
    """The sandbox's stand-in for lectures_lib.checks, written once per grading process."""
    if "path" not in _STUDENT_CHECKS:
        from .sandbox import student_checks

        folder = tempfile.mkdtemp(prefix="lectures-student-checks-")
        os.chmod(folder, 0o755)
        _STUDENT_CHECKS["path"] = student_checks(Path(folder) / "checks")
    return _STUDENT_CHECKS["path"]


MAX_SUBMISSION_BYTES = 16 * 2**20  # 20 times the course's largest notebook with its outputs


def read_submission(path: Path, max_bytes: int = MAX_SUBMISSION_BYTES):
    """The submitted notebook at ``path`` (nbformat 4), its outputs dropped (grading runs the
    code again), read without trusting its size.

    Refused before parsing: anything but a plain file (a link, a FIFO, a device), and a file over
    ``max_bytes`` (at most ``max_bytes + 1`` bytes are ever read). The JSON is parsed here,
    once; nbformat then sees only the cells' sources and metadata. In the grade command this
    runs in the submission's own grading process, under its memory limit
    (:data:`GRADER_MEMORY`)."""
    import stat

    import nbformat

    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if Path(path).is_symlink():
            raise ValueError("it is a symbolic link, not a file: hand in the notebook itself") \
                from None
        raise error from None
    with os.fdopen(fd, "rb") as file:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError("it is not a plain file")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"it is over {max_bytes // 2**20} MiB (a notebook of the course is "
                         "under 1 MiB with its outputs; clear large outputs and hand it in again)")
    tree = json.loads(data)
    del data
    if isinstance(tree, dict) and isinstance(tree.get("cells"), list):
        for cell in tree["cells"]:
            if isinstance(cell, dict):
                cell.pop("attachments", None)
                if cell.get("cell_type") == "code":
                    cell["outputs"], cell["execution_count"] = [], None
    notebook = nbformat.reads(json.dumps(tree), as_version=4)
    if not isinstance(getattr(notebook, "cells", None), list):
        raise ValueError("it has no list of cells")
    return notebook


def _check_sandbox(sandbox: object, allow_root_without_cgroup: object = False) -> bool:
    if not isinstance(sandbox, bool):
        raise TypeError(f"sandbox must be a bool, got {type(sandbox).__name__} ({sandbox!r:.40})")
    if not isinstance(allow_root_without_cgroup, bool):
        raise TypeError("allow_root_without_cgroup must be a bool, got "
                        f"{type(allow_root_without_cgroup).__name__}")
    if sandbox:
        from .sandbox import sandbox_problem

        problem = sandbox_problem(allow_root_without_cgroup)
        if problem:
            raise SandboxRefused(
                f"refusing to grade without a sandbox: {problem}. Student code would run with "
                "your rights and could read or change the course, the gradebook and the other "
                "submissions. Install bubblewrap, or grade inside a throwaway container or VM "
                "with --no-sandbox (sandbox=False)")
    return sandbox


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(clean_text(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def grade_submission(path: Path, *, timeout: float = DEFAULT_TIMEOUT,
                     course: Path = COURSE_NOTEBOOKS, notebook: str | None = None,
                     sandbox: bool = True, allow_root_without_cgroup: bool = False) -> dict:
    """Grade one submitted notebook; returns the report (see the module docstring).

    ``{"submission", "notebook", "score", "max_score", "manual_max_score", "error",
    "exercises": [{"id", "title", "points", "max_points", "passed", "manual", "message"}]}``;
    ``passed`` is None for a written answer (graded by hand). ``notebook`` names the assignment
    (a course notebook's name); ``sandbox=False`` runs the submission without a sandbox (only in
    a throwaway machine); with ``sandbox=True`` and none available it raises
    :class:`SandboxRefused`, as it does for a grader running as root where no cgroup can limit
    the sandbox's processes (unless ``allow_root_without_cgroup``).
    """
    import nbformat

    path = check_path(path, "path")
    timeout, course = _check_options(timeout, course)
    if notebook is not None and not isinstance(notebook, str):
        raise TypeError(f"notebook must be a course notebook's name (str) or None, got "
                        f"{type(notebook).__name__}")
    sandbox = _check_sandbox(sandbox, allow_root_without_cgroup)
    report = {"submission": clean_text(path), "notebook": None, "score": 0.0, "max_score": 0.0,
              "manual_max_score": 0.0, "error": "", "exercises": []}
    submission = None
    try:
        submission = read_submission(path)
    except Exception as problem:  # garbage, empty file, not JSON, not a notebook, missing,
        # too large, not a plain file, or over the grading process's memory (MemoryError)
        submission = None
        report["error"] = (f"cannot read the submission ({type(problem).__name__}: "
                           f"{_short(str(problem), 160)})")
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


def _grade_tests(submission, course_nb, entries, timeout, sandbox, report) -> dict:
    from .sandbox import SandboxError, Session

    cells, tests, missing = _plan(submission, course_nb, entries)
    results = {grade_id: (False, reason) for grade_id, reason in missing.items()}
    if not tests:
        return results
    imports = _course_imports(course_nb)
    deadline = time.monotonic() + timeout
    call_timeout = max(1.0, min(10.0, timeout / 10))
    with Session(cells, _student_checks(), deadline=deadline, sandbox=sandbox,
                 call_timeout=call_timeout) as session:
        session.start()
        cell_errors: list = []
        for position, grade_id, source in tests:
            try:
                if session.dead_reason and time.monotonic() < deadline and session.ran:
                    session.close()  # a call ran out of time: a fresh run for the next test
                    session.start()
                if session.ran < position or session.ran == 0:
                    cell_errors += session.run_until(position)
            except SandboxError as error:
                results[grade_id] = (False, "not run: " + str(error))
                report["error"] = report["error"] or _short(str(error))
                continue
            previous = max([p for p, _, _ in tests if p < position], default=0)
            passed, message = _run_test(source, imports, session, cells[previous:position])
            if not passed and cell_errors:
                index, problem = cell_errors[0]
                message += f" (cell {index + 1} of your exercises raised {problem})"
            results[grade_id] = (passed, _short(message))
    return results


def _fill_rows(report, entries, results, submission) -> None:
    for entry in entries:
        row = {"id": entry["id"], "title": clean_text(entry["title"]),
               "max_points": entry["max_points"], "points": 0.0, "passed": None,
               "manual": not entry["tests"], "message": ""}
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
                       if _grade_id(c) in entry["answers"]]
            try:
                answer = " ".join(" ".join(_source_text(c).split())[-160:] for c in answers)
            except ValueError:
                answer = ""
            row["message"] = _short("graded by hand; the answer cell ends: " + (
                answer or "(no answer cell found)"), 400)
            report["manual_max_score"] += entry["max_points"]
        report["exercises"].append(row)


# --------------------------------------------------------------------------------------------
# A class: per job, one trusted process that imports the grader once (a "zygote") and forks a
# fresh grading process for each submission; each submission keeps its own sandbox
# --------------------------------------------------------------------------------------------


def _find(paths) -> tuple[list[Path], bool]:
    found, any_folder = [], False
    for path in paths:
        if path.is_dir():
            any_folder = True
            found += sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        else:
            found.append(path)
    return found, any_folder


def _failed_report(path: Path, reason: str) -> dict:
    return {"submission": clean_text(path), "notebook": None, "score": 0.0, "max_score": 0.0,
            "manual_max_score": 0.0, "error": _short(reason), "exercises": []}


_REPORT_BYTES = 4 * 2**20  # a report is a few kB; more is a broken grading process
_GRACE = 120.0  # seconds past the submission's limit before its grading process is killed


def _safe_python() -> list[str]:
    """How the grader starts itself: a Python whose ``sys.path`` holds neither its working
    directory nor a script's folder (``-P``; on Python < 3.11, ``-I``), so no file handed in
    beside the submissions (or in the folder it grades from) is ever imported by the grader. The folder that
    holds this ``lectures_lib`` is *appended* (after site-packages), for a clone run without
    an install."""
    flag = "-P" if sys.version_info >= (3, 11) else "-I"
    here = str(Path(__file__).resolve().parents[2])
    code = (f"import sys; sys.path.append({here!r}); "
            "from lectures_lib.tooling.grading import main; raise SystemExit(main(sys.argv[1:]))")
    return [sys.executable, flag, "-c", code]


def safe_sys_path() -> None:
    """Drop from this process's ``sys.path`` its working directory and ``''`` (what ``python -m``
    and ``-c`` put first): the grade command never imports from where it was started, which may
    be the folder the submissions and their handed-in files lie in."""
    cwd = os.getcwd()
    keep = []
    for entry in sys.path:
        try:
            unsafe = entry in ("", ".") or os.path.samefile(entry, cwd)
        except OSError:
            unsafe = False
        if not unsafe:
            keep.append(entry)
    sys.path[:] = keep


def _grader_env(timeout: float) -> dict:
    """The grading processes' environment: one thread each (``--jobs`` of them share the cores),
    the checkers' time limits derived from ``--timeout``."""
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                LECTURES_CHECK_TIMEOUT=str(max(1.0, min(10.0, timeout / 10))),
                LECTURES_TRAIN_TIMEOUT=str(max(1.0, timeout / 2)))


def _read_line(fd: int, deadline: float, limit: int = _REPORT_BYTES) -> bytes | None:
    """Bytes from ``fd`` up to the first newline (or the end), ``None`` past the deadline or
    the limit."""
    chunks, size = [], 0
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 2**16)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        size += len(chunk)
        if b"\n" in chunk:
            return b"".join(chunks).split(b"\n", 1)[0]
        if size > limit:
            return None


def _parse_report(data: bytes | None, path: Path, why: str) -> dict:
    try:
        report = json.loads((data or b"").decode(errors="replace").strip())
        _check_report(report)
        return report
    except (ValueError, TypeError):
        return _failed_report(path, why)


def _fork_and_grade(path: Path, args) -> dict:
    """Grade ``path`` in a forked copy of this process (the grader already imported): its state,
    whatever the submission's answers did to it, ends with it."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the grading process of this submission
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            _limit_memory(GRADER_MEMORY)
            report = _grade_one(path, args)
            data = memoryview(to_json(report).encode() + b"\n")
            while data:
                data = data[os.write(write_fd, data):]
        finally:
            os._exit(0)
    os.close(write_fd)
    try:
        data = _read_line(read_fd, time.monotonic() + args.timeout + _GRACE)
        if data is None:
            os.killpg(pid, signal.SIGKILL)
    finally:
        os.close(read_fd)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything it left (the sandboxes end with their parent)
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    if data is None:
        return _failed_report(path, f"grading ran past {args.timeout + _GRACE:g} s and was "
                                    "stopped")
    return _parse_report(data, path, f"the grading process failed (exit status "
                                     f"{os.waitstatus_to_exitcode(status)})")


GRADER_MEMORY = 4 * 2**30  # bytes a submission's grading process may add to the zygote's


def _limit_memory(budget: int) -> None:
    """Cap this process's data (heap and private mappings: ``RLIMIT_DATA``, which holds for root
    too) at what it holds now plus ``budget``: parsing a submission, decoding its answers and
    rebuilding its model then raise MemoryError instead of taking the machine."""
    import resource

    try:
        status = Path("/proc/self/status").read_text()
        held = int(re.search(r"^VmData:\s+(\d+) kB", status, re.M).group(1)) * 1024
    except (OSError, AttributeError, ValueError):
        held = 0
    limit = held + budget
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def _grade_one(path: Path, args) -> dict:
    try:
        return grade_submission(path, timeout=args.timeout, course=args.course,
                                notebook=args.notebook, sandbox=not args.no_sandbox,
                                allow_root_without_cgroup=args.root_without_cgroup)
    except Exception as error:
        return _failed_report(path, f"{type(error).__name__}: {error}")


def _preload() -> None:
    """What every grading process needs, imported once per job instead of once per submission
    (PyTorch, nbformat and the checkers take seconds of CPU to import)."""
    import pkgutil

    import nbformat  # noqa: F401
    import torch

    from .. import checks, decoding, models, training  # noqa: F401
    from . import sandbox, wire, worker  # noqa: F401

    torch.set_num_threads(1)
    for module in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"{checks.__name__}.{module.name}")
    worker._python_source("%time x = 1")  # IPython's input transformer


def _zygote_main(argv: list[str]) -> int:
    """Internal: grade the submissions named on stdin (a JSON line each), one forked grading
    process each; print each report as a JSON line."""
    args = _one_parser("_zygote").parse_args(argv)
    requests, reports = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the grading processes print goes nowhere
        os.dup2(quiet, fd)
    _preload()
    _student_checks()
    gc.freeze()  # the forked processes share the preloaded modules' memory
    try:
        with os.fdopen(requests, "rb") as lines:
            for line in lines:
                try:
                    path = Path(json.loads(line)["path"])
                except (ValueError, KeyError, TypeError):
                    continue
                data = memoryview(to_json(_fork_and_grade(path, args)).encode() + b"\n")
                while data:
                    data = data[os.write(reports, data):]
    finally:
        shutil.rmtree(_STUDENT_CHECKS["path"].parent, ignore_errors=True)
    return 0


class _Zygote:
    """The grader's handle on one job's zygote: started on first use, restarted if it breaks."""

    def __init__(self, timeout: float, course: Path, notebook: str | None, sandbox: bool,
                 allow_root_without_cgroup: bool = False):
        self.timeout = timeout
        self.command = [*_safe_python(), "_zygote", "--timeout", str(timeout),
                        "--course", str(Path(course).resolve())]
        self.command += ["--notebook", notebook] if notebook else []
        self.command += [] if sandbox else ["--no-sandbox"]
        self.command += ["--root-without-cgroup"] if allow_root_without_cgroup else []
        self.process: subprocess.Popen | None = None

    def grade(self, path: Path) -> dict:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                            env=_grader_env(self.timeout))
        try:
            self.process.stdin.write(json.dumps({"path": str(path)}).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            self.close()
            return _failed_report(path, "the grading process could not be started")
        # its own guard stops the submission's grading at timeout + _GRACE; this one a zygote
        # that broke (or is still importing under a heavy load)
        data = _read_line(self.process.stdout.fileno(),
                          time.monotonic() + self.timeout + 2 * _GRACE)
        if not data:
            self.close()
            return _failed_report(path, "the grading process failed")
        return _parse_report(data, path, "the grading process failed")

    def close(self) -> None:
        if self.process is None:
            return
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self.process = None


def grade_paths(paths: list[Path], *, timeout: float = DEFAULT_TIMEOUT,
                course: Path = COURSE_NOTEBOOKS, notebook: str | None = None,
                sandbox: bool = True, jobs: int | None = None,
                progress: bool = False,
                allow_root_without_cgroup: bool = False) -> tuple[list[dict], bool]:
    """Grade every notebook given or found in a given folder, ``jobs`` at a time (default: the
    cores there are). Returns (reports in the order found, any_folder).

    Each job is one process that imports the grader once and forks a fresh grading process for
    each submission (each with its own sandbox): nothing of one submission's grading is left
    for the next."""
    if isinstance(paths, (str, os.PathLike)) or not isinstance(paths, (list, tuple)):
        raise TypeError(f"paths must be a list of paths, got {type(paths).__name__} ({paths!r:.60})")
    if not paths:
        raise ValueError("paths must name at least one notebook or folder, got an empty list")
    paths = [check_path(path, f"paths[{i}]") for i, path in enumerate(paths)]
    timeout, course = _check_options(timeout, course)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
    sandbox = _check_sandbox(sandbox, allow_root_without_cgroup)
    found, any_folder = _find(paths)
    reports: list[dict | None] = [None] * len(found)
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for index in range(len(found)):
        todo.put(index)
    bar, lock = None, threading.Lock()
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(found), desc="grading", unit="submission", file=sys.stderr)

    def job() -> None:
        zygote = _Zygote(timeout, course, notebook, sandbox, allow_root_without_cgroup)
        try:
            while True:
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    reports[index] = zygote.grade(found[index])
                except Exception as error:  # never lose the batch for one submission
                    zygote.close()
                    reports[index] = _failed_report(found[index],
                                                    f"{type(error).__name__}: {error}")
                if bar is not None:
                    with lock:
                        bar.update(1)
        finally:
            zygote.close()

    threads = [threading.Thread(target=job, daemon=True) for _ in range(min(jobs, len(found)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if bar is not None:
        bar.close()
    return [report for report in reports if report is not None], any_folder


def format_table(report: dict) -> str:
    """A per-exercise table for a terminal."""
    _check_report(report)
    lines = [f"{clean_text(report['submission'])} ({report['notebook'] or 'unknown notebook'}): "
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
    return "\n".join(clean_text(line) for line in lines)


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
        writer.writerow([clean_text(report["submission"]), report["notebook"] or "",
                         f"{report['score']:g}",
                         f"{report['max_score']:g}", f"{report['manual_max_score']:g}",
                         *(points.get(c, "") for c in columns), clean_text(report["error"])])
    return buffer.getvalue()


def format_nbgrader_csv(reports: list[dict], assignment: str | None = None) -> str:
    """The grades in the shape of ``nbgrader export``'s CSV (one row per submission).

    Columns ``assignment, duedate, timestamp, student_id, last_name, first_name, email,
    raw_score, late_submission_penalty, score, max_score``; the student id is the submission's
    file name up to the first ``_`` (``alice_05_transformer_decoder.ipynb`` -> ``alice``), the
    assignment the course notebook (or ``assignment``). Automatic points only, as nbgrader's
    autograde before manual grading.
    """
    if not isinstance(reports, (list, tuple)):
        raise TypeError(f"reports must be a list of report dicts, got {type(reports).__name__}")
    for i, report in enumerate(reports):
        _check_report(report, f"reports[{i}]")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["assignment", "duedate", "timestamp", "student_id", "last_name",
                     "first_name", "email", "raw_score", "late_submission_penalty", "score",
                     "max_score"])
    for report in reports:
        name = Path(clean_text(report["submission"])).name
        student = name.split("_")[0] if "_" in name else Path(name).stem
        course = assignment or Path(report["notebook"] or "").stem
        writer.writerow([course, "", "", student, "", "", "", f"{report['score']:g}", "0.0",
                         f"{report['score']:g}", f"{report['max_score']:g}"])
    return buffer.getvalue()


def use_secret(secret_file: Path | None) -> str:
    """Put the instructor's grading secret where the grading processes read it; say which probes
    this run uses. The secret stays in the grader's processes: the sandbox gets an empty
    environment, so no submission can read it."""
    from ..checks._base import secret_fingerprint

    if secret_file is not None:
        secret_file = check_path(secret_file, "secret_file")
        data = secret_file.read_bytes()
        if len(data.strip()) < 16:
            raise ValueError(f"secret_file {secret_file} holds {len(data.strip())} bytes; use at "
                             "least 16 random ones (head -c 32 /dev/urandom > FILE)")
        os.environ[SECRET_ENV] = hashlib.sha256(b"lectures-secret:" + data).hexdigest()
    fingerprint = secret_fingerprint()
    if fingerprint is None:
        return (f"probes: the public defaults (no --secret-file, no ${SECRET_ENV}); a student "
                "can compute them from the package, so pass a secret when grading for credit")
    return f"probes: drawn from the instructor's secret (fingerprint {fingerprint})"


def to_json(report: dict) -> str:
    return json.dumps(report, ensure_ascii=False)



def _grade_main(args) -> int:
    try:
        note = use_secret(args.secret_file)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(note, file=sys.stderr)
    try:
        reports, any_folder = grade_paths(args.submissions, timeout=args.timeout,
                                          course=args.course, notebook=args.notebook,
                                          sandbox=not args.no_sandbox, jobs=args.jobs,
                                          progress=not args.quiet,
                                          allow_root_without_cgroup=args.root_without_cgroup)
    except SandboxRefused as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (TypeError, ValueError) as error:  # e.g. --timeout 0: the message says what is wrong
        print(f"error: {error}", file=sys.stderr)
        return 2
    if not reports:
        print("error: no submissions found", file=sys.stderr)
        return 1
    if args.format == "json":
        for report in reports:
            print(to_json(report), flush=True)
    elif args.format == "nbgrader-csv":
        print(format_nbgrader_csv(reports), end="")
    elif args.format == "csv" or (args.format is None and any_folder):
        print(format_csv(reports), end="")
    else:
        print("\n\n".join(format_table(report) for report in reports))
    return 0


def _one_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m lectures_lib.tooling.grading {command}")
    if command == "_one":
        parser.add_argument("submission", type=Path)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--course", type=Path, required=True)
    parser.add_argument("--notebook", default=None)
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--root-without-cgroup", action="store_true")
    return parser


def _one_main(argv: list[str]) -> int:
    """Internal: grade one submission in this (trusted) process, print its report as JSON."""
    args = _one_parser("_one").parse_args(argv)
    sys.stdout.write("\n" + to_json(_grade_one(args.submission, args)) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m lectures_lib grade SUBMISSION ...`` (and the grader's internal ``_one``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    safe_sys_path()  # never import from the folder the grader was started in
    if argv[:1] == ["_one"]:
        return _one_main(argv[1:])
    if argv[:1] == ["_zygote"]:
        return _zygote_main(argv[1:])
    parser = argparse.ArgumentParser(
        prog="python -m lectures_lib grade",
        description="Grade submitted notebooks against the course's hidden tests. Each "
        "submission's exercise cells run in a sandbox (bubblewrap); the course's test cells run "
        "in the grader and call the submission's functions across the process boundary. Prints "
        "a per-exercise table, JSON lines (--format json), or a CSV gradebook (a folder, or "
        "--format csv; --format nbgrader-csv: nbgrader's export shape).",
    )
    parser.add_argument("submissions", type=Path, nargs="+",
                        help="submitted notebooks, or folders of them")
    parser.add_argument("--notebook", default=None,
                        help="the assignment, e.g. 05_transformer_decoder (default: recognised "
                        "from each submission's exercise ids, else its file name)")
    parser.add_argument("--course", type=Path, default=COURSE_NOTEBOOKS,
                        help="the folder of the course's notebooks (default: notebooks/ of the "
                        "clone; needed when lectures_lib is installed without the repository)")
    parser.add_argument("--format", choices=["table", "json", "csv", "nbgrader-csv"],
                        default=None, help="output (default: table; csv for a folder)")
    parser.add_argument("--json", action="store_const", const="json", dest="format",
                        help="the same as --format json")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"seconds for each submission (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("--jobs", type=int, default=None,
                        help="submissions graded at once (default: the cores there are)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="grade even where no sandbox can be made (UNSAFE: the students' "
                        "code runs with your rights; only in a throwaway container or VM)")
    parser.add_argument("--root-without-cgroup", action="store_true",
                        help="grade as root even where no cgroup can limit a submission's "
                        "processes (the kernel does not apply RLIMIT_NPROC to root: a fork bomb "
                        "then meets no limit; only in a throwaway container or VM)")
    parser.add_argument("--secret-file", type=Path, default=None,
                        help="a file only you hold (e.g. 32 random bytes: `head -c 32 "
                        "/dev/urandom > secret`): every checker's probes and held-out data are "
                        f"drawn from it (default: ${SECRET_ENV} if set, else the public probes, "
                        "which students can compute from the package)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    return _grade_main(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
