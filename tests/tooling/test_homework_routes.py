"""Section 08's homework (Exercise 5 of notebook 08) through the grader's two other routes: the
grade command's ``--scheduler`` (a Dask scheduler and a worker on 127.0.0.1, mutual TLS, the
worker holding the instructor's secret file itself), and nbgrader's ``autograde`` in the course's
sandboxed kernel (``lectures-sandbox``, as the README's nbgrader route configures it). Through
each, the notebook's own solution gets the homework's 8 points and an untrained recipe or one
that reads the sentences' package and hands translations in gets none of them.
(``test_homework_grading.py`` is the grade command without a scheduler.)

Cost, on 2 cores: each route's unsolved submissions about 1-2 CPU minutes (an untrained recipe
trains one epoch and is scored); each solved one retrains the reference recipe, about 4-5 CPU
minutes (``benchmarks/grade_homework.json``). The system tier, and slow: about 12 CPU minutes in
all. Through nbgrader the checker runs in the submission's kernel: no secret reaches it (the
course's fixed split is scored) and the kernel's CPU limit (600 s,
:class:`~course_tools.grading.sandbox.Limits`) bounds the whole notebook, training included.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.exercises import annotate_notebook

from ..conftest import require_system_package

pytestmark = [pytest.mark.system, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
if not (ROOT / "benchmarks" / "grade_homework.py").exists():
    pytest.skip("benchmarks/ is not here (a checkout is needed)", allow_module_level=True)
sys.path.insert(0, str(ROOT / "benchmarks"))
import grade_homework as H  # noqa: E402

TIMEOUT = 600
UNSOLVED = ["untrained", "reads-test"]


def _exercises_only(nb):
    """08's ``## Exercises`` section, the homework included (the lecture is not re-run)."""
    start = next(i for i, c in enumerate(nb.cells) if c.cell_type == "markdown"
                 and c.source.startswith("## Exercises"))
    end = next(i for i, c in enumerate(nb.cells) if i > start and c.cell_type == "markdown"
               and c.source.startswith("## "))
    cut = copy.deepcopy(nb)
    cut.cells = nb.cells[start:end]
    return cut


# --------------------------------------------------------------------------------------------
# grade --scheduler
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_system_package("bubblewrap")
    pytest.importorskip("distributed", reason="distributed (pip install 'lectures-lib[cluster]')")
    from course_tools.grading._local_cluster import local_cluster

    here = tmp_path_factory.mktemp("homework_cluster")
    secret = here / "secret"
    secret.write_text("the homework routes test's secret\n")
    secret.chmod(0o600)
    with local_cluster(1, here, timeout=180,
                       worker_env={"LECTURES_GRADING_SECRET_FILE": str(secret)}) as (address, _):
        yield address, here, secret


def _grade_on_cluster(cluster, tmp_path: Path, kinds: list[str]) -> dict:
    address, here, secret = cluster
    folder = tmp_path / "submissions"
    folder.mkdir()
    for kind in kinds:
        nbformat.write(H.submission(kind), folder / f"{kind}_{H.NAME}.ipynb")
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", str(folder), "--notebook", H.NAME,
         "--scheduler", address, "--tls", str(here / "tls" / "client"), "--secret-file",
         str(secret), "--timeout", str(TIMEOUT), "--json", "--quiet"],
        capture_output=True, text=True, cwd=tmp_path, timeout=len(kinds) * (4 * TIMEOUT + 300))
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    return {Path(r["submission"]).name.split("_")[0]: r for r in reports}


def _message(report) -> str:
    return " ".join(row["message"] for row in report["exercises"] if row["id"] == H.HOMEWORK)


def test_on_the_cluster_unsolved_recipes_get_nothing(cluster, tmp_path):
    reports = _grade_on_cluster(cluster, tmp_path, UNSOLVED)
    assert sorted(reports) == sorted(UNSOLVED)
    for kind, report in reports.items():
        assert H.homework_points(report) == (0.0, 8.0), (kind, _message(report))
    assert _message(reports["untrained"]).count("needs BLEU >=") == 4
    assert "secret" in _message(reports["untrained"])  # the worker's secret drew the test split
    assert "'memorised'" in _message(reports["reads-test"])


def test_on_the_cluster_the_solution_gets_full_marks(cluster, tmp_path):
    report = _grade_on_cluster(cluster, tmp_path, ["solved"])["solved"]
    assert H.homework_points(report) == (8.0, 8.0), _message(report)
    assert "the boss tier" in _message(report) and "secret" in _message(report)


# --------------------------------------------------------------------------------------------
# nbgrader autograde in the sandboxed kernel
# --------------------------------------------------------------------------------------------

ASSIGNMENT = "ps8"
CONFIG = """c = get_config()
c.CourseDirectory.root = r"{root}"
c.CourseDirectory.course_id = "attention"
c.ExecutePreprocessor.timeout = 1200  # a tier cell retrains the recipe (minutes)
{kernel}
"""


def _autograde(tmp_path: Path, kinds: list[str]) -> dict[str, dict[str, float]]:
    """Autograde one submission of 08's exercises per kind; each kind's points per grade id."""
    pytest.importorskip("nbgrader", reason="nbgrader is the optional extra '.[grading]'")
    require_system_package("bubblewrap")
    from nbgrader.api import Gradebook

    from course_tools.grading.sandbox import kernel as sandbox_kernel

    root, kernels = tmp_path / "course", tmp_path / "kernels"
    assert sandbox_kernel.main(["--install", "--prefix", str(kernels)]) == 0
    env = dict(os.environ, JUPYTER_PATH=str(kernels / "share" / "jupyter"),
               PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    source = root / "source" / ASSIGNMENT
    source.mkdir(parents=True)
    (root / "nbgrader_config.py").write_text(
        CONFIG.format(root=root, kernel=sandbox_kernel.CONFIG_LINE))
    course = _exercises_only(H.course_notebook())
    nbformat.write(annotate_notebook(course, H.NAME), source / f"{H.NAME}.ipynb")

    def nbgrader(*args):
        result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                                capture_output=True, text=True, timeout=3600)
        assert result.returncode == 0, f"nbgrader {args[0]}:\n{result.stdout}{result.stderr}"

    nbgrader("generate_assignment", ASSIGNMENT, "--create", "--force")
    for kind in kinds:
        folder = root / "submitted" / kind / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(H.submission(kind, course), folder / f"{H.NAME}.ipynb")
        nbgrader("autograde", ASSIGNMENT, "--create", "--force", "--student", kind)
    ids = [f"{H.HOMEWORK}-test"] + [f"{H.HOMEWORK}-test-{k}" for k in range(2, 5)]
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {kind: {grade_id: gradebook.find_grade(grade_id, H.NAME, ASSIGNMENT,
                                                      kind).auto_score for grade_id in ids}
                for kind in kinds}


def test_through_nbgrader_unsolved_recipes_get_nothing(tmp_path):
    scores = _autograde(tmp_path, UNSOLVED)
    for kind in UNSOLVED:
        assert list(scores[kind].values()) == [0.0] * 4, (kind, scores[kind])


def test_through_nbgrader_the_solution_gets_full_marks(tmp_path):
    scores = _autograde(tmp_path, ["solved"])
    assert list(scores["solved"].values()) == [2.0] * 4, scores
