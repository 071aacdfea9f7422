"""nbgrader's kernels in the course's sandbox (``python -m lectures_lib sandbox-kernelspec``).

A real ``nbgrader autograde`` of notebook 01 (cut to its exercises, as in test_nbgrader.py) with
``c.ExecutePreprocessor.kernel_name = "lectures-sandbox"``: an attacker, graded first, tries to
read and write ``gradebook.db``, the victim's submission, the course's source notebook and the
checkers, and leaves a detached process behind; every attempt is denied, nothing changes, no
process outlives autograde, and both (correct) submissions get full marks. Without bubblewrap
the kernelspec refuses to install and the kernel refuses to start, each saying why.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from lectures_lib.tooling import sandbox_kernel
from lectures_lib.tooling.exercises import annotate_notebook, find_exercises, release_notebook

pytest.importorskip("nbgrader", reason="nbgrader is the optional extra '.[grading]'")

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "01_self_attention.ipynb"
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


pytestmark = pytest.mark.system_package("bubblewrap")  # skipped without it, named


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
    original = _trimmed(nbformat.read(NOTEBOOK, as_version=4))
    nbformat.write(annotate_notebook(original, NOTEBOOK.stem), source / NOTEBOOK.name)

    def nbgrader(*args):
        result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                                capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"nbgrader {args[0]} failed:\n{result.stdout}{result.stderr}"
        return result.stdout + result.stderr

    nbgrader("generate_assignment", ASSIGNMENT, "--create", "--force")
    solved = release_notebook(original, NOTEBOOK.stem)
    exercise = next(e for e in find_exercises(original) if e.tests)
    for index, cell in enumerate(annotate_notebook(original, NOTEBOOK.stem).cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            solved.cells[index].source = cell.source
    victim = root / "submitted" / VICTIM / ASSIGNMENT / NOTEBOOK.name
    targets = [root / "gradebook.db", victim, source / NOTEBOOK.name, NOTEBOOK,
               ROOT / "lectures_lib" / "checks" / "additive.py",
               Path("/course/lectures_lib/checks/additive.py"), root / "nbgrader_config.py"]
    attacker = nbformat.from_dict(solved)
    attacker.cells[exercise.solutions[0]].source = ATTACK.format(
        canary=CANARY, paths=[str(p) for p in targets]) + "\n" + solved.cells[
        exercise.solutions[0]].source
    for path, nb in [(victim, solved), (root / "submitted" / ATTACKER / ASSIGNMENT /
                                        NOTEBOOK.name, attacker)]:
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)
    before = _digest(victim, source, ROOT / "lectures_lib", NOTEBOOK, root / "nbgrader_config.py")
    nbgrader("autograde", ASSIGNMENT, "--create", "--force", "--student", ATTACKER)
    attacked = _digest(victim, source, ROOT / "lectures_lib", NOTEBOOK,
                       root / "nbgrader_config.py")
    canaries = _canaries()
    log = nbgrader("autograde", ASSIGNMENT, "--create", "--force", "--student", VICTIM)
    graded = nbformat.read(root / "autograded" / ATTACKER / ASSIGNMENT / NOTEBOOK.name,
                           as_version=4)
    printed = "".join(output.get("text", "") for cell in graded.cells
                      if cell.cell_type == "code" for output in cell.outputs)
    return {"root": root, "original": original, "before": before, "attacked": attacked,
            "canaries": canaries,
            "printed": printed, "log": log, "targets": targets}


def test_every_read_and_write_outside_is_denied(autograded):
    printed = autograded["printed"]
    assert "CWD" in printed, printed
    allowed = [line for line in printed.splitlines() if line.startswith("ALLOWED")]
    assert allowed == ["ALLOWED rb /course/lectures_lib/checks/additive.py"], printed
    for path in autograded["targets"]:
        assert f"DENIED r+b {path}" in printed, (path, printed)
        if not str(path).startswith("/course/"):  # the checkers: readable, as nbgrader needs
            assert f"DENIED rb {path}" in printed, (path, printed)
    assert "gradebook.db" not in printed.split("CWD", 1)[1].split("\n", 1)[0]


def test_nothing_changed_and_no_process_outlived_autograde(autograded):
    assert autograded["attacked"] == autograded["before"], "course or victim changed"
    assert autograded["canaries"] == [], "a detached process outlived autograde"


def test_correct_submissions_get_full_marks_in_the_sandbox(autograded):
    from nbgrader.api import Gradebook

    exercises = find_exercises(autograded["original"])
    automatic = sum(e.points for e in exercises if e.tests)
    with Gradebook(f"sqlite:///{autograded['root'] / 'gradebook.db'}") as gradebook:
        for student in (ATTACKER, VICTIM):
            notebook = gradebook.find_submission_notebook(NOTEBOOK.stem, ASSIGNMENT, student)
            assert notebook.max_code_score == pytest.approx(automatic)
            assert notebook.code_score == pytest.approx(automatic), (student, autograded["log"])


def test_without_bubblewrap_the_kernel_refuses(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sandbox_kernel, "sandbox_problem", lambda: "bubblewrap is not installed")
    assert sandbox_kernel.main(["--install", "--prefix", str(tmp_path)]) == 2
    assert "refusing to install" in capsys.readouterr().err
    assert not (tmp_path / "share").exists()
    assert sandbox_kernel.main(["launch", str(tmp_path / "kernel.json")]) == 1
    assert "refusing to start without a sandbox" in capsys.readouterr().err
