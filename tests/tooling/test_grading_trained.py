"""The grade command on 04's training exercise: the course's EncoderTagger, rebuilt in the grader
from the submission's weights, is what is scored.

A submission whose model detects the shuffled-weights test (it remembers its weights and sorts by
hand while they are untouched) earned the 4 points before; graded now, its untrained weights are
at chance and it gets 0 for the exercise, while the notebook's own solution keeps full marks
(with a grading secret too). The model lives in the sandbox; only its weights and settings cross.
"""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from lectures_lib.tooling.exercises import annotate_notebook, find_exercises, release_notebook
from tests.shuffle_detector import SOURCE as DETECTOR_SOURCE
from tests.tooling.test_grading import ROOT

pytestmark = pytest.mark.system_package("bubblewrap")  # skipped without it, named
STEM = "04_transformer_encoder"


def test_a_shuffle_detector_earns_nothing_and_the_solution_full_marks(tmp_path):
    original = nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb", as_version=4)
    solved = release_notebook(original, STEM)
    for index, cell in enumerate(annotate_notebook(original, STEM).cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            solved.cells[index].source = cell.source
    nbformat.write(solved, tmp_path / f"good_{STEM}.ipynb")
    training = [e for e in find_exercises(original) if e.tests][1]
    solved.cells[training.solutions[0]].source = DETECTOR_SOURCE
    nbformat.write(solved, tmp_path / f"detector_{STEM}.ipynb")
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.write_bytes(b"an instructor's secret for the term")
    result = subprocess.run(
        [sys.executable, "-m", "lectures_lib", "grade", str(tmp_path), "--json", "--quiet",
         "--timeout", "240", "--secret-file", str(secret)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    reports = {json.loads(line)["submission"].rsplit("/", 1)[-1].split("_")[0]: json.loads(line)
               for line in result.stdout.splitlines()}
    rows = {kind: {row["id"]: row for row in report["exercises"]}
            for kind, report in reports.items()}
    exercise = f"{STEM}-ex{training.number}"
    assert reports["good"]["score"] == reports["good"]["max_score"] > 0, reports["good"]
    assert "held-out per-token accuracy" in rows["good"][exercise]["message"]
    assert rows["detector"][exercise]["points"] == 0, rows["detector"][exercise]
    assert "chance" in rows["detector"][exercise]["message"], rows["detector"][exercise]
