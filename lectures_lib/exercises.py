"""Student versions of the notebooks: ``python -m lectures_lib.exercises release SRC OUT_DIR``.

The course's notebooks hold their exercises *with* the reference solutions, marked the nbgrader
way (``make student`` runs this tool). In the student version:

* in a code cell, every region from a line ``### BEGIN SOLUTION`` to a line ``### END SOLUTION``
  (markers included) becomes ``raise NotImplementedError()``, indented like the BEGIN marker. A
  solution that is a whole function body leaves a function that raises, so the cell still runs
  and the checker below it says "not implemented yet";
* every region from ``### BEGIN HIDDEN TESTS`` to ``### END HIDDEN TESTS`` is removed;
* in a markdown (or raw) cell, a solution region becomes ``YOUR ANSWER HERE``;
* code cells that held a solution or hidden tests lose their outputs and execution count; every
  other output (the teaching plots and tables) is kept. Cells that held a solution get
  nbgrader's metadata (``solution: true``) so the release also opens in nbgrader.

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

if TYPE_CHECKING:
    from nbformat import NotebookNode

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


def _lines(source: str | list[str]) -> list[str]:
    if isinstance(source, list):  # nbformat may hand a cell's source over as a list of lines
        source = "".join(source)
    return source.splitlines(keepends=True)


def find_regions(source: str | list[str]) -> list[Region]:
    """The solution and hidden-test regions of a cell's source, in order.

    Raises :class:`MarkerError` (with the 1-based line number) on an END without its BEGIN, an
    END that closes the other kind, a BEGIN inside an open region, or a region left open.
    """
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


def _grade_id(name: str, index: int) -> str:
    """nbgrader's grade_id allows letters, digits, ``_`` and ``-`` only."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"{name}-cell-{index}")


def release_notebook(nb: NotebookNode, name: str = "notebook") -> NotebookNode:
    """The student version of a notebook (a new object; ``nb`` is not changed).

    ``name`` (the notebook's file name, e.g. ``01_self_attention``) appears in error messages and
    in the nbgrader ``grade_id`` of solution cells. Cells keep their order and number, so cell
    ``i`` of the release is cell ``i`` of the original.
    """
    student = copy.deepcopy(nb)
    for index, cell in enumerate(student.cells):
        try:
            regions = find_regions(cell.source)
            has_solution = any(r.kind == "solution" for r in regions)
            cell.source = strip_solutions(cell.source, cell.cell_type)
        except MarkerError as error:
            raise MarkerError(f"{name}, cell {index} ({cell.cell_type}): {error}") from None
        if cell.cell_type == "code" and regions:  # outputs of solutions and hidden tests go;
            cell.outputs = []  # teaching outputs (plots, tables) stay
            cell.execution_count = None
        cell.metadata.pop("execution", None)  # nbclient's timing, if it was recorded
        if has_solution:
            cell.metadata["nbgrader"] = {
                "solution": True,
                "grade": False,
                "locked": False,
                "task": False,
                "grade_id": _grade_id(name, index),
                "schema_version": 3,
            }
    return student


def release(source: Path, out_dir: Path) -> list[Path]:
    """Write the student version of ``source`` (a notebook or a folder) into ``out_dir``.

    Every notebook is converted before anything is written, so a marker error anywhere writes
    nothing. A folder's layout is kept below ``out_dir``. Returns the paths written.
    """
    import nbformat

    from .notebooks import find_notebooks

    source, out_dir = Path(source), Path(out_dir)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lectures_lib.exercises",
        description="Tools for the course's exercises (nbgrader-style markers).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    release_parser = commands.add_parser(
        "release",
        help="write student versions: solutions replaced, hidden tests removed",
        description=(
            "Write the student version of each notebook: '### BEGIN SOLUTION' ... '### END "
            "SOLUTION' becomes `raise NotImplementedError()` (YOUR ANSWER HERE in markdown), "
            "'### BEGIN HIDDEN TESTS' ... '### END HIDDEN TESTS' is removed, and the outputs of "
            "those cells are cleared (the other outputs are kept)."
        ),
    )
    release_parser.add_argument("source", type=Path, help="a notebook, or a folder of notebooks")
    release_parser.add_argument("out_dir", type=Path, help="folder for the student versions")
    args = parser.parse_args(argv)
    try:
        written = release(args.source, args.out_dir)
    except (OSError, ValueError) as error:  # MarkerError is a ValueError
        print(f"error: {error}", file=sys.stderr)
        return 1
    for path in written:
        print(f"wrote {path}")
    print(f"{len(written)} student notebook(s) written to {args.out_dir}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
