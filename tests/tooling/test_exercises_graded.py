"""The exercises of every notebook can be graded, and those of 01-05 are worth grading.

* each notebook 01-05 has 2-4 exercises, at least one written prediction made *before* an experiment
  (graded by hand, followed by the cell that runs the experiment), and from 03 on at least one
  exercise that trains a model to a stated accuracy (graded by a checker of
  ``lectures_lib.checks.trained`` on held-out data);
* (every notebook) nbgrader ``grade_id``s are unique and the same in every release, with points on every graded
  cell; every test cell re-imports its checker and runs the hidden probes;
* no solution appears verbatim in the notebook's lecture cells or imports, and no library
  function an exercise asks for is imported above it (the lecture calls it by module path).
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.exercises import (
    annotate_notebook,
    find_exercises,
    find_regions,
    release_notebook,
)

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
GRADED = sorted((ROOT / "notebooks").glob("0[1-5]_*.ipynb"))
# 06 and 07 (the variants) have graded exercises too, but no training exercise or prediction yet:
# they are held to every rule below except "worth grading".
ALL = sorted((ROOT / "notebooks").glob("0[1-9]_*.ipynb"))
TRAINING_CHECKS = {"check_skip_flip_model", "check_sort_tagger", "check_reverse_translator"}
# What each notebook's exercises ask for, by name: never importable above the exercise.
ASKED_FOR = {
    "01": {"additive_attention"},
    "02": {"key_padding_mask", "multi_head_attention", "padded_self_attention"},
    "03": {"relative_position_attention", "relative_position_bias"},
    "04": {"rms_norm", "RMSNorm"},
    "05": {"label_smoothing_loss", "beam_step"},
    "06": {"streaming_mask"},
    "07": {"trig_features", "query_rule_reference"},
    "08": {"words_from_tags"},
}
# Lines this short, or these, say nothing about a solution (`return out, weights`, ...).
MIN_LINE = 30


def _read(path):
    return nbformat.read(path, as_version=4)


def _exercises_start(nb) -> int:
    return next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                and c.source.startswith("## Exercises"))


@pytest.mark.parametrize("path", GRADED, ids=lambda p: p.stem)
def test_exercises_worth_grading(path):
    nb = _read(path)
    exercises = find_exercises(nb)
    assert 2 <= len(exercises) <= 4, f"{path.stem}: {len(exercises)} exercises"
    assert [e.number for e in exercises] == list(range(1, len(exercises) + 1))
    for exercise in exercises:
        assert exercise.points > 0 and (exercise.tests or exercise.answers), exercise
        assert not (exercise.tests and exercise.answers), "one kind of grading per exercise"
    predictions = [
        e for e in exercises
        if e.answers and "before you run it" in " ".join(nb.cells[e.header].source.split()).lower()
    ]
    assert predictions, f"{path.stem}: no prediction written down before an experiment"
    for exercise in predictions:
        after = exercise.answers[-1] + 1
        assert nb.cells[after].cell_type == "code", "the experiment follows the prediction"
    if path.stem >= "03":
        trains = [e for e in exercises for i in e.tests
                  if TRAINING_CHECKS & set(re.findall(r"check_\w+", nb.cells[i].source))]
        assert trains, f"{path.stem}: no exercise trains a model to a stated accuracy"
        for exercise in trains:
            assert re.search(r"Target: ≥ \d+ %", nb.cells[exercise.header].source), exercise


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_grade_ids_are_stable_unique_and_graded_cells_have_points(path):
    nb = _read(path)
    first = annotate_notebook(nb, path.stem)
    again = annotate_notebook(_read(path), path.stem)
    student = release_notebook(nb, path.stem)
    metas = [c.metadata.get("nbgrader") for c in first.cells]
    assert metas == [c.metadata.get("nbgrader") for c in again.cells], "same ids every release"
    assert metas == [c.metadata.get("nbgrader") for c in student.cells], "source == release"
    ids = [m["grade_id"] for m in metas if m]
    assert len(ids) == len(set(ids)), f"duplicate grade_ids: {ids}"
    for meta in filter(None, metas):
        # (-N: the Nth test cell of one exercise, e.g. 08's four tiers)
        assert re.fullmatch(rf"{path.stem}-ex\d+-(solution|test|answer)(-\d+)?",
                            meta["grade_id"]), meta
        if meta["grade"]:
            assert meta["points"] > 0, meta
    total = sum(m["points"] for m in metas if m and m["grade"])
    assert total == sum(e.points for e in find_exercises(nb))


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_hidden_tests_reimport_the_checker_and_use_hidden_probes(path):
    nb = _read(path)
    for exercise in find_exercises(nb):
        for index in exercise.tests:
            source = nb.cells[index].source
            (hidden,) = [r for r in find_regions(source) if r.kind == "hidden"]
            body = "\n".join(hidden.body(source.splitlines()))
            assert re.search(r"from lectures_lib\.checks import check_\w+ as \w+", body), body
            assert "hidden=True" in body and "assert" in body, body


def _significant_lines(text: str) -> set[str]:
    lines = set()
    for line in text.splitlines():
        stripped = line.strip()
        if len(stripped) < MIN_LINE or stripped.startswith(("#", "'''", '"""')):
            continue
        lines.add(re.sub(r"\s+#.*$", "", stripped))
    return lines


def _copied(nb) -> list[str]:
    """Where a solution (whole, or one of its significant lines) is in the lecture or imports."""
    start = _exercises_start(nb)
    lecture = "\n".join(c.source for c in nb.cells[:start])
    lecture_lines = {re.sub(r"\s+#.*$", "", line.strip()) for line in lecture.splitlines()}
    exercise_imports = "\n".join(
        c.source for c in nb.cells[start:] if c.cell_type == "code" and not find_regions(c.source)
    )
    found = []
    for index, cell in enumerate(nb.cells[start:], start):
        if cell.cell_type != "code":
            continue
        for region in find_regions(cell.source):
            if region.kind != "solution":
                continue
            body = "\n".join(region.body(cell.source.splitlines()))
            if " ".join(body.split()) in " ".join(lecture.split()):
                found.append(f"cell {index}: the whole solution")
            copied = _significant_lines(body) & (lecture_lines | _significant_lines(
                exercise_imports))
            found += [f"cell {index}: {line!r}" for line in sorted(copied)]
    return found


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_no_solution_appears_in_the_lecture(path):
    copied = _copied(_read(path))
    assert not copied, f"{path.stem}: solutions in the lecture: {copied}"


def test_the_verbatim_check_can_fail():
    nb = _read(GRADED[0])
    solution = next(c for c in nb.cells[_exercises_start(nb):] if c.cell_type == "code"
                    and any(r.kind == "solution" for r in find_regions(c.source)))
    body = next(r for r in find_regions(solution.source) if r.kind == "solution").body(
        solution.source.splitlines())
    lecture_cell = next(c for c in nb.cells if c.cell_type == "code")
    lecture_cell.source += "\n" + body[2]  # one line of the solution, pasted into the lecture
    assert _copied(nb), "a pasted solution line must be found"


def _imported_names(source: str) -> set[str]:
    try:
        tree = ast.parse("\n".join("" if line.lstrip().startswith(("%", "!")) else line
                                   for line in source.splitlines()))
    except SyntaxError:
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_no_asked_for_function_is_imported_above_its_exercise(path):
    nb = _read(path)
    asked = ASKED_FOR[path.stem[:2]]
    first_solution = min(i for e in find_exercises(nb) for i in e.solutions + e.answers)
    for index, cell in enumerate(nb.cells[:first_solution]):
        if cell.cell_type != "code":
            continue
        imported = _imported_names(cell.source) & asked
        assert not imported, f"{path.stem}, cell {index} imports {imported}"
        bare = {name for name in asked if re.search(rf"(?<![\w.]){name}\(", cell.source)}
        assert not bare, f"{path.stem}, cell {index} calls {bare} by its bare name"


