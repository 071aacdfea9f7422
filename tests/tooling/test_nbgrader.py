"""The real nbgrader on the course's notebooks: generate, validate and autograde work out of the box.

A course directory in a temporary folder holds one assignment with every notebook 01-07, as the
``source`` command writes them (solutions and hidden tests kept, nbgrader metadata generated).
``nbgrader generate_assignment`` releases it; ``nbgrader validate`` accepts the solution version
and runs the student version without a metadata error; ``nbgrader autograde`` gives a correct
submission every automatic point and a wrong one (one exercise left unsolved) exactly that
exercise's points less.

To keep the test to a few minutes on 2 cores, each notebook is cut to its ``## Exercises``
section (the exercises are self-contained: they import what they use; the lecture's cells, its
training runs included, are not re-run here), less 08's homework, whose tier cells retrain the
recipe for minutes (nbval skips them too): ``test_homework_routes.py`` autogrades it. Whole notebooks work the same
way but need nbgrader's per-cell execution limit raised above the 30 s default (the lectures'
training cells take up to ~40 s): ``c.ExecutePreprocessor.timeout = 300`` in
``nbgrader_config.py``, as the README says.

Skipped when nbgrader is not installed (``pip install -e '.[grading]'``; ``make test`` does it).
"""

import copy
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.exercises import annotate_notebook, find_exercises, release_notebook

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

pytest.importorskip("nbgrader", reason="nbgrader is the optional extra '.[grading]'")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for p in (ROOT / "notebooks").glob("0[1-9]_*.ipynb"))
ASSIGNMENT, STUDENT, WRONG_STUDENT = "course", "alice", "bob"
CONFIG = """c = get_config()
c.CourseDirectory.root = r"{root}"
c.CourseDirectory.course_id = "attention"
# Training cells run longer than nbgrader's 30 s default per cell.
c.ExecutePreprocessor.timeout = 300
"""


def _trimmed(nb):
    """The ``## Exercises`` section (to the next ``## `` heading), without the exercises whose
    tests retrain a submission (:func:`without_retraining`)."""
    cells = nb.cells
    start = next(i for i, c in enumerate(cells) if c.cell_type == "markdown"
                 and c.source.startswith("## Exercises"))
    end = next(i for i, c in enumerate(cells) if i > start and c.cell_type == "markdown"
               and c.source.startswith("## "))
    trimmed = copy.deepcopy(nb)
    trimmed.cells = cells[start:end]
    return without_retraining(trimmed)


def without_retraining(nb):
    """``nb`` without the exercises whose test cells nbval skips (08's homework: each tier cell
    retrains the submitted recipe, minutes of CPU), from their header to their last test."""
    from course_tools.publish.notebooks import is_skipped

    dropped = set()
    for exercise in find_exercises(nb):
        if exercise.tests and all(is_skipped(nb.cells[i]) for i in exercise.tests):
            dropped |= set(range(exercise.header, max(exercise.tests) + 1))
    kept = copy.deepcopy(nb)
    kept.cells = [cell for i, cell in enumerate(kept.cells) if i not in dropped]
    return kept


def _env():
    # nbgrader runs the `alembic` command of its environment: put that on PATH, as an
    # activated virtual environment would.
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


def _nbgrader(*args, cwd):
    return _nbgrader_together([args], cwd)[0]


def _nbgrader_together(commands, cwd):
    """Run nbgrader commands side by side (each starts its kernels: mostly waiting)."""
    processes = [
        subprocess.Popen([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for args in commands
    ]
    logs = []
    for args, process in zip(commands, processes):
        output, _ = process.communicate(timeout=900)
        assert process.returncode == 0, f"nbgrader {args[0]} failed:\n{output}"
        logs.append(output)
    return logs


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("nbgrader_course")
    (root / "nbgrader_config.py").write_text(CONFIG.format(root=root))
    source = root / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    originals = {}
    for path in NOTEBOOKS:
        original = _trimmed(nbformat.read(path, as_version=4))
        originals[path.stem] = original
        nbformat.write(annotate_notebook(original, path.stem), source / path.name)
    log = _nbgrader("generate_assignment", ASSIGNMENT, "--create", "--force", cwd=root)
    # Two submissions: every exercise solved, and the first code exercise left unsolved.
    for student in (STUDENT, WRONG_STUDENT):
        folder = root / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        for stem, original in originals.items():
            submitted = release_notebook(original, stem)  # the student's copy ...
            for index, cell in enumerate(annotate_notebook(original, stem).cells):
                if cell.metadata.get("nbgrader", {}).get("solution"):
                    submitted.cells[index].source = cell.source  # ... solved
            if student == WRONG_STUDENT:
                exercise = next(e for e in find_exercises(original) if e.tests)
                solution = exercise.solutions[0]
                submitted.cells[solution].source = release_notebook(
                    original, stem).cells[solution].source  # back to NotImplementedError
            nbformat.write(submitted, folder / f"{stem}.ipynb")
    paths = [str(root / "release" / ASSIGNMENT / f"{stem}.ipynb") for stem in originals]
    *autograded, validated = _nbgrader_together(
        [("autograde", ASSIGNMENT, "--create", "--force", "--student", student)
         for student in (STUDENT, WRONG_STUDENT)] + [("validate", *paths)], cwd=root)
    return root, originals, log + "".join(autograded), validated


def test_generate_assignment_releases_every_notebook(course):
    root, originals, log, _ = course
    assert "Solution region detected in a non-solution cell" not in log
    for stem in originals:
        released = nbformat.read(root / "release" / ASSIGNMENT / f"{stem}.ipynb", as_version=4)
        text = "".join(cell.source for cell in released.cells)
        assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text, stem
        assert "hidden=True" not in text, f"{stem}: the hidden tests leak into the release"


def test_validate_runs_every_student_version(course):
    """No metadata error; every student version runs and fails its tests (nothing solved yet).

    (The solution versions passing their tests is what the autograde test below shows.)"""
    _, originals, _, log = course
    assert "ValidationError" not in log and "is not marked" not in log, log
    assert log.count("VALIDATION FAILED") == len(originals), log


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_autograde_scores(course, path):
    from nbgrader.api import Gradebook

    root, originals, _, _ = course
    exercises = find_exercises(originals[path.stem])
    automatic = sum(e.points for e in exercises if e.tests)
    first_code = next(e for e in exercises if e.tests)
    assert automatic > 0, f"{path.stem} has no autograded exercise"
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        right = gradebook.find_submission_notebook(path.stem, ASSIGNMENT, STUDENT)
        wrong = gradebook.find_submission_notebook(path.stem, ASSIGNMENT, WRONG_STUDENT)
        assert right.max_code_score == pytest.approx(automatic)
        assert right.code_score == pytest.approx(automatic), "a correct submission: full points"
        assert wrong.code_score == pytest.approx(automatic - first_code.points), (
            "a wrong submission loses exactly the unsolved exercise's points"
        )
        manual = sum(e.points for e in exercises if not e.tests)
        assert right.max_written_score == pytest.approx(manual), "written answers: by hand"
