"""Collecting a submission: reading it without trusting its size or kind, recognising its
assignment, and planning which of its cells run before which of the course's test cells.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from course_tools import ROOT
from course_tools.grading._process import MAX_SUBMISSION_BYTES
from course_tools.publish.exercises import exercise_cells as _exercise_cells
from course_tools.publish.exercises import find_exercises, strip_solutions
from lectures_lib.checks.grader import SECRET_ENV
from lectures_lib.course import course_files
from lectures_lib.utils import check_path, check_positive_float

DEFAULT_TIMEOUT = 300.0


def _installed_course() -> Path:
    """The course's notebooks wherever the course is installed: the wheel's own copy
    (``lectures_lib/_course/notebooks``), or a clone's ``notebooks/``."""
    try:
        return course_files() / "notebooks"
    except FileNotFoundError:  # a package built without its course files: said where it is used
        return ROOT / "notebooks"


COURSE_NOTEBOOKS = _installed_course()  # grade's --course default, and a worker's own course


def _check_options(timeout: object, course: object) -> tuple[float, Path]:
    """The grader's options: a time limit in seconds (> 0, finite) and the course's folder."""
    timeout = check_positive_float(timeout, "timeout")
    course = check_path(course, "course")
    if not course.is_dir():
        raise ValueError(f"course must be the folder of the course's notebooks, got {course} "
                         "(not a folder)")
    return timeout, course


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




def read_submission(path: Path, max_bytes: int = MAX_SUBMISSION_BYTES):
    """The submitted notebook at ``path`` (nbformat 4), its outputs dropped (grading runs the
    code again), read without trusting its size.

    Refused before parsing: anything but a plain file (a link, a FIFO, a device), and a file over
    ``max_bytes`` (at most ``max_bytes + 1`` bytes are ever read). The JSON is parsed here,
    once; nbformat then sees only the cells' sources and metadata. In the grade command this
    runs in the submission's own grading process, under its memory limit
    (:data:`GRADER_MEMORY`)."""
    import nbformat

    tree = json.loads(read_bytes(path, max_bytes))
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


def read_bytes(path: Path, max_bytes: int = MAX_SUBMISSION_BYTES) -> bytes:
    """The bytes of the submission at ``path``: a plain file (not a link, FIFO or device) of at
    most ``max_bytes`` (at most ``max_bytes + 1`` bytes are ever read); else ValueError (or the
    OSError of opening it). What :func:`read_submission` parses, and what ``grade --scheduler``
    sends to its workers."""
    import stat

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
    return data


def use_secret(secret_file: Path | None) -> str:
    """Put the instructor's grading secret where the grading processes read it; say which probes
    this run uses. The secret stays in the grader's processes: the sandbox gets an empty
    environment, so no submission can read it."""
    from lectures_lib.checks.grader import secret_fingerprint

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
