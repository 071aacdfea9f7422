"""Section 08's graded homework through ``python -m course_tools grade`` (the sandbox, the test
split drawn from a grading secret): the reference recipe gets full marks; the student version as
released, an untrained recipe, one that reads the sentences' package and hands translations in,
and one over the CPU budget get none, each with the report that says why.

The exercise cells are the ones notebook 08 holds (``benchmarks/grade_homework.py`` builds them
as an assignment of their own); the grading is the command's, end to end. The solved submission
retrains the reference recipe (about 4-5 CPU minutes).
"""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from ..conftest import require_system_package

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
if not (ROOT / "benchmarks" / "grade_homework.py").exists():
    pytest.skip("benchmarks/ is not here (a checkout is needed)", allow_module_level=True)
sys.path.insert(0, str(ROOT / "benchmarks"))
import grade_homework as H  # noqa: E402

TIMEOUT = 600  # seconds per submission (the training in the grader is not counted)


def _grade(tmp_path: Path, kinds: list[str]) -> dict:
    require_system_package("bubblewrap")
    course = H.write_course(tmp_path / "course")
    secret = tmp_path / "secret"
    secret.write_text("the homework test's secret\n")
    secret.chmod(0o600)
    paths = []
    for kind in kinds:
        paths.append(tmp_path / f"{kind}_{H.NAME}.ipynb")
        nbformat.write(H.submission(kind), paths[-1])
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", *map(str, paths), "--course", str(course),
         "--notebook", H.NAME, "--json", "--timeout", str(TIMEOUT), "--secret-file", str(secret),
         "--quiet"], capture_output=True, text=True, cwd=ROOT,
        timeout=len(kinds) * (4 * TIMEOUT + 300))
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    return {Path(r["submission"]).name.split("_")[0]: r for r in reports}


def _message(report) -> str:
    return " ".join(row["message"] for row in report["exercises"] if not row["manual"])


def test_unsolved_untrained_data_carrying_and_over_budget_recipes_get_nothing(tmp_path):
    reports = _grade(tmp_path, ["empty", "untrained", "reads-test", "over-budget"])
    for kind, report in reports.items():
        assert report["max_score"] == 8.0 and report["score"] == 0.0, (kind, report)
    assert "not implemented yet" in _message(reports["empty"])
    untrained = _message(reports["untrained"])
    assert untrained.count("needs BLEU >=") == 4  # scored, below every tier
    carried = _message(reports["reads-test"])
    assert "holds" in carried and "'memorised'" in carried and "settings only" in carried
    over = _message(reports["over-budget"])
    assert "limited to 600 CPU seconds" in over and "over budget" in over


@pytest.mark.slow
def test_the_reference_recipe_gets_full_marks(tmp_path):
    report = _grade(tmp_path, ["solved"])["solved"]
    assert report["score"] == report["max_score"] == 8.0, _message(report)
    assert "the boss tier" in _message(report) and "secret" in _message(report)
