"""A rule about memory is measured where the student's code runs (issue 33, item 1).

06's exercise 2 forbids an (n, n) tensor. In the notebook the checker counts every tensor the
function makes; in the grader the function runs in the sandbox, where the grader sees none of its
tensors (it measured only the answer that crossed back, so a dense solution that fails in the
notebook earned 4/4), and a measurement taken inside would be the submission's to fake. Graded,
the call runs at a length where one N x N matrix needs twice the sandbox's memory limit, which
the kernel holds: a dense solution runs out of memory there, a window solution returns the
right answer.
"""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest
import torch

from course_tools.publish.exercises import annotate_notebook, find_exercises, release_notebook
from lectures_lib.checks.windows import _dense, _fit_length, _window, banded_reference
from tests.tooling.test_grading import ROOT

pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]
STEM = "06_attention_variants"

DENSE = '''def my_causal_window_attention(q, k, v, past):
    n = q.shape[-2]
    offset = torch.arange(n)[None, :] - torch.arange(n)[:, None]  # (n, n): j - i
    scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5  # (..., n, n)
    scores = scores.masked_fill((offset > 0) | (offset < -past), float("-inf"))
    return scores.softmax(-1) @ v
'''
# The dense solution, and a measurement inside the sandbox told it used nothing: the counter the
# notebook's check uses, patched to report no tensors (the grader does not ask it any more).
LYING = DENSE + '''
import lectures_lib.measure as _measure
class _Nothing:
    peak_bytes, largest_tensor_shape = 0, ()
_measure.peak_tensor_memory = lambda fn: (fn(), _Nothing())[1]
'''


def _grade(tmp_path, variants: dict[str, str]) -> dict[str, dict]:
    original = nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb", as_version=4)
    solved = release_notebook(original, STEM)
    for index, cell in enumerate(annotate_notebook(original, STEM).cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            solved.cells[index].source = cell.source
    window = [e for e in find_exercises(original) if e.tests][1]
    for kind, source in variants.items():
        notebook = nbformat.from_dict(json.loads(nbformat.writes(solved)))
        if source is not None:
            notebook.cells[window.solutions[0]].source = source
        nbformat.write(notebook, tmp_path / f"{kind}_{STEM}.ipynb")
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", str(tmp_path), "--json", "--quiet",
         "--timeout", "100"], capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    exercise = f"{STEM}-ex{window.number}"
    return {report["submission"].rsplit("/", 1)[-1].split("_")[0]:
            next(row for row in report["exercises"] if row["id"] == exercise)
            for report in reports}


def test_a_dense_solution_fails_graded_as_in_the_notebook(tmp_path):
    rows = _grade(tmp_path, {"window": None, "dense": DENSE, "lying": LYING})
    assert rows["window"]["points"] == rows["window"]["max_points"] > 0, rows["window"]
    assert "memory limit" in rows["window"]["message"], rows["window"]
    for kind in ("dense", "lying"):
        assert rows[kind]["points"] == 0, rows[kind]
        assert "ran out of memory" in rows[kind]["message"], rows[kind]


def test_the_dense_solution_fails_the_notebooks_own_check():
    from lectures_lib.checks import check_causal_window_attention

    namespace = {"torch": torch}
    exec(DENSE, namespace)  # noqa: S102 - the test's own solution
    result = check_causal_window_attention(namespace["my_causal_window_attention"])
    assert not result.passed and result.mistake == "quadratic_memory", result


@pytest.mark.parametrize("lead,n,past,d,d_v", [((2,), 10, 3, 4, 4), ((2, 3), 9, 0, 5, 3),
                                               ((1,), 5, 9, 3, 6), ((), 1, 2, 4, 4),
                                               ((1, 1), 33, 7, 2, 5)])
def test_the_graders_banded_reference_is_dense_attention_under_the_window(lead, n, past, d, d_v):
    generator = torch.Generator().manual_seed(n * 31 + past)
    q, k = (torch.randn(*lead, n, d, generator=generator, dtype=torch.float64) for _ in range(2))
    v = torch.randn(*lead, n, d_v, generator=generator, dtype=torch.float64)
    torch.testing.assert_close(banded_reference(q, k, v, past), _dense(q, k, v, _window(n, past)))


def test_the_probe_length_outgrows_any_memory_limit():
    for limit in (2**28, 6 * 2**30, 64 * 2**30):
        n = _fit_length(limit)
        assert n * n * 4 >= 2 * limit and (n // 2) ** 2 * 4 < 2 * limit or n == 1024
