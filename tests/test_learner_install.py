"""The learner's install holds what a learner needs; the instructor's tools are extras (issue 40).

``make lab-student`` installs ``.[lab]``: the course's dependencies and JupyterLab. Its whole
dependency closure is resolved here from pyproject.toml and the installed packages' own metadata
(importlib.metadata, no network), markers evaluated for this machine: it must reach torch and
JupyterLab, and no grading, hub, cluster or test package (nbgrader put its menu, "Create
Assignment" and "Validate" in the learner's JupyterLab).
"""

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# What only an instructor or a developer runs: grading, the hub, the cluster, the test suite.
INSTRUCTOR_ONLY = {"nbgrader", "jupyterhub", "distributed", "dask", "pytest", "nbval", "playwright",
                   "ruff", "hypothesis", "opencc", "pytest-xdist", "configurable-http-proxy"}


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def closure(requirements: list[str], extras: set[str] = frozenset()) -> set[str]:
    """Every distribution that installing ``requirements`` pulls in, by its metadata here."""
    seen: set[str] = set()
    todo = [(Requirement(text), "") for text in requirements]
    while todo:
        requirement, extra = todo.pop()
        environment = {"extra": extra}
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = _name(requirement.name)
        wanted = {(name, e) for e in requirement.extras} | {(name, "")}
        new = {key for key in wanted if key not in seen}
        if not new:
            continue
        seen |= new
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            pytest.fail(f"{name} (needed by the learner's install) is not installed here: the "
                        "closure cannot be resolved without it")
        for _, e in new:
            todo += [(Requirement(text), e) for text in dist.requires or []]
    return {name for name, _ in seen}


def learner_closure() -> set[str]:
    return closure(PROJECT["dependencies"] + PROJECT["optional-dependencies"]["lab"])


def test_the_learners_install_has_the_lab_and_no_instructor_tool():
    names = learner_closure()
    assert {"torch", "numpy", "matplotlib", "jupyterlab", "nbformat", "tqdm"} <= names, names
    leaked = sorted(names & INSTRUCTOR_ONLY)
    assert not leaked, f"the learner's install pulls in instructor tools: {leaked}"


def test_the_check_sees_the_instructors_tools_in_their_extras():
    """The same resolution finds each instructor package in the extras that hold it."""
    extras = PROJECT["optional-dependencies"]
    assert "nbgrader" in closure(extras["grading"])
    assert "jupyterhub" in closure(extras["class"])
    assert "distributed" in closure(extras["cluster"])
    assert {"pytest", "playwright"} <= closure(extras["dev"])


def test_the_makefile_installs_the_lab_extra_for_the_learner():
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^LAB_EXTRAS := lab$", makefile, re.MULTILINE), "the learner's extras"
    for target in ("lab", "lab-student", "student"):
        rule = re.search(rf"^{re.escape(target)}: (.*)$", makefile, re.MULTILINE)
        assert rule and rule.group(1).split() == ["$(LAB_STAMP)"], (target, rule)
