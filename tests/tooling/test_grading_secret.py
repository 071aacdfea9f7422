"""The grade command with the instructor's secret (``--secret-file``, ``LECTURES_GRADING_SECRET``).

A student who reads the public package can precompute every public probe. The submission here
does exactly that: its "solution" of 01 looks the answer up in a table of the reference's
answers to the public probes (visible and hidden), computing no attention at all. Graded without
a secret it gets full marks (the public defaults, as the grade command then says); with a secret
it gets nothing, while a correct submission keeps full marks; and the secret never reaches the
sandbox.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys

import nbformat
import pytest

from course_tools import grading
from course_tools.publish.exercises import find_exercises
from lectures_lib.checks import check_additive_attention
from lectures_lib.checks.additive import additive_attention_reference
from lectures_lib.checks.grader import SECRET_ENV
from tests.tooling.test_grading import COURSE, NAME, ROOT, _submission

pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]  # skipped without it, named
TIMEOUT = 40

LOOKUP = '''import hashlib

import torch

ANSWERS = {answers!r}


def _key(args):
    text = repr([a.tolist() if isinstance(a, torch.Tensor) else a for a in args])
    return hashlib.sha256(text.encode()).hexdigest()


def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    """No attention here: the answers to the public probes, looked up."""
    args = (q, k, v, w_q, w_k, w_score) + (() if mask is None else (mask,))
    out, weights, dtype = ANSWERS.get(_key(args), ([0.0], [0.0], "float32"))
    dtype = getattr(torch, dtype)
    return torch.tensor(out, dtype=dtype), torch.tensor(weights, dtype=dtype)
'''

SNOOP = '''import os


def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    seen = [key for key in os.environ if "SECRET" in key]
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                if b"LECTURES_GRADING_SECRET" in file.read():
                    seen.append(pid)
        except OSError:
            pass
    raise ValueError(f"secret seen: {seen}")
'''


def _public_answers(monkeypatch) -> dict:
    """What a student computes at home from the package: the reference on the public probes."""
    monkeypatch.delenv(SECRET_ENV, raising=False)
    answers = {}

    def recording(*args, **kwargs):
        out, weights = additive_attention_reference(*args, **kwargs)
        values = [*args, *kwargs.values()]
        text = repr([a.tolist() for a in values])
        answers[hashlib.sha256(text.encode()).hexdigest()] = (
            out.tolist(), weights.tolist(), str(out.dtype).removeprefix("torch."))
        return out, weights

    for hidden in (False, True):
        assert check_additive_attention(recording, hidden=hidden).passed
    return answers


def _with_solution(source: str):
    nb = _submission("correct")
    exercise = next(e for e in find_exercises(nbformat.read(COURSE, as_version=4)) if e.tests)
    nb.cells[exercise.solutions[0]].source = source
    return nb


@pytest.fixture(scope="module")
def submissions(tmp_path_factory):
    folder = tmp_path_factory.mktemp("secret_submissions")
    monkeypatch = pytest.MonkeyPatch()
    try:
        answers = _public_answers(monkeypatch)
    finally:
        monkeypatch.undo()
    paths = {}
    for kind, nb in [("correct", _submission("correct")),
                     ("lookup", _with_solution(LOOKUP.format(answers=answers))),
                     ("snoop", _with_solution(SNOOP))]:
        paths[kind] = folder / f"{kind}_{NAME}.ipynb"
        nbformat.write(nb, paths[kind])
    secret = folder.parent / "instructor-secret"
    secret.write_bytes(b"0123456789abcdef-this-term-only\n")
    return paths, secret


def _grade(paths, *options):
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", *map(str, paths), "--json", "--quiet",
         "--timeout", str(TIMEOUT), *options],
        capture_output=True, text=True, timeout=len(paths) * (TIMEOUT + 120), cwd=ROOT,
        env={key: value for key, value in __import__("os").environ.items()
             if key != SECRET_ENV},
    )
    assert result.returncode == 0, result.stderr
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    return {r["submission"].rsplit("/", 1)[-1].split("_")[0]: r for r in reports}, result.stderr


def test_public_probes_can_be_precomputed_and_the_grader_says_so(submissions):
    paths, _ = submissions
    reports, note = _grade([paths["correct"], paths["lookup"]])
    assert "public defaults" in note, note
    assert reports["correct"]["score"] == 4.0, reports["correct"]
    assert reports["lookup"]["score"] == 4.0, "without a secret a lookup table is enough"


def test_with_a_secret_the_lookup_fails_and_the_correct_solution_passes(submissions):
    paths, secret = submissions
    reports, note = _grade(list(paths.values()), "--secret-file", str(secret))
    assert "drawn from the instructor's secret" in note, note
    assert reports["correct"]["score"] == 4.0, reports["correct"]
    assert reports["lookup"]["score"] == 0.0, reports["lookup"]
    snooped = next(r for r in reports["snoop"]["exercises"] if not r["manual"])["message"]
    assert "secret seen: []" in snooped, snooped


def test_a_too_short_secret_is_refused(tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("short")
    assert grading.main([str(tmp_path), "--secret-file", str(secret)]) == 2
    assert "at least 16" in capsys.readouterr().err
