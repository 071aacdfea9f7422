"""Student versions of the notebooks: ``python -m course_tools release SRC OUT_DIR``.

The course's notebooks hold their exercises *with* the reference solutions, marked the nbgrader
way (``make student`` runs this tool). In the student version:

* in a code cell, every region from a line ``### BEGIN SOLUTION`` to a line ``### END SOLUTION``
  (markers included) becomes ``raise NotImplementedError()``, indented like the BEGIN marker. A
  solution that is a whole function body leaves a function that raises, so the cell still runs
  and the checker below it says "not implemented yet";
* every region from ``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS`` is removed;
* in a markdown (or raw) cell, a solution region becomes ``YOUR ANSWER HERE``;
* every code cell of the ``## Exercises`` section (:func:`exercise_cells`), and any other cell
  that held a solution or hidden tests, loses its outputs and execution count, so no answer a
  student is asked to predict is on the page; every other output (the teaching plots and
  tables above the exercises) is kept.

nbgrader metadata is generated, never written by hand (:func:`annotate_notebook`). An exercise
begins with a markdown cell ``**Exercise N — title (P points).**`` and runs to the next exercise
or ``## `` heading. In it, a code cell with a solution region is nbgrader's *solution* cell
(``{notebook}-ex{N}-solution``), a code cell with hidden tests is its locked *autograded test*
cell worth P points (``{notebook}-ex{N}-test``), and a markdown cell with a solution region is
a *written answer* graded by hand, worth P points (``{notebook}-ex{N}-answer``). The ids depend
only on the notebook's name and the exercise's number, so they stay the same across releases.
``source`` writes the annotated notebooks with their solutions (nbgrader's ``source/`` folder);
``release`` writes the student versions, annotated too, so ``nbgrader validate`` and
``autograde`` accept them.

``python -m course_tools grade`` grades submissions without nbgrader: see
:mod:`course_tools.grading` (which imports this module, never the reverse).

A marker is a line that holds nothing but the marker (surrounding spaces allowed); text that only
*mentions* a marker is left alone. Regions cannot nest; a region must end in the cell it begins
in. Any violation raises :class:`MarkerError` naming the notebook, the cell and the line, and the
tool then writes nothing.
"""

from __future__ import annotations

import argparse
import copy
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from lectures_lib.plain_checks import check_bool, check_path

if TYPE_CHECKING:
    from nbformat import NotebookNode

# Over 500 lines: the marker grammar, the student release and nbgrader's source share one walk over
# the cells (find_regions); split, each writer would re-derive the regions the other checks.
# nbformat is imported where it is needed: importing it takes seconds (its JSON-schema checks), and
# the pure functions and `--help` do not need it.

__all__ = [
    "BEGIN_SOLUTION",
    "END_SOLUTION",
    "BEGIN_HIDDEN_TESTS",
    "END_HIDDEN_TESTS",
    "CODE_STUB",
    "MARKDOWN_STUB",
    "MarkerError",
    "Region",
    "find_regions",
    "strip_solutions",
    "Exercise",
    "find_exercises",
    "annotate_notebook",
    "exercise_cells",
    "release_notebook",
    "release",
    "main",
]

BEGIN_SOLUTION = "### BEGIN SOLUTION"
END_SOLUTION = "### END SOLUTION"
BEGIN_HIDDEN_TESTS = "### BEGIN HIDDEN TESTS"
END_HIDDEN_TESTS = "### END HIDDEN TESTS"
CODE_STUB = "raise NotImplementedError()"
MARKDOWN_STUB = "YOUR ANSWER HERE"

# begin marker -> (kind, matching end marker)
_BEGINS = {
    BEGIN_SOLUTION: ("solution", END_SOLUTION),
    BEGIN_HIDDEN_TESTS: ("hidden", END_HIDDEN_TESTS),
}
_ENDS = {END_SOLUTION: BEGIN_SOLUTION, END_HIDDEN_TESTS: BEGIN_HIDDEN_TESTS}


class MarkerError(ValueError):
    """Unbalanced, nested or mismatched exercise markers (the message says where)."""


@dataclass(frozen=True)
class Region:
    """A marked region of a cell: lines ``begin`` .. ``end`` (0-based, markers included)."""

    kind: str  # "solution" or "hidden"
    begin: int
    end: int
    indent: str  # the BEGIN marker's indentation

    def body(self, lines: list[str]) -> list[str]:
        """The lines between the two markers."""
        return lines[self.begin + 1 : self.end]


def _check_source(source: object, name: str = "source") -> None:
    """A cell's source is a string, or a list of strings (nbformat's list of lines)."""
    if isinstance(source, list) and all(isinstance(line, str) for line in source):
        return
    if not isinstance(source, str):
        raise TypeError(f"{name} must be a cell's source (a str or a list of str), got "
                        f"{type(source).__name__} ({source!r:.60})")


def _check_notebook(nb: object, name: str = "nb") -> None:
    """A notebook as nbformat reads it: an object with a list of ``cells`` that have a
    ``cell_type`` and a ``source``."""
    cells = getattr(nb, "cells", None)
    if not isinstance(cells, list) or not all(
        hasattr(cell, "cell_type") and hasattr(cell, "source") for cell in cells
    ):
        raise TypeError(f"{name} must be a notebook read with nbformat.read(path, as_version=4), "
                        f"got {type(nb).__name__}")


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str (the notebook's file name), got "
                        f"{type(name).__name__} ({name!r})")
    return name


def _lines(source: str | list[str]) -> list[str]:
    if isinstance(source, list):  # nbformat may hand a cell's source over as a list of lines
        source = "".join(source)
    return source.splitlines(keepends=True)


def find_regions(source: str | list[str]) -> list[Region]:
    """The solution and hidden-test regions of a cell's source, in order.

    Raises :class:`MarkerError` (with the 1-based line number) on an END without its BEGIN, an
    END that closes the other kind, a BEGIN inside an open region, or a region left open.
    """
    _check_source(source)
    regions: list[Region] = []
    open_at: tuple[str, int, str] | None = None  # (begin marker, line index, indentation)
    for index, line in enumerate(_lines(source)):
        marker = line.strip()
        if marker in _BEGINS:
            if open_at is not None:
                raise MarkerError(
                    f"line {index + 1}: {marker!r} inside the region opened by {open_at[0]!r} on "
                    f"line {open_at[1] + 1}; regions cannot nest (close it with "
                    f"{_BEGINS[open_at[0]][1]!r} first)"
                )
            open_at = (marker, index, line[: len(line) - len(line.lstrip())])
        elif marker in _ENDS:
            if open_at is None:
                raise MarkerError(
                    f"line {index + 1}: {marker!r} without a {_ENDS[marker]!r} before it"
                )
            if _ENDS[marker] != open_at[0]:
                raise MarkerError(
                    f"line {index + 1}: {marker!r} closes the region opened by {open_at[0]!r} on "
                    f"line {open_at[1] + 1}; expected {_BEGINS[open_at[0]][1]!r}"
                )
            kind = _BEGINS[open_at[0]][0]
            regions.append(Region(kind, open_at[1], index, open_at[2]))
            open_at = None
    if open_at is not None:
        raise MarkerError(
            f"line {open_at[1] + 1}: {open_at[0]!r} is never closed by {_BEGINS[open_at[0]][1]!r} "
            "(a region must end in the cell it begins in)"
        )
    return regions


def strip_solutions(source: str | list[str], cell_type: str = "code") -> str:
    """The student version of one cell's source.

    Solution regions become :data:`CODE_STUB` in code cells (at the BEGIN marker's indentation)
    and :data:`MARKDOWN_STUB` in other cells; hidden-test regions disappear. A source without
    markers comes back unchanged. Raises :class:`MarkerError` on bad markers.
    """
    _check_source(source)
    if cell_type not in ("code", "markdown", "raw"):
        raise ValueError(f"cell_type must be 'code', 'markdown' or 'raw', got {cell_type!r}")
    lines = _lines(source)
    regions = find_regions(lines)
    if not regions:
        return "".join(lines)
    stub = CODE_STUB if cell_type == "code" else MARKDOWN_STUB
    kept: list[str] = []
    position = 0
    for region in regions:
        kept.extend(lines[position : region.begin])
        if region.kind == "solution":
            kept.append(region.indent + stub + "\n")
        position = region.end + 1
    kept.extend(lines[position:])
    return "".join(kept).rstrip()


# The word for "exercises" in each edition (issue 22), as the exercise header below spells it: the
# section heading ``## Exercises`` / ``## 练习`` / ``## 練習`` (issue 40: a heading matched in
# English only made the Chinese student copies lose every output). A new edition adds its word.
EXERCISE_WORDS = {"en": "Exercises", "zh-Hans": "练习", "zh-Hant": "練習"}
_EXERCISE_WORD = "(?:" + "|".join(sorted({*EXERCISE_WORDS.values(), "Exercise"}, key=len,
                                         reverse=True)) + ")"
# English, or the Chinese notebooks' form (issue 22): **练习 N — 标题（P 分）。** (練習 in zh-Hant)
EXERCISE_HEADER = re.compile(
    r"^\*\*(?:Exercise\s+|练习\s*|練習\s*)(?P<number>\d+)\s*[—–-]+\s*(?P<title>.*?)\s*"
    r"(?:\((?P<points>\d+(?:\.\d+)?)\s+points?\b[^)]*\)"
    r"|[（(]\s*(?P<fen>\d+(?:\.\d+)?)\s*分[^）)]*[）)])"
)
_HEADING = re.compile(r"^##\s", re.MULTILINE)


def _safe_id(text: str) -> str:
    """nbgrader's grade_id allows letters, digits, ``_`` and ``-`` only."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)


@dataclass
class Exercise:
    """One exercise of a notebook: its cells by role (indices into ``nb.cells``) and points."""

    number: int
    title: str
    points: float
    header: int  # the markdown cell that states it
    solutions: list[int]
    tests: list[int]  # code cells with hidden tests: graded automatically
    answers: list[int]  # markdown cells with a solution region: graded by hand

    def grade_id(self, name: str, role: str, position: int = 0) -> str:
        suffix = "" if position == 0 else f"-{position + 1}"
        return _safe_id(f"{name}-ex{self.number}-{role}{suffix}")

    @property
    def manual(self) -> bool:
        return not self.tests


def _source(cell) -> str:
    return "".join(cell.source) if isinstance(cell.source, list) else cell.source


def find_exercises(nb: NotebookNode) -> list[Exercise]:
    """The exercises of ``nb`` in order (see the module docstring for the convention)."""
    _check_notebook(nb)
    exercises: list[Exercise] = []
    current: Exercise | None = None
    for index, cell in enumerate(nb.cells):
        source = _source(cell)
        if cell.cell_type == "markdown":
            match = EXERCISE_HEADER.match(source.lstrip())
            if match:
                points = match["points"] or match["fen"]
                current = Exercise(int(match["number"]), match["title"], float(points),
                                   index, [], [], [])
                exercises.append(current)
            elif _HEADING.search(source):
                current = None
        if current is None:
            continue
        regions = find_regions(source)
        kinds = {region.kind for region in regions}
        if cell.cell_type == "code" and "solution" in kinds:
            current.solutions.append(index)
        elif cell.cell_type == "code" and "hidden" in kinds:
            current.tests.append(index)
        elif cell.cell_type == "markdown" and "solution" in kinds:
            current.answers.append(index)
    return exercises


def _metadata(grade_id: str, *, solution: bool, grade: bool, locked: bool,
              points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if grade:
        meta["points"] = points
    return meta


def annotate_notebook(nb: NotebookNode, name: str = "notebook") -> NotebookNode:
    """A copy of ``nb`` whose exercise cells carry nbgrader metadata (solutions kept).

    Solution cells, autograded test cells (locked, the exercise's points) and written-answer
    cells (solution and grade, the exercise's points) get stable ``grade_id``s; a cell with a
    solution or hidden tests outside any exercise gets ``{name}-cell-{index}`` (1 point for tests).
    Raises :class:`MarkerError` on bad markers, naming the notebook and the cell.
    """
    _check_notebook(nb)
    _check_name(name)
    annotated = copy.deepcopy(nb)
    for index, cell in enumerate(annotated.cells):
        try:
            find_regions(cell.source)
        except MarkerError as error:
            raise MarkerError(f"{name}, cell {index} ({cell.cell_type}): {error}") from None
    roles: dict[int, dict] = {}
    for exercise in find_exercises(annotated):
        for position, index in enumerate(exercise.solutions):
            roles[index] = _metadata(exercise.grade_id(name, "solution", position),
                                     solution=True, grade=False, locked=False)
        for position, index in enumerate(exercise.tests):
            share = exercise.points / len(exercise.tests)
            roles[index] = _metadata(exercise.grade_id(name, "test", position), solution=False,
                                     grade=True, locked=True, points=share)
        for position, index in enumerate(exercise.answers):
            share = exercise.points / len(exercise.answers)
            roles[index] = _metadata(exercise.grade_id(name, "answer", position), solution=True,
                                     grade=True, locked=False, points=share)
    for index, cell in enumerate(annotated.cells):
        kinds = {region.kind for region in find_regions(cell.source)}
        if index in roles:
            cell.metadata["nbgrader"] = roles[index]
        elif "solution" in kinds:
            cell.metadata["nbgrader"] = _metadata(_safe_id(f"{name}-cell-{index}"),
                                                  solution=True, grade=cell.cell_type != "code",
                                                  locked=False, points=1)
        elif "hidden" in kinds and cell.cell_type == "code":
            cell.metadata["nbgrader"] = _metadata(_safe_id(f"{name}-cell-{index}"),
                                                  solution=False, grade=True, locked=True,
                                                  points=1)
    return annotated


# ``## Exercises`` / ``## 练习`` / ``## 練習``: the heading of the exercise section, in any edition
_EXERCISES_HEADING = re.compile(r"^##\s+" + _EXERCISE_WORD + r"(?![\w])", re.MULTILINE)


def exercise_cells(nb) -> list[int]:
    """Indices of the code cells of the ``## Exercises`` section (``## 练习``, ``## 練習`` in the
    Chinese editions: :data:`EXERCISE_WORDS`), up to the next ``## `` heading (every code cell
    when there is no such section). Tolerates malformed cells (submissions)."""
    def kind(cell):
        return cell.get("cell_type") if isinstance(cell, dict) else None

    def text(cell) -> str:
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        if isinstance(source, list):
            source = "".join(line for line in source if isinstance(line, str))
        return source if isinstance(source, str) else ""

    cells = list(getattr(nb, "cells", None) or [])
    code = [i for i, cell in enumerate(cells) if kind(cell) == "code"]
    markdown = {i: text(cell) for i, cell in enumerate(cells) if kind(cell) == "markdown"}
    start = next((i for i, source in markdown.items() if _EXERCISES_HEADING.search(source)), None)
    if start is None:
        return code
    end = next((i for i, source in markdown.items() if i > start and _HEADING.search(source)),
               len(cells))
    return [i for i in code if start < i < end]


def release_notebook(nb: NotebookNode, name: str = "notebook") -> NotebookNode:
    """The student version of a notebook (a new object; ``nb`` is not changed).

    ``name`` (the notebook's file name, e.g. ``01_self_attention``) appears in error messages and
    in the nbgrader ``grade_id``s (:func:`annotate_notebook`). Cells keep their order and number,
    so cell ``i`` of the release is cell ``i`` of the original.
    """
    _check_notebook(nb)
    _check_name(name)
    student = annotate_notebook(nb, name)
    # Every output of the exercise section goes (a "predict, then run" cell's stored output is
    # the answer), and those of any solution or hidden-test cell; teaching outputs stay.
    exercise_section = set()
    if find_exercises(student):
        if not any(cell.cell_type == "markdown" and _EXERCISES_HEADING.search(_source(cell))
                   for cell in student.cells):  # else every code cell would count as exercise
            raise MarkerError(
                f"{name}: it has exercises but no exercise section heading (one of "
                f"{', '.join('## ' + word for word in EXERCISE_WORDS.values())}), so no teaching "
                f"output could be told from an exercise's")
        exercise_section = set(exercise_cells(student))
    for index, cell in enumerate(student.cells):
        try:
            regions = find_regions(cell.source)
            cell.source = strip_solutions(cell.source, cell.cell_type)
        except MarkerError as error:
            raise MarkerError(f"{name}, cell {index} ({cell.cell_type}): {error}") from None
        if cell.cell_type == "code" and (regions or index in exercise_section):
            cell.outputs = []
            cell.execution_count = None
        cell.metadata.pop("execution", None)  # nbclient's timing, if it was recorded
    return student


def release(source: Path, out_dir: Path, *, keep_solutions: bool = False) -> list[Path]:
    """Write the student version of ``source`` (a notebook or a folder) into ``out_dir``.

    With ``keep_solutions`` it writes the annotated course version instead (solutions and hidden
    tests kept, nbgrader metadata added): the notebooks for nbgrader's ``source/`` folder.

    Every notebook is converted before anything is written, so a marker error anywhere writes
    nothing. A folder's layout is kept below ``out_dir``. Returns the paths written.
    """
    import nbformat

    from course_tools.publish.notebooks import find_notebooks

    source, out_dir = check_path(source, "source"), check_path(out_dir, "out_dir")
    check_bool(keep_solutions, "keep_solutions")
    if not source.exists():
        raise FileNotFoundError(f"{source} does not exist")
    notebooks = find_notebooks(source)
    if source.is_dir() and out_dir.resolve() != source.resolve():
        # Student versions that an earlier run wrote inside the source folder are not sources.
        notebooks = [p for p in notebooks if out_dir.resolve() not in p.resolve().parents]
    if not notebooks:
        raise FileNotFoundError(f"no *.ipynb notebooks found in {source}")
    base = source.parent if source.is_file() else source
    released = []
    for path in notebooks:
        target = out_dir / path.relative_to(base)
        if target.resolve() == path.resolve():
            raise ValueError(f"refusing to overwrite the original {path} with its student version")
        notebook = nbformat.read(path, as_version=4)
        if keep_solutions:
            student = annotate_notebook(notebook, name=path.stem)
        else:
            student = release_notebook(notebook, name=path.stem)
        try:
            nbformat.validate(student)
        except nbformat.ValidationError as error:
            message = f"{path}: its student version is not a valid notebook: {error}"
            raise ValueError(message) from None
        released.append((target, student))
    for target, student in released:
        target.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(student, target)
    return [target for target, _ in released]


def course_source(source: Path) -> Path:
    """``source`` as given when it exists; else the installed course's (the wheel's or the clone's
    ``notebooks/``): ``course`` for all of them, or a notebook's name (``01_self_attention``,
    ``zh-Hans/01_self_attention``, ``.ipynb`` optional). Anything else is returned unchanged, for
    :func:`release` to refuse by name."""
    from lectures_lib.course import course_files

    source = Path(source)
    if source.exists() or source.is_absolute():
        return source
    notebooks = course_files() / "notebooks"
    if source == Path("course"):
        return notebooks
    for candidate in (notebooks / source, notebooks / source.with_name(source.name + ".ipynb")):
        if candidate.is_file() and candidate.suffix == ".ipynb":
            return candidate
    return source


SOURCE_HELP = ("a notebook or a folder of notebooks; or, from the installed course, 'course' "
               "(its notebooks) or a notebook's name (01_self_attention, zh-Hans/01_self_attention)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools",
        description="Student versions of the notebooks (release) and nbgrader's source notebooks.",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser(
        "release",
        help="write student versions: solutions replaced, hidden tests removed",
        description=(
            "Write the student version of each notebook: '### BEGIN SOLUTION' ... '### END "
            "SOLUTION' becomes `raise NotImplementedError()` (YOUR ANSWER HERE in markdown), "
            "'### BEGIN HIDDEN TESTS' ... '### END HIDDEN TESTS' is removed, the outputs of "
            "those cells are cleared (the other outputs are kept), and the exercise cells get "
            "nbgrader metadata."
        ),
    )
    release_parser.add_argument("source", type=Path, help=SOURCE_HELP)
    release_parser.add_argument("out_dir", type=Path, help="folder for the student versions")
    source_parser = commands.add_parser(
        "source",
        help="write the notebooks with solutions and nbgrader metadata (nbgrader's source/)",
        description="Write each notebook with its solutions and hidden tests, and nbgrader "
        "metadata on every exercise cell: the input of `nbgrader generate_assignment`.",
    )
    source_parser.add_argument("source", type=Path, help=SOURCE_HELP)
    source_parser.add_argument("out_dir", type=Path, help="e.g. course/source/ps1")
    args = parser.parse_args(argv)
    try:
        written = release(course_source(args.source), args.out_dir,
                          keep_solutions=args.command == "source")
    except (OSError, ValueError) as error:  # MarkerError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    kind = "annotated source" if args.command == "source" else "student"
    print(f"{len(written)} {kind} notebook(s) written to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
