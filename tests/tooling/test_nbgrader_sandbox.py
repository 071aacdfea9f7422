"""nbgrader's kernels in the course's sandbox (``python -m course_tools sandbox-kernelspec``).

A real ``nbgrader autograde`` of **every notebook of the course** (01-07, each cut to its
exercises, as in test_nbgrader.py) with ``c.ExecutePreprocessor.kernel_name =
"lectures-sandbox"``, as the README's nbgrader route configures it. The attacker, graded first,
hands in all seven, each solved and with one attack in its first code exercise: it tries to read
and write ``gradebook.db``, the victim's submission, that notebook's source in the course and in
the repository, the checkers and nbgrader's config, and leaves a detached process behind. In
every notebook every attempt is denied, nothing changes, no process outlives autograde, and
every (correct) submission gets full marks: the attacker's seven and the victim's 01 (one
notebook for the victim keeps the test's CPU within CI's budget: what the attacks reach does not
depend on it). Without bubblewrap the kernelspec refuses to install and the kernel refuses to
start, each saying why.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools.grading.sandbox import kernel as sandbox_kernel
from course_tools.publish.exercises import annotate_notebook, find_exercises, release_notebook

pytest.importorskip("nbgrader", reason="nbgrader is the optional extra '.[grading]'")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
NOTEBOOK = ROOT / "notebooks" / "01_self_attention.ipynb"  # the victim's submission
ASSIGNMENT, ATTACKER, VICTIM = "ps1", "aaa", "zzz"
CANARY = "917.31"
CONFIG = f"""c = get_config()
c.CourseDirectory.root = r"{{root}}"
c.CourseDirectory.course_id = "attention"
c.ExecutePreprocessor.timeout = 300
{sandbox_kernel.CONFIG_LINE}
"""

ATTACK = '''import os
import subprocess

subprocess.Popen(["sleep", "{canary}"], start_new_session=True)
print("CWD", os.getcwd(), sorted(os.listdir(".")))
for path in {paths!r}:
    for mode in ("rb", "r+b"):  # r+b: write to the file itself, never create a private one
        try:
            with open(path, mode) as file:
                file.read(1) if mode == "rb" else file.write(b"tampered")
            print("ALLOWED", mode, path)
        except OSError as error:
            print("DENIED", mode, path, type(error).__name__)
'''


def _trimmed(nb):
    from tests.tooling.test_nbgrader import _trimmed as trim

    return trim(nb)


def _digest(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if file.is_file() and "__pycache__" not in file.parts:
                digest.update(file.read_bytes())
    return digest.hexdigest()


def _canaries() -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if CANARY.encode() in cmdline and b"sleep" in cmdline:
            found.append(pid)
    return found


pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]  # skipped without it, named


@pytest.fixture(scope="module")
def autograded(tmp_path_factory):
    root = tmp_path_factory.mktemp("nbgrader_sandbox")
    kernels = tmp_path_factory.mktemp("kernels")
    assert sandbox_kernel.main(["--install", "--prefix", str(kernels)]) == 0
    env = dict(os.environ, JUPYTER_PATH=str(kernels / "share" / "jupyter"),
               PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    (root / "nbgrader_config.py").write_text(CONFIG.format(root=root))
    source = root / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    originals = {}
    for path in NOTEBOOKS:
        originals[path.stem] = _trimmed(nbformat.read(path, as_version=4))
        nbformat.write(annotate_notebook(originals[path.stem], path.stem), source / path.name)

    def nbgrader(*args):
        result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                                capture_output=True, text=True, timeout=1800)
        assert result.returncode == 0, f"nbgrader {args[0]} failed:\n{result.stdout}{result.stderr}"
        return result.stdout + result.stderr

    nbgrader("generate_assignment", ASSIGNMENT, "--create", "--force")
    victim = root / "submitted" / VICTIM / ASSIGNMENT / NOTEBOOK.name
    victim.parent.mkdir(parents=True)
    nbformat.write(_solved(originals[NOTEBOOK.stem], NOTEBOOK.stem), victim)
    targets = {}
    for path in NOTEBOOKS:
        targets[path.stem] = [
            root / "gradebook.db", victim, source / path.name, path,
            ROOT / "lectures_lib" / "checks" / "additive.py",
            Path("/course/lectures_lib/checks/additive.py"), root / "nbgrader_config.py"]
        attacker = _solved(originals[path.stem], path.stem)
        exercise = next(e for e in find_exercises(originals[path.stem]) if e.tests)
        cell = attacker.cells[exercise.solutions[0]]
        cell.source = ATTACK.format(canary=CANARY, paths=[str(p) for p in targets[path.stem]]) \
            + "\n" + cell.source
        submitted = root / "submitted" / ATTACKER / ASSIGNMENT / path.name
        submitted.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(attacker, submitted)
    watched = [victim, source, ROOT / "lectures_lib", *NOTEBOOKS, root / "nbgrader_config.py"]
    before = _digest(*watched)
    log = nbgrader("autograde", ASSIGNMENT, "--create", "--force", "--student", ATTACKER)
    attacked = _digest(*watched)
    canaries = _canaries()
    log += nbgrader("autograde", ASSIGNMENT, "--create", "--force", "--student", VICTIM)
    printed = {}
    for path in NOTEBOOKS:
        graded = nbformat.read(root / "autograded" / ATTACKER / ASSIGNMENT / path.name,
                               as_version=4)
        printed[path.stem] = "".join(output.get("text", "") for cell in graded.cells
                                     if cell.cell_type == "code" for output in cell.outputs)
    return {"root": root, "originals": originals, "before": before, "attacked": attacked,
            "canaries": canaries, "printed": printed, "log": log, "targets": targets}


def _solved(original, stem):
    """The student's copy of ``original`` with every answer filled in."""
    solved = release_notebook(original, stem)
    for index, cell in enumerate(annotate_notebook(original, stem).cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            solved.cells[index].source = cell.source
    return nbformat.from_dict(solved)


@pytest.mark.parametrize("stem", [path.stem for path in NOTEBOOKS])
def test_every_read_and_write_outside_is_denied(autograded, stem):
    printed = autograded["printed"][stem]
    assert "CWD" in printed, printed
    allowed = [line for line in printed.splitlines() if line.startswith("ALLOWED")]
    assert allowed == ["ALLOWED rb /course/lectures_lib/checks/additive.py"], printed
    for path in autograded["targets"][stem]:
        assert f"DENIED r+b {path}" in printed, (path, printed)
        if not str(path).startswith("/course/"):  # the checkers: readable, as nbgrader needs
            assert f"DENIED rb {path}" in printed, (path, printed)
    assert "gradebook.db" not in printed.split("CWD", 1)[1].split("\n", 1)[0]


def test_nothing_changed_and_no_process_outlived_autograde(autograded):
    assert autograded["attacked"] == autograded["before"], "course or victim changed"
    assert autograded["canaries"] == [], "a detached process outlived autograde"


def test_correct_submissions_get_full_marks_in_the_sandbox(autograded):
    from nbgrader.api import Gradebook

    graded = [(ATTACKER, path.stem) for path in NOTEBOOKS] + [(VICTIM, NOTEBOOK.stem)]
    with Gradebook(f"sqlite:///{autograded['root'] / 'gradebook.db'}") as gradebook:
        for student, stem in graded:
            automatic = sum(e.points for e in find_exercises(autograded["originals"][stem])
                            if e.tests)
            notebook = gradebook.find_submission_notebook(stem, ASSIGNMENT, student)
            assert automatic > 0, stem
            assert notebook.max_code_score == pytest.approx(automatic)
            assert notebook.code_score == pytest.approx(automatic), (student, stem,
                                                                     autograded["log"][-4000:])


def test_without_bubblewrap_the_kernel_refuses(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sandbox_kernel, "sandbox_problem", lambda: "bubblewrap is not installed")
    assert sandbox_kernel.main(["--install", "--prefix", str(tmp_path)]) == 2
    assert "refusing to install" in capsys.readouterr().err
    assert not (tmp_path / "share").exists()
    assert sandbox_kernel.main(["launch", str(tmp_path / "kernel.json")]) == 1
    assert "refusing to start without a sandbox" in capsys.readouterr().err
