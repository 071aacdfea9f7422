"""The learner's student copies, in every edition, keep the lecture's teaching outputs (issue 40).

``python -m course_tools copy DIR --student --lang zh-TW`` once cleared every code cell's output,
because the exercise section's heading was matched in English only (``## 练习`` / ``## 練習`` were
not found, and every code cell then counted as an exercise). Here the lecture's part of each
notebook is found without the tool's own heading rule: every code cell above the ``## `` heading
that opens the first exercise (the exercise header, ``**Exercise N — ...**`` / ``**练习 N — ...**``).
"""

import nbformat
import pytest

from course_tools.publish.copy import LANGUAGE_FOLDERS, copy_course
from course_tools.publish.exercises import (
    EXERCISE_WORDS,
    MarkerError,
    exercise_cells,
    find_exercises,
    find_regions,
    release_notebook,
)
from lectures_lib.course import course_files

IMAGE_TYPES = ("image/png", "image/svg+xml", "image/jpeg")


def _images(cell) -> int:
    return sum(1 for output in cell.get("outputs", [])
               for kind in IMAGE_TYPES if kind in output.get("data", {}))


def _lecture_cells(nb) -> list[int]:
    """The code cells above the heading of the section holding the first exercise, without a
    solution or hidden-test region: the teaching cells, whose outputs the student copy keeps."""
    exercises = find_exercises(nb)
    assert exercises, "a notebook with exercises was expected"
    first = exercises[0].header
    heading = max(i for i, cell in enumerate(nb.cells[: first + 1])
                  if cell.cell_type == "markdown" and cell.source.lstrip().startswith("## "))
    return [i for i, cell in enumerate(nb.cells[:heading])
            if cell.cell_type == "code" and not find_regions(cell.source)]


@pytest.mark.parametrize("language", ["en", "zh-CN", "zh-TW"])
def test_student_copy_keeps_every_teaching_image(tmp_path, language, monkeypatch):
    """Each edition's student copy has every image (and every other output) of the lecture part
    of each notebook that the source edition has, and none in the exercise section."""
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))  # its trust database
    copy_course(tmp_path, student=True, language=language)
    folder = LANGUAGE_FOLDERS[{"zh-CN": "zh-Hans", "zh-TW": "zh-Hant"}.get(language, language)]
    sources = sorted((course_files() / "notebooks" / folder).glob("*.ipynb"))
    assert sources, f"no notebooks for {language}"
    total = 0
    for path in sources:
        source = nbformat.read(path, as_version=4)
        student = nbformat.read(tmp_path / "student" / folder / path.name, as_version=4)
        lecture = _lecture_cells(source)
        expected = sum(_images(source.cells[i]) for i in lecture)
        kept = sum(_images(student.cells[i]) for i in lecture)
        assert kept == expected, (
            f"{language} {path.stem}: the student copy keeps {kept} of the lecture's "
            f"{expected} images")
        lost = [i for i in lecture if student.cells[i].outputs != source.cells[i].outputs]
        assert not lost, f"{language} {path.stem}: cells {lost} lost a teaching output"
        section = exercise_cells(source)
        assert section and min(section) > max(lecture), (
            f"{language} {path.stem}: the exercise section was not found after the lecture")
        assert all(student.cells[i].outputs == [] for i in section), (
            f"{language} {path.stem}: an exercise cell kept its output (a prediction's answer)")
        total += expected
    assert total > 0, f"{language}: no teaching image in any notebook: a vacuous test"


def test_every_edition_heading_is_recognised():
    """The heading of every edition's exercise section is one the tool knows (EXERCISE_WORDS)."""
    for folder in LANGUAGE_FOLDERS.values():
        for path in sorted((course_files() / "notebooks" / folder).glob("*.ipynb")):
            nb = nbformat.read(path, as_version=4)
            if not find_exercises(nb):
                continue
            code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
            assert exercise_cells(nb) != code, f"{folder or 'en'} {path.stem}: no exercise heading"


def test_release_refuses_exercises_without_a_section_heading():
    """Exercises under an unknown heading are an error, not a notebook cleared of every output."""
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    nb = new_notebook(cells=[
        new_markdown_cell("# Lecture"),
        new_code_cell("x = 1"),
        new_markdown_cell("## Übungen"),
        new_markdown_cell("**Exercise 1 — a function (2 points).**"),
        new_code_cell("def f():\n    ### BEGIN SOLUTION\n    return 1\n    ### END SOLUTION"),
    ])
    with pytest.raises(MarkerError, match="no exercise section heading"):
        release_notebook(nb, "demo")
    nb.cells[2].source = "## " + EXERCISE_WORDS["zh-Hant"]
    student = release_notebook(nb, "demo")
    assert student.cells[4].source.strip().endswith("raise NotImplementedError()")


def test_the_copies_written_for_the_learner_are_trusted_and_theirs_are_not(tmp_path, monkeypatch):
    """copy_course signs the notebooks it writes in the learner's Jupyter data folder (so the
    explorer's stored script runs, issue 40); a copy the learner changed is not re-signed."""
    from nbformat.sign import NotebookNotary

    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "jupyter-data"))
    copy_course(tmp_path / "course", student=True)
    copies = sorted((tmp_path / "course" / "student").glob("*.ipynb"))
    assert copies and all(NotebookNotary().check_signature(nbformat.read(p, as_version=4))
                          for p in copies)
    mine = nbformat.read(copies[0], as_version=4)
    mine.cells[0].source += "\nmy note"
    nbformat.write(mine, copies[0])
    copy_course(tmp_path / "course", student=True)  # keeps it: the learner's work
    assert not NotebookNotary().check_signature(nbformat.read(copies[0], as_version=4))
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(tmp_path / "another-user"))
    assert not NotebookNotary().check_signature(nbformat.read(copies[1], as_version=4))
