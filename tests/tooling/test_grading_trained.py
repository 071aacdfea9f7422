"""The grade command on 04's training exercise: the course's EncoderTagger, rebuilt in the grader
from the submission's weights, is what is scored, on the submission's own variant of the task.

A submission whose model detects the shuffled-weights test (it remembers its weights and sorts by
hand while they are untouched) earned the 4 points before; graded now, its untrained weights are
at chance and it gets 0 for the exercise, while the notebook's own solution keeps full marks
(with a grading secret too). The model lives in the sandbox; only its weights and settings cross.

A submission that pastes in weights trained elsewhere (a well-trained sorter of the public task)
earned the 4 points too (issue 33): graded with a secret, the data the training function and the
checker draw are the submission's own variant of the task, so the pasted weights get 0, named
``trained_elsewhere``, while the solution trained in the sandbox passes. The variant's key reaches
the sandbox through the job's spec, not its environment.
"""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
import time

import nbformat
import pytest
import torch

from course_tools import grading
from course_tools.grading import sandbox
from course_tools.publish.exercises import annotate_notebook, find_exercises, release_notebook
from lectures_lib.checks import check_sort_tagger
from lectures_lib.checks.grader import SECRET_ENV
from lectures_lib.checks.trained import make_sort_data
from tests.checks.test_trained_rebuild import _sort_tagger
from tests.shuffle_detector import SOURCE as DETECTOR_SOURCE
from tests.tooling.test_grading import ROOT

pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]  # skipped without it, named
STEM = "04_transformer_encoder"
SECRET = b"an instructor's secret for the term"

PASTED = '''import base64
import io

import torch

WEIGHTS = "{weights}"  # a sorter trained before grading, on the public task


def train_sort_tagger():
    model = EncoderTagger(SORT_VOCAB_SIZE, SORT_VOCAB_SIZE, d_model=32, num_heads=2,
                          num_layers=1, d_ff=64, max_len=SORT_SEQ_LEN, norm_first=True,
                          pad_id=None)
    model.load_state_dict(torch.load(io.BytesIO(base64.b64decode(WEIGHTS)), weights_only=True))
    return model.eval()
'''


def _pasted_source() -> str:
    """The attack: weights of the notebook's solution, trained here on the public task (they
    pass the public checker), pasted into the training function, which trains nothing."""
    sorter = _sort_tagger()
    assert check_sort_tagger(sorter).passed, "the pasted weights are a well-trained sorter"
    buffer = io.BytesIO()
    torch.save(sorter.state_dict(), buffer)
    return PASTED.format(weights=base64.b64encode(buffer.getvalue()).decode())


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """good (the notebook's solution), detector, pasted: graded once, with a secret."""
    folder = tmp_path_factory.mktemp("submissions")
    original = nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb", as_version=4)
    solved = release_notebook(original, STEM)
    for index, cell in enumerate(annotate_notebook(original, STEM).cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            solved.cells[index].source = cell.source
    nbformat.write(solved, folder / f"good_{STEM}.ipynb")
    training = [e for e in find_exercises(original) if e.tests][1]
    good_source = solved.cells[training.solutions[0]].source
    for kind, source in (("detector", DETECTOR_SOURCE), ("pasted", _pasted_source())):
        solved.cells[training.solutions[0]].source = source
        nbformat.write(solved, folder / f"{kind}_{STEM}.ipynb")
    solved.cells[training.solutions[0]].source = good_source
    secret = tmp_path_factory.mktemp("secret") / "secret"
    secret.write_bytes(SECRET)
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", str(folder), "--json", "--quiet",
         "--timeout", "240", "--secret-file", str(secret)],
        capture_output=True, text=True, timeout=900, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    reports = {json.loads(line)["submission"].rsplit("/", 1)[-1].split("_")[0]: json.loads(line)
               for line in result.stdout.splitlines()}
    rows = {kind: {row["id"]: row for row in report["exercises"]}
            for kind, report in reports.items()}
    return reports, rows, f"{STEM}-ex{training.number}"


def test_the_solution_gets_full_marks_with_a_secret(graded):
    reports, rows, exercise = graded
    assert reports["good"]["score"] == reports["good"]["max_score"] > 0, reports["good"]
    assert "held-out per-token accuracy" in rows["good"][exercise]["message"]


def test_a_shuffle_detector_earns_nothing(graded):
    _, rows, exercise = graded
    assert rows["detector"][exercise]["points"] == 0, rows["detector"][exercise]
    assert "chance" in rows["detector"][exercise]["message"], rows["detector"][exercise]


def test_pasted_weights_trained_elsewhere_earn_nothing(graded):
    reports, rows, exercise = graded
    assert rows["pasted"][exercise]["points"] == 0, rows["pasted"][exercise]
    assert "trained before grading" in rows["pasted"][exercise]["message"], rows["pasted"]
    others = [key for key in rows["pasted"] if key != exercise]  # the same as the solution's
    assert others and all(rows["pasted"][key]["points"] == rows["good"][key]["points"]
                          for key in others), rows["pasted"]


@pytest.mark.skipif(sandbox.sandbox_problem() is not None,
                    reason=f"no sandbox here: {sandbox.sandbox_problem()}")
def test_the_sandbox_draws_the_variant_the_grader_checks_and_its_environment_lacks_the_key(
        monkeypatch):
    from lectures_lib.checks.grader import set_task_variant, task_key

    monkeypatch.setenv(SECRET_ENV, SECRET.decode())
    key = task_key('["cells"]')
    cells = ["import os\nfrom lectures_lib.checks.trained import make_sort_data\n"
             "tokens, targets = make_sort_data(40, seed=3)\n"
             "environment = repr(sorted(os.environ.items()))\n"]
    with sandbox.Session(cells, grading._student_checks(), deadline=time.monotonic() + 90,
                         task_key=key) as session:
        session.start()
        assert session.run_until(1) == []
        tokens, targets = session.lookup("tokens"), session.lookup("targets")
        environment = session.lookup("environment")
    try:
        set_task_variant(key)
        expected = make_sort_data(40, seed=3)
    finally:
        set_task_variant(None)
    assert torch.equal(tokens, expected[0]) and torch.equal(targets, expected[1])
    assert not torch.equal(targets, tokens.sort(-1).values), "the variant, not the public task"
    assert key not in environment and SECRET.decode() not in environment
