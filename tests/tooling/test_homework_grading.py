"""Section 08's graded homework (Exercise 5 of notebook 08) through ``python -m course_tools
grade`` (the sandbox, the test split drawn from a grading secret): the notebook's own solution
gets the homework's full marks; the student version as released, an untrained recipe, one that
reads the sentences' package and hands translations in, and one over the CPU budget get none of
them, each with the report that says why.

The submissions are notebook 08's release with ``my_recipe``'s body replaced
(``benchmarks/grade_homework.py`` builds them); they are graded against the course's notebooks,
end to end. Cost: the four unsolved kinds, about 2 CPU minutes in all (the over-budget recipe
stops after 20 steps); the solved one retrains the reference recipe (about 4-5 CPU minutes:
``benchmarks/grade_homework.json``), so it is marked slow too.
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
    secret = tmp_path / "secret"
    secret.write_text("the homework test's secret\n")
    secret.chmod(0o600)
    paths = []
    for kind in kinds:
        paths.append(tmp_path / f"{kind}_{H.NAME}.ipynb")
        nbformat.write(H.submission(kind), paths[-1])
    result = subprocess.run(
        [sys.executable, "-m", "course_tools", "grade", *map(str, paths), "--course",
         str(H.COURSE), "--notebook", H.NAME, "--json", "--timeout", str(TIMEOUT),
         "--secret-file", str(secret), "--quiet"], capture_output=True, text=True, cwd=ROOT,
        timeout=len(kinds) * (4 * TIMEOUT + 300))
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in result.stdout.splitlines()]
    return {Path(r["submission"]).name.split("_")[0]: r for r in reports}


def _message(report) -> str:
    return " ".join(row["message"] for row in report["exercises"] if row["id"] == H.HOMEWORK)


def test_unsolved_untrained_data_carrying_and_over_budget_recipes_get_nothing(tmp_path):
    reports = _grade(tmp_path, ["empty", "untrained", "reads-test", "over-budget"])
    for kind, report in reports.items():
        assert H.homework_points(report) == (0.0, 8.0), (kind, _message(report))
    assert _message(reports["empty"]).count("not implemented yet") == 4
    untrained = _message(reports["untrained"])
    assert untrained.count("needs BLEU >=") == 4 and "secret" in untrained  # scored, below all
    carried = _message(reports["reads-test"])
    assert "holds" in carried and "'memorised'" in carried and "settings only" in carried
    over = _message(reports["over-budget"])
    assert "limited to 600 CPU seconds" in over and "over budget" in over


@pytest.mark.slow
def test_the_reference_recipe_gets_full_marks(tmp_path):
    report = _grade(tmp_path, ["solved"])["solved"]
    assert H.homework_points(report) == (8.0, 8.0), _message(report)
    assert "the boss tier" in _message(report) and "secret" in _message(report)
