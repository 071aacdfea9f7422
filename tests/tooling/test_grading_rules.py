"""An exercise's stated rule is held as an allowlist (issue 33, item 2).

05's exercise 1 forbids ``label_smoothing=``. A ban on the spelling was bypassed by
``functools.partial``, ``__call__``, ``map`` and code written to a file and imported; the
solution is now read as an allowlist (:mod:`course_tools.grading._rules`): every bypass
below is refused or flagged for a human (0 points, ``review`` in the report), while honest
solutions written in several styles keep their points.
"""

from __future__ import annotations

import json

import nbformat
import pytest

from course_tools import grading
from course_tools.grading._collect import _entries, _plan
from course_tools.grading._run import REVIEW, _course_imports, _rule_broken
from course_tools.publish.exercises import annotate_notebook, find_exercises, release_notebook
from lectures_lib.checks import check_label_smoothing_loss
from tests.tooling.test_grading import ROOT

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

STEM = "05_transformer_decoder"
HEAD = "def my_label_smoothing_loss(logits, targets, smoothing, ignore_index):\n"
EIGHT = "logits, targets, None, None, ignore_index, None, 'mean', smoothing"  # the 8th: smoothing

BYPASSES = {
    "partial": "from functools import partial\n" + HEAD +
    "    return partial(F.cross_entropy, label_smoothing=smoothing)(logits, targets, "
    "ignore_index=ignore_index)\n",
    "partial_positional": HEAD + "    import functools\n"
    f"    return functools.partial(F.cross_entropy, {EIGHT})()\n",
    "dunder_call": HEAD + f"    return F.cross_entropy.__call__({EIGHT})\n",
    "map": HEAD + "    return next(map(F.cross_entropy, [logits], [targets], [None], [None], "
    "[ignore_index], [None], ['mean'], [smoothing]))\n",
    "alias": HEAD + f"    loss = F.cross_entropy\n    return loss({EIGHT})\n",
    "class_alias": HEAD + "    make = torch.nn.CrossEntropyLoss\n"
    "    return make(None, None, ignore_index, None, 'mean', smoothing)(logits, targets)\n",
    "file_import": "open('smooth.py', 'w').write('import torch.nn.functional as F\\n"
    "def ce(l, t, s, i):\\n    return F.cross_entropy(l, t, ignore_index=i, "
    "label_smoothing=s)\\n')\nimport smooth\n" + HEAD +
    "    return smooth.ce(logits, targets, smoothing, ignore_index)\n",
    "exec": HEAD + "    return eval('F.cross_entropy(logits, targets, ignore_index=ignore_index, "
    "label_' + 'smoothing=smoothing)')\n",
    "aten": HEAD + "    return torch.ops.aten.cross_entropy_loss(logits, targets, None, 1, "
    "ignore_index, smoothing)\n",
    "private_c": HEAD + "    return torch._C._nn.cross_entropy_loss(logits, targets, None, 1, "
    "ignore_index, smoothing)\n",
    "module_as_value": HEAD + f"    functional = F\n    return functional.cross_entropy({EIGHT})\n",
    "star_args": HEAD + f"    args = ({EIGHT})\n    return F.cross_entropy(*args)\n",
    "lambda_star": HEAD + f"    ce = lambda *a: F.cross_entropy(*a)\n    return ce({EIGHT})\n",
    "kwargs_dict": HEAD + "    options = {'label_' + 'smoothing': smoothing}\n"
    "    return F.cross_entropy(logits, targets, ignore_index=ignore_index, **options)\n",
    "helper_elsewhere": HEAD + "    return helper(logits, targets, smoothing, ignore_index)\n",
    "getattr": HEAD + f"    return getattr(F, 'cross_' + 'entropy')({EIGHT})\n",
}
# What an earlier cell of the submission (the exercises' imports, which a student can edit) may
# do to the names an innocent-looking solution uses.
INNOCENT = HEAD + ("    return torch.nn.functional.cross_entropy(logits, targets, "
                   "ignore_index=ignore_index)\n")  # `torch`: the course's imports bind it
EARLIER = {
    "patched_module": "import functools\nimport torch.nn.functional as F\n"
    "F.cross_entropy = functools.partial(F.cross_entropy, label_smoothing=0.1)\n",
    "rebound_name": "class torch:\n    class nn:\n        class functional:\n"
    "            cross_entropy = print\n",
    "other_import": "import lectures_lib as torch\n",
    "setattr": "import torch\nsetattr(torch.nn.functional, 'cross_entropy', print)\n",
}
HONEST = {
    "one_hot": HEAD + "    keep = targets != ignore_index\n"
    "    log_p = F.log_softmax(logits[keep], dim=-1)\n    classes = logits.shape[-1]\n"
    "    soft = F.one_hot(targets[keep], classes).to(log_p.dtype) * (1 - smoothing) "
    "+ smoothing / classes\n    return -(soft * log_p).sum(-1).mean()\n",
    "where": HEAD + "    log_p = torch.log_softmax(logits, -1)\n"
    "    safe = torch.where(targets == ignore_index, torch.zeros_like(targets), targets)\n"
    "    nll = -log_p.gather(-1, safe.unsqueeze(-1)).squeeze(-1)\n"
    "    loss = (1 - smoothing) * nll - smoothing * log_p.mean(-1)\n"
    "    keep = (targets != ignore_index).to(loss.dtype)\n"
    "    assert isinstance(logits, torch.Tensor)\n    return (loss * keep).sum() / keep.sum()\n",
    "module_class": "from torch import nn\n\nclass Smoothed(nn.Module):\n"
    "    def __init__(self, smoothing):\n        super().__init__()\n"
    "        self.smoothing = smoothing\n\n    def forward(self, logits, targets, ignore_index):\n"
    "        log_p = logits.log_softmax(-1)\n        keep = targets != ignore_index\n"
    "        nll = -log_p[keep].gather(1, targets[keep][:, None])[:, 0]\n"
    "        return ((1 - self.smoothing) * nll - self.smoothing * log_p[keep].mean(-1)).mean()\n"
    "\n\n" + HEAD + "    return Smoothed(smoothing)(logits, targets, ignore_index)\n",
    "loop": "import math\n\n" + HEAD + "    total, count = 0.0, 0\n"
    "    for row, target in zip(logits, targets.tolist()):\n"
    "        if target == ignore_index:\n            continue\n"
    "        log_p = row.log_softmax(-1)\n"
    "        total = total + (1 - smoothing) * -log_p[target] - smoothing * log_p.mean()\n"
    "        count += 1\n    return total / max(count, 1)\n",
    "cross_entropy_without_smoothing": HEAD + "    log_p = logits.log_softmax(-1)\n"
    "    nll = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction='none')\n"
    "    keep = targets != ignore_index\n"
    "    return ((1 - smoothing) * nll - smoothing * log_p.mean(-1))[keep].mean()\n",
}


def _course():
    notebook = annotate_notebook(nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb",
                                               as_version=4), STEM)
    cells, _, _ = _plan(notebook, notebook, _entries(notebook, STEM))
    return cells, _course_imports(notebook)


def _verdict(solution: str, earlier_extra: str = "") -> str:
    cells, imports = _course()
    earlier = [cells[0] + ("\n" + earlier_extra if earlier_extra else "")]
    return _rule_broken([solution], [check_label_smoothing_loss], earlier, imports, {cells[0]})


def _really_smoothed(source: str) -> bool:
    """The bypass is a real answer when run: only the rule, not the checker, can catch it."""
    space: dict = {}
    exec(_course()[0][0], space)  # noqa: S102 - the course's imports
    exec("import torch.nn.functional as F\n" + source, space)  # noqa: S102
    return check_label_smoothing_loss(space["my_label_smoothing_loss"]).passed


@pytest.mark.parametrize("name", sorted(BYPASSES))
def test_every_bypass_is_refused_or_flagged(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the file-writing bypass writes here, and imports it
    monkeypatch.syspath_prepend(str(tmp_path))
    source = "import torch\nimport torch.nn.functional as F\n" + BYPASSES[name]
    if name not in ("helper_elsewhere",):
        assert _really_smoothed(BYPASSES[name]), "the bypass must be a working answer"
    verdict = _verdict(source)
    assert verdict, name
    assert verdict.startswith((REVIEW, "the solution breaks the exercise's rule")), verdict


@pytest.mark.parametrize("name", sorted(EARLIER))
def test_an_earlier_cell_cannot_change_what_the_solution_calls(name):
    assert _verdict(INNOCENT) == ""
    assert _verdict(INNOCENT, EARLIER[name]).startswith(REVIEW), name


@pytest.mark.parametrize("name", sorted(HONEST))
def test_honest_solutions_keep_the_rule(name):
    source = "import torch\nimport torch.nn.functional as F\n" + HONEST[name]
    assert _really_smoothed(HONEST[name]), "the honest solution is right"
    assert _verdict(source) == ""
    if "F." not in HONEST[name]:  # the course's imports bind `torch`, not `F`
        assert _verdict(HONEST[name]) == "", "the course's own imports are what its names mean"


def test_the_courses_own_solution_keeps_the_rule():
    cells, imports = _course()
    assert _rule_broken([cells[1]], [check_label_smoothing_loss], [cells[0]], imports,
                        {cells[0]}) == ""


def test_the_span_the_grader_reads_before_the_first_test_holds_the_courses_own_cells():
    """As graded: the first test's span is every program cell before it, the course's imports
    cell (it imports `IPython.display`) included; that cell, unchanged, is not the answer, while
    the same cell changed by the student is read."""
    notebook = annotate_notebook(nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb",
                                               as_version=4), STEM)
    cells, tests, _ = _plan(notebook, notebook, _entries(notebook, STEM))
    imports, first = _course_imports(notebook), tests[0][0]
    span = cells[:first]
    assert len(span) >= 2 and "IPython.display" in span[0], span
    trusted = {span[0].strip()}
    assert _rule_broken(span, [check_label_smoothing_loss], [], imports, trusted) == ""
    changed = [span[0] + "\nfrom functools import partial\n", *span[1:]]
    assert _rule_broken(changed, [check_label_smoothing_loss], [], imports, trusted) \
        .startswith(REVIEW)


@pytest.mark.system_package("bubblewrap")
def test_a_flagged_solution_earns_nothing_and_is_marked_for_review(tmp_path):
    original = nbformat.read(ROOT / "notebooks" / f"{STEM}.ipynb", as_version=4)
    solved = release_notebook(original, STEM)
    for index, cell in enumerate(annotate_notebook(original, STEM).cells):
        if cell.metadata.get("nbgrader", {}).get("solution"):
            solved.cells[index].source = cell.source
    first = [e for e in find_exercises(original) if e.tests][0]
    solved.cells[first.solutions[0]].source = (
        "import torch.nn.functional as F\n" + BYPASSES["partial"])
    path = tmp_path / f"partial_{STEM}.ipynb"
    nbformat.write(solved, path)
    report = grading.grade_submission(path, timeout=120)
    row = next(r for r in report["exercises"] if r["id"] == f"{STEM}-ex{first.number}")
    assert row["points"] == 0 and row["review"] is True, row
    assert row["message"].startswith(REVIEW), row
    assert json.dumps(report)  # the flag travels in the JSON report
    others = [r for r in report["exercises"] if r["id"] != row["id"] and not r["manual"]]
    assert others and not any(r["review"] for r in others)
    # the course's own answers, graded the same way, keep the rule: full marks, nothing flagged
    solved.cells[first.solutions[0]].source = annotate_notebook(
        original, STEM).cells[first.solutions[0]].source
    honest = tmp_path / f"honest_{STEM}.ipynb"
    nbformat.write(solved, honest)
    report = grading.grade_submission(honest, timeout=120)
    assert report["score"] == report["max_score"] > 0, report
    assert not any(r["review"] for r in report["exercises"]), report
