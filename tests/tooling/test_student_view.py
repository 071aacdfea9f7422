"""The sandbox's ``checks`` stand-in (``tooling/_student_view.py``) still works as a package: its
machinery runs (safe calls under a time limit), its checkers are stubs, no reference is left.
Needs no sandbox: the stand-in is imported in a plain interpreter over a copy of the library."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import lectures_lib
from course_tools.grading.sandbox._student_view import MACHINERY, student_checks

LIBRARY = Path(lectures_lib.__file__).resolve().parent

SCRIPT = r"""
import sys, time
import lectures_lib
assert lectures_lib.__file__.startswith(sys.argv[1]), lectures_lib.__file__
import lectures_lib.checks as c
from lectures_lib.checks import _attention_probes, _base, additive, attention
from lectures_lib.checks._base import Mistake, call, checker

assert call(lambda x: x + 1, 1) == 2

@checker("sleepy")
def body(fn):
    call(fn)

result = body(lambda: time.sleep(30), timeout=0.3)
assert result.mistake == "timed_out", result

stub = c.check_scaled_dot_product_attention(lambda *a: None)
assert not stub and stub.mistake == "graded_by_the_grader", stub
assert not hasattr(additive, "additive_attention_reference")
assert not hasattr(_attention_probes, "_probes") and not hasattr(attention, "_diagnose")
print("stand-in ok")
"""


def test_the_stand_in_keeps_the_machinery_whole_and_runs(tmp_path):
    course = tmp_path / "course"
    shutil.copytree(LIBRARY, course / "lectures_lib",
                    ignore=shutil.ignore_patterns("__pycache__", "checks"))
    student_checks(course / "lectures_lib" / "checks")
    for stem in MACHINERY:  # whole: the same code, as ast.unparse writes it
        assert (course / "lectures_lib" / "checks" / f"{stem}.py").exists(), stem
    run = subprocess.run([sys.executable, "-c", SCRIPT, str(course)], cwd=course, capture_output=True,
                         text=True, timeout=300, env={"PYTHONPATH": str(course), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0 and "stand-in ok" in run.stdout, run.stdout + run.stderr[-3000:]



PUBLIC_NAMES = r"""
import importlib, json, sys
import lectures_lib
assert lectures_lib.__file__.startswith(sys.argv[1]), lectures_lib.__file__
missing = {}
for stem, names in json.loads(sys.argv[2]).items():
    module = importlib.import_module(f"lectures_lib.checks.{stem}")
    gone = [name for name in names if not hasattr(module, name)]
    if gone:
        missing[stem] = gone
print(json.dumps(missing))
"""


def test_every_public_name_but_the_answers_is_in_the_stand_in(tmp_path):
    """A submission imports the data helpers and constants from the stand-in exactly as from the
    course (04: ``from lectures_lib.checks.trained import SORT_VOCAB_SIZE, make_sort_data``),
    wherever the module defines or re-exports them (``A, B = 6, 8`` included)."""
    import importlib
    import json

    course = tmp_path / "course"
    shutil.copytree(LIBRARY, course / "lectures_lib",
                    ignore=shutil.ignore_patterns("__pycache__", "checks"))
    student_checks(course / "lectures_lib" / "checks")
    public = {}
    for path in sorted((LIBRARY / "checks").glob("*.py")):
        module = importlib.import_module(f"lectures_lib.checks.{path.stem}")
        names = [n for n in getattr(module, "__all__", [])  # answers are left out on purpose
                 if not (n.startswith("check_") or n.endswith("_reference"))]
        if names:
            public[path.stem] = names
    assert "make_sort_data" in public["trained"] and "SORT_VOCAB_SIZE" in public["trained"]
    run = subprocess.run([sys.executable, "-c", PUBLIC_NAMES, str(course), json.dumps(public)],
                         cwd=course, capture_output=True, text=True, timeout=300,
                         env={"PYTHONPATH": str(course), "PATH": "/usr/bin:/bin"})
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout) == {}, run.stdout


def test_the_worker_caps_what_is_printed_with_the_librarys_one_capture():
    """What the student's code prints is capped by one stream, the checks' ``_Capture``
    (lectures_lib may not import course_tools; the grader's worker imports the library's),
    not by a second copy of it in the worker."""
    import inspect
    import io

    from course_tools.grading.sandbox import worker
    from lectures_lib.checks.grader import CappedOutput

    own = [name for name, value in vars(worker).items() if inspect.isclass(value)
           and issubclass(value, io.TextIOBase) and value.__module__ == worker.__name__]
    assert own == [], f"the worker writes its own capped stream again: {own}"
    served = worker.Worker([])
    assert isinstance(served.printed, CappedOutput)
    print("x" * 5000, file=served.printed)
    assert served.printed.take() == "x" * worker.PRINT_EXCERPT and served.printed.take() == ""
