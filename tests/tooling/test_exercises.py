"""The exercise release tool, and the exercises of every real notebook in both versions.

* Student versions keep no solution or hidden-test line, no output of a cell that held one, every
  other output (the teaching plots and tables), and stay valid Python.
* ``python -m course_tools release`` works end to end and reports marker errors.
* For each notebook with exercises, the imports cell plus the exercise cells run in a fresh kernel:
  the student version shows "not implemented" in every checker result without any error, and the
  solution version passes every checker (its hidden asserts included).
"""

import ast
import copy
import json
import re
import subprocess
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from course_tools.publish.exercises import (
    BEGIN_HIDDEN_TESTS,
    BEGIN_SOLUTION,
    CODE_STUB,
    END_HIDDEN_TESTS,
    END_SOLUTION,
    MARKDOWN_STUB,
    MarkerError,
    exercise_cells,
    find_exercises,
    find_regions,
    main,
    release_notebook,
    strip_solutions,
)
from course_tools.publish.notebooks import is_skipped

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
MARKERS = {BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN_TESTS, END_HIDDEN_TESTS}
RESULT_START = re.compile(r"^(?=\[(?:PASSED|FAILED)\] )", re.MULTILINE)  # str(CheckResult)
CHECKER_CALL = re.compile(r"\bcheck_\w+\s*\(")
EXERCISES_HEADING = re.compile(r"^##\s+Exercises?\b", re.MULTILINE)
SECTION_HEADING = re.compile(r"^##\s", re.MULTILINE)

# ---------------------------------------------------------------------------------------------
# A synthetic notebook in the course's exercise pattern
# ---------------------------------------------------------------------------------------------

SOLVED_FUNCTION = '''import math

import torch


def my_scaled_dot_product_attention(q, k, v, mask=None):
    """Return (out, weights): softmax(q k^T / sqrt(d_k)) over the keys, then weights @ v."""
    ### BEGIN SOLUTION
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., n_q, n_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
    ### END SOLUTION'''

CHECKER_CELL = """result = check_scaled_dot_product_attention(my_scaled_dot_product_attention)
display(result)
### BEGIN HIDDEN TESTS
assert result.passed, result
assert result.mistake is None, "secret hidden line"
### END HIDDEN TESTS"""

NESTED_SOLUTION = """%precision 3
class Halver:
    def __call__(self, x):
        if x is not None:
            ### BEGIN SOLUTION
            half = x / 2
            return half
            ### END SOLUTION
        return None

halver = Halver()"""

MARKDOWN_ANSWER = """**Question.** Why divide the scores by $\\sqrt{d_k}$?

### BEGIN SOLUTION
The variance of a dot product of d_k unit-variance terms is d_k: unscaled, the softmax saturates.
### END SOLUTION"""


def synthetic_notebook() -> nbformat.NotebookNode:
    imports = new_code_cell(
        "from IPython.display import display\n\n"
        "from lectures_lib.checks import check_scaled_dot_product_attention"
    )
    imports.execution_count = 1
    imports.outputs = [new_output("stream", name="stdout", text="a stale output\n")]
    checker = new_code_cell(CHECKER_CELL)
    checker.execution_count = 3
    checker.outputs = [new_output("execute_result", data={"text/plain": "[PASSED] old"})]
    checker.metadata["tags"] = ["keep-me"]
    nb = new_notebook(
        cells=[
            new_markdown_cell("# Synthetic section\nMarkers look like `### BEGIN SOLUTION`."),
            imports,
            new_code_cell("x = 1  # the lesson itself\nprint(x)"),
            new_markdown_cell("## Summary\nNothing."),
            new_markdown_cell("## Exercises\nWrite the function, then run the check."),
            new_code_cell(SOLVED_FUNCTION),
            checker,
            new_markdown_cell(MARKDOWN_ANSWER),
            new_code_cell(NESTED_SOLUTION),
            new_code_cell(f"{BEGIN_HIDDEN_TESTS}\nassert halver(4) == 2\n{END_HIDDEN_TESTS}"),
            new_markdown_cell("## Further reading\nThe lecture."),
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                 "language": "python"}
    return nb


# ---------------------------------------------------------------------------------------------
# What every student version must satisfy
# ---------------------------------------------------------------------------------------------


def _stripped(source: str) -> list[str]:
    return [line.strip() for line in source.splitlines() if line.strip()]


def _inside_and_outside(nb) -> tuple[Counter, Counter, set[int]]:
    """Lines inside regions, lines outside them (stripped, non-blank), cells with a solution."""
    inside, outside, solution_cells = Counter(), Counter(), set()
    for index, cell in enumerate(nb.cells):
        lines = cell.source.splitlines()
        covered = set()
        for region in find_regions(cell.source):
            covered.update(range(region.begin, region.end + 1))
            inside.update(line.strip() for line in region.body(lines) if line.strip())
            if region.kind == "solution":
                solution_cells.add(index)
        outside.update(
            line.strip() for i, line in enumerate(lines) if i not in covered and line.strip()
        )
    return inside, outside, solution_cells


def _python_source(source: str) -> str:
    """A cell's source without IPython magics and shell escapes (lines starting with % or !)."""
    return "\n".join(
        "" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines()
    )


def assert_valid_student_version(original, student, name: str) -> None:
    assert len(student.cells) == len(original.cells), f"{name}: cells must keep their indices"
    inside, outside, solution_cells = _inside_and_outside(original)
    marked = {index for index, cell in enumerate(original.cells) if find_regions(cell.source)}
    # every code cell of the exercise section: a prediction's stored output is its answer
    section = set(exercise_cells(original)) if find_exercises(original) else set()
    released = Counter(line for cell in student.cells for line in _stripped(cell.source))
    for line in inside:
        if line in (CODE_STUB, MARKDOWN_STUB):
            continue
        assert released[line] <= outside[line], (
            f"{name}: the solution / hidden-test line {line!r} leaks into the student version"
        )
    for index, (before, after) in enumerate(zip(original.cells, student.cells, strict=True)):
        where = f"{name}, cell {index}"
        assert after.cell_type == before.cell_type, where
        assert not MARKERS & set(_stripped(after.source)), f"{where}: a marker is left"
        if after.cell_type == "code" and (index in marked or index in section):
            assert after.outputs == [] and after.execution_count is None, f"{where}: outputs kept"
        elif after.cell_type == "code":
            assert after.outputs == before.outputs, f"{where}: a teaching output was lost"
        if after.cell_type == "code":
            try:
                ast.parse(_python_source(after.source))
            except SyntaxError as error:
                raise AssertionError(f"{where} is not valid Python: {error}") from None
        grading = after.metadata.get("nbgrader")
        kinds = {region.kind for region in find_regions(before.source)}
        if index in solution_cells:
            assert grading and grading["solution"] is True, f"{where}: nbgrader metadata missing"
            assert re.fullmatch(rf"{name}-(ex\d+-(solution|answer)(-\d+)?|cell-{index})",
                                grading["grade_id"]), grading
            if after.cell_type == "markdown":
                assert grading["grade"] and grading["points"] > 0, f"{where}: a written answer"
            stub = CODE_STUB if after.cell_type == "code" else MARKDOWN_STUB
            assert stub in after.source, f"{where}: the solution was not replaced by {stub!r}"
        elif "hidden" in kinds:
            assert grading and grading["grade"] and grading["locked"], f"{where}: a test cell"
            assert grading["points"] > 0 and not grading["solution"], grading
        else:
            assert grading == before.metadata.get("nbgrader"), f"{where}: metadata changed"
    nbformat.validate(student)


# ---------------------------------------------------------------------------------------------
# The pure functions
# ---------------------------------------------------------------------------------------------


def test_solution_body_becomes_an_indented_raise():
    released = strip_solutions(SOLVED_FUNCTION)
    assert '    """Return (out, weights)' in released, "the docstring stays"
    assert released.endswith("\n    " + CODE_STUB)
    assert "softmax" not in released.split('"""')[-1], "no solution line is left"
    namespace = {}
    exec(released, namespace)  # a function whose body raises: still valid Python
    with pytest.raises(NotImplementedError):
        namespace["my_scaled_dot_product_attention"](None, None, None)


def test_nested_solution_keeps_the_marker_indentation():
    released = strip_solutions(NESTED_SOLUTION)
    assert "            " + CODE_STUB + "\n        return None" in released
    ast.parse(_python_source(released))


def test_hidden_tests_are_removed_entirely():
    assert strip_solutions(CHECKER_CELL) == (
        "result = check_scaled_dot_product_attention(my_scaled_dot_product_attention)\n"
        "display(result)"
    )
    assert strip_solutions(f"{BEGIN_HIDDEN_TESTS}\nassert False\n{END_HIDDEN_TESTS}") == ""


def test_markdown_solution_becomes_your_answer_here():
    released = strip_solutions(MARKDOWN_ANSWER, "markdown")
    assert released.endswith(MARKDOWN_STUB) and "variance" not in released
    assert released.startswith("**Question.**")


def test_cells_without_markers_are_unchanged():
    text = "Markers look like `### BEGIN SOLUTION`.\n  x = 1  ### END SOLUTION\n"
    assert strip_solutions(text) == text
    assert strip_solutions(["a = 1\n", "b = 2"]) == "a = 1\nb = 2"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (f"{BEGIN_SOLUTION}\nx = 1", r"line 1: '### BEGIN SOLUTION' is never closed"),
        (f"x = 1\n{END_SOLUTION}", r"line 2: '### END SOLUTION' without"),
        (f"{BEGIN_SOLUTION}\n{BEGIN_SOLUTION}\n{END_SOLUTION}\n{END_SOLUTION}", r"line 2: .*nest"),
        (
            f"{BEGIN_SOLUTION}\n{BEGIN_HIDDEN_TESTS}\n{END_HIDDEN_TESTS}\n{END_SOLUTION}",
            r"line 2: .*nest",
        ),
        (f"{BEGIN_HIDDEN_TESTS}\nassert 1\n{END_SOLUTION}", r"line 3: .* closes the region"),
        (f"{END_HIDDEN_TESTS}", r"line 1: '### END HIDDEN TESTS' without"),
    ],
)
def test_bad_markers_are_reported(source, expected):
    with pytest.raises(MarkerError, match=expected):
        strip_solutions(source)
    nb = synthetic_notebook()
    nb.cells[8].source = source
    with pytest.raises(MarkerError, match=r"^broken_nb, cell 8 \(code\): " + expected):
        release_notebook(nb, name="broken_nb")


def test_release_notebook_on_the_synthetic_notebook():
    original = synthetic_notebook()
    untouched = copy.deepcopy(original)
    student = release_notebook(original, name="synthetic")
    assert original == untouched, "release_notebook must not change its argument"
    assert_valid_student_version(original, student, "synthetic")
    assert "secret hidden line" not in json.dumps(student)
    assert student.cells[6].metadata["tags"] == ["keep-me"], "other metadata is kept"
    assert student.cells[5].metadata["nbgrader"] == {
        "solution": True, "grade": False, "locked": False, "task": False,
        "grade_id": "synthetic-cell-5", "schema_version": 3,
    }
    assert student.cells[6].metadata["nbgrader"] == {
        "solution": False, "grade": True, "locked": True, "task": False, "points": 1,
        "grade_id": "synthetic-cell-6", "schema_version": 3,
    }, "a cell with hidden tests is a locked, graded test cell"
    assert student.cells[9].source == "", "a cell of hidden tests only is emptied, not removed"


def test_the_checks_can_fail():
    """The validity check catches a leak, a stale output, a lost teaching output, broken Python."""
    original = synthetic_notebook()
    leaky = copy.deepcopy(original)  # "released" without any change: every solution leaks
    with pytest.raises(AssertionError, match="leaks"):
        assert_valid_student_version(original, leaky, "synthetic")
    stale = release_notebook(original, name="synthetic")
    stale.cells[6].outputs = original.cells[6].outputs  # the checker's result on the solution
    with pytest.raises(AssertionError, match="outputs kept"):
        assert_valid_student_version(original, stale, "synthetic")
    bare = release_notebook(original, name="synthetic")
    bare.cells[1].outputs = []  # an output of the lesson itself
    with pytest.raises(AssertionError, match="teaching output was lost"):
        assert_valid_student_version(original, bare, "synthetic")
    broken = release_notebook(original, name="synthetic")
    broken.cells[5].source = broken.cells[5].source.replace(CODE_STUB, CODE_STUB[:-1])
    with pytest.raises(AssertionError, match="not valid Python"):
        assert_valid_student_version(original, broken, "synthetic")


def _exec_cells(nb, indices):
    """Run code cells in-process (no kernel); returns what they displayed and their namespace."""
    shown, namespace = [], {}
    for index in indices:
        namespace["display"] = shown.append  # in place of IPython's display
        exec(compile(_python_source(nb.cells[index].source), f"<cell {index}>", "exec"), namespace)
    return shown, namespace


def test_student_version_runs_and_says_not_implemented_in_process():
    original = synthetic_notebook()
    student = release_notebook(original, name="synthetic")
    indices = exercise_cell_indices(original)
    assert indices == [1, 5, 6, 8, 9]
    solved, _ = _exec_cells(original, indices)  # the hidden asserts run and pass
    assert [result.passed for result in solved] == [True], solved
    shown, namespace = _exec_cells(student, indices)
    assert [result.mistake for result in shown] == ["not_implemented"], shown
    assert "not implemented" in str(shown[0])
    with pytest.raises(NotImplementedError):
        namespace["halver"](4)


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    """The real command line, in a new interpreter (a few seconds: it imports torch)."""
    return subprocess.run(
        [sys.executable, "-m", "course_tools", *map(str, args)],
        capture_output=True, text=True, cwd=ROOT, timeout=300,
    )


def _main(capsys, *args) -> tuple[int, str, str]:
    """The same command line in this process (fast): exit code, stdout, stderr."""
    try:
        code = main([str(a) for a in args])
    except SystemExit as exit:  # argparse: --help, or bad usage
        code = exit.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_help():
    result = _cli("--help")
    assert result.returncode == 0 and "release" in result.stdout, result.stderr


def test_cli_releases_a_folder_end_to_end(tmp_path):
    source = tmp_path / "course"
    (source / ".ipynb_checkpoints").mkdir(parents=True)
    for name in ("01_a.ipynb", "02_b.ipynb", ".ipynb_checkpoints/01_a-checkpoint.ipynb"):
        nbformat.write(synthetic_notebook(), source / name)
    out = tmp_path / "student"
    result = _cli("release", source, out)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.rglob("*.ipynb")) == ["01_a.ipynb", "02_b.ipynb"]
    assert f"wrote {out / '01_a.ipynb'}" in result.stdout
    for path in out.glob("*.ipynb"):
        student = nbformat.read(path, as_version=4)
        assert_valid_student_version(synthetic_notebook(), student, path.stem)


def test_cli_reports_marker_errors_and_writes_nothing(tmp_path, capsys):
    source = tmp_path / "course"
    source.mkdir()
    nbformat.write(synthetic_notebook(), source / "01_good.ipynb")
    broken = synthetic_notebook()
    broken.cells[5].source = broken.cells[5].source.replace(END_SOLUTION, "")
    nbformat.write(broken, source / "02_broken.ipynb")
    code, _, err = _main(capsys, "release", source, tmp_path / "student")
    assert code == 1
    assert "02_broken, cell 5" in err and "never closed" in err
    assert not (tmp_path / "student").exists(), "nothing is written when a notebook is broken"


def test_cli_single_notebook_and_usage(tmp_path, capsys):
    nbformat.write(synthetic_notebook(), tmp_path / "01_a.ipynb")
    code, out, _ = _main(capsys, "release", tmp_path / "01_a.ipynb", tmp_path / "single")
    assert code == 0 and "1 student notebook(s) written" in out
    assert [p.name for p in (tmp_path / "single").iterdir()] == ["01_a.ipynb"]
    code, out, _ = _main(capsys, "release", "--help")
    assert code == 0 and "BEGIN SOLUTION" in out
    assert _main(capsys, "release")[0] == 2, "missing arguments are a usage error"


def test_cli_refuses_bad_paths(tmp_path, capsys):
    nbformat.write(synthetic_notebook(), tmp_path / "01_a.ipynb")
    code, _, err = _main(capsys, "release", tmp_path, tmp_path)
    assert code == 1 and "refusing to overwrite" in err
    code, _, err = _main(capsys, "release", tmp_path / "nowhere", tmp_path / "out")
    assert code == 1 and "does not exist" in err
    (tmp_path / "empty").mkdir()
    code, _, err = _main(capsys, "release", tmp_path / "empty", tmp_path / "out")
    assert code == 1 and "no *.ipynb" in err


def test_release_inside_the_source_folder_skips_earlier_releases(tmp_path, capsys):
    nbformat.write(synthetic_notebook(), tmp_path / "01_a.ipynb")
    for _ in range(2):
        code, out, _ = _main(capsys, "release", tmp_path, tmp_path / "student")
        assert code == 0 and "1 student notebook(s) written" in out


# ---------------------------------------------------------------------------------------------
# Running the exercises of a notebook in a fresh kernel, in both versions
# ---------------------------------------------------------------------------------------------


def exercise_cell_indices(nb) -> list[int]:
    """The first code cell, then every code cell between '## Exercises' and the next '## '."""
    code = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
    start = next(
        (i for i, cell in enumerate(nb.cells)
         if cell.cell_type == "markdown" and EXERCISES_HEADING.search(cell.source)),
        None,
    )
    assert start is not None, "the notebook has exercises but no '## Exercises' heading"
    end = next(
        (i for i, cell in enumerate(nb.cells)
         if i > start and cell.cell_type == "markdown" and SECTION_HEADING.search(cell.source)),
        len(nb.cells),
    )
    return [code[0]] + [i for i in code if start < i < end and i != code[0]]


def _checker_cells(nb, indices) -> set[int]:
    """The cells that call a checker (``check_<name>(...)``): each must display its result."""
    return {i for i in indices if CHECKER_CALL.search(nb.cells[i].source)}


def _check_results(cell) -> list[str]:
    """The CheckResults a cell displayed or printed, as text."""
    texts = []
    for output in cell.outputs:
        if output.output_type == "stream":
            text = output.text
        else:
            text = output.get("data", {}).get("text/plain", "")
        texts.extend(part for part in RESULT_START.split(text) if RESULT_START.match(part))
    return texts


def _errors(cell) -> list[str]:
    return [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]


@lru_cache(maxsize=None)
def run_exercises(path: Path) -> tuple[list[int], set[int], list, list]:
    """Run the imports cell, the student exercise cells, then the solution ones, in one kernel.

    One fresh kernel per notebook keeps the test fast: the student cells run right after the
    imports cell (exactly what a student sees), then the solution cells redefine every ``my_``
    function before their checks run. Returns the original indices of the cells run, those of
    the cells that call a checker, and the executed student and solution cells (same order).
    """
    original = nbformat.read(path, as_version=4)
    student = release_notebook(original, name=path.stem)
    indices = exercise_cell_indices(original)
    first, rest = indices[0], indices[1:]
    cells = [copy.deepcopy(original.cells[first])]
    cells += [copy.deepcopy(student.cells[i]) for i in rest]
    cells += [copy.deepcopy(original.cells[i]) for i in rest]
    for number, cell in enumerate(cells):
        cell.id = f"exercise-run-{number}"  # the copies of one cell must not share its id
        if is_skipped(cell):  # as nbval: 08's homework tiers retrain for minutes when graded
            cell.source = ""
    run = new_notebook(cells=cells, metadata=copy.deepcopy(original.metadata))
    NotebookClient(
        run, timeout=300, startup_timeout=180, kernel_name="python3", allow_errors=True,
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    student_cells = run.cells[: len(indices)]
    solution_cells = [run.cells[0]] + run.cells[len(indices):]
    return indices, _checker_cells(original, indices), student_cells, solution_cells


def assert_exercise_outputs(name, indices, checkers, cells, version: str) -> None:
    """No cell errored, each checker cell displayed a result, and every result is as expected.

    ``version`` "student": every result says "not implemented"; "solution": every result passed.
    """
    assert checkers, f"{name}: no cell in the exercises calls a check_<name>() function"
    for index, cell in zip(indices, cells, strict=True):
        where = f"{name}, cell {index} ({version} version)"
        assert not _errors(cell), f"{where} errored: {_errors(cell)}"
        results = _check_results(cell)
        if index in checkers:
            assert results, f"{where} calls a checker but displayed no CheckResult"
        for text in results:
            if version == "student":
                assert "not implemented" in text, f"{where}: expected 'not implemented': {text}"
            else:
                assert text.startswith("[PASSED]"), f"{where}: the solution fails: {text}"


def test_kernel_harness_on_the_synthetic_notebook(tmp_path):
    path = tmp_path / "99_synthetic.ipynb"
    nbformat.write(synthetic_notebook(), path)
    indices, checkers, student_cells, solution_cells = run_exercises(path)
    assert indices == [1, 5, 6, 8, 9] and checkers == {6}
    assert_exercise_outputs(path.stem, indices, checkers, student_cells, "student")
    assert_exercise_outputs(path.stem, indices, checkers, solution_cells, "solution")
    assert "not implemented" in _check_results(student_cells[2])[0]
    # The same assertions fail on the wrong outputs.
    with pytest.raises(AssertionError, match="expected 'not implemented'"):
        assert_exercise_outputs(path.stem, indices, checkers, solution_cells, "student")
    with pytest.raises(AssertionError, match="the solution fails"):
        assert_exercise_outputs(path.stem, indices, checkers, student_cells, "solution")
    crashed = copy.deepcopy(solution_cells)
    crashed[4].outputs = [new_output("error", ename="AssertionError", evalue="x", traceback=[])]
    with pytest.raises(AssertionError, match=r"cell 9 .* errored: \[.AssertionError: x"):
        assert_exercise_outputs(path.stem, indices, checkers, crashed, "solution")
    silent = copy.deepcopy(solution_cells)
    silent[2].outputs = []
    with pytest.raises(AssertionError, match="displayed no CheckResult"):
        assert_exercise_outputs(path.stem, indices, checkers, silent, "solution")


# ---------------------------------------------------------------------------------------------
# The real notebooks
# ---------------------------------------------------------------------------------------------


def _real_notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("*.ipynb"))


def _has_exercises(path: Path) -> bool:
    nb = nbformat.read(path, as_version=4)
    return any(find_regions(cell.source) for cell in nb.cells)


def _exercise_notebooks():
    found = [path for path in _real_notebooks() if _has_exercises(path)]
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason="no notebook has exercises yet"))]
    return [pytest.param(path, id=path.stem) for path in found]


@pytest.mark.parametrize("path", _exercise_notebooks())
def test_real_notebook_release_strips_everything(path):
    original = nbformat.read(path, as_version=4)
    assert_valid_student_version(original, release_notebook(original, path.stem), path.stem)


@pytest.mark.parametrize("path", _exercise_notebooks())
def test_real_student_exercises_run_and_say_not_implemented(path):
    indices, checkers, student_cells, _ = run_exercises(path)
    assert_exercise_outputs(path.stem, indices, checkers, student_cells, "student")


@pytest.mark.parametrize("path", _exercise_notebooks())
def test_real_solutions_pass_their_checkers(path):
    indices, checkers, _, solution_cells = run_exercises(path)
    assert_exercise_outputs(path.stem, indices, checkers, solution_cells, "solution")


def test_cli_releases_the_real_notebooks(tmp_path, capsys):
    assert _real_notebooks(), "notebooks/ holds no notebook"
    code, _, err = _main(capsys, "release", NOTEBOOKS, tmp_path)
    assert code == 0, err
    for path in _real_notebooks():
        student = nbformat.read(tmp_path / path.name, as_version=4)
        original = nbformat.read(path, as_version=4)
        assert_valid_student_version(original, student, path.stem)


@pytest.mark.parametrize("path", _exercise_notebooks())
def test_student_versions_show_no_answer_to_predict(path):
    """Every code cell of the exercise section starts empty in the student version (a "predict,
    then run" cell's stored output would be the answer); the lecture above keeps its outputs."""
    original = nbformat.read(path, as_version=4)
    student = release_notebook(original, path.stem)
    section = exercise_cells(original)
    assert section, f"{path.stem}: no exercise section found"
    assert any(original.cells[i].outputs for i in section), "nothing to strip: a vacuous test"
    for index in section:
        assert student.cells[index].outputs == [], f"{path.stem}, cell {index}: an output is kept"
    lecture = [i for i, cell in enumerate(original.cells)
               if cell.cell_type == "code" and i < min(section) and cell.outputs]
    assert lecture and all(student.cells[i].outputs == original.cells[i].outputs
                           for i in lecture), f"{path.stem}: a teaching output was lost"
