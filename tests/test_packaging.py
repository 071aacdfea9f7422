"""The two ways to install the course (pip and conda) must describe the same environment."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _split_requirement(text: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*", text)
    assert match, f"cannot parse requirement {text!r}"
    return _normalise(match.group(1)), match.group(2).replace(" ", "")


def pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project.get("optional-dependencies", {}).values():
        requirements += extra
    return dict(_split_requirement(r) for r in requirements)


def conda_requirements() -> dict[str, str]:
    """Top-level conda dependencies of environment.yml (python and pip excluded), as pip specs."""
    lines = (ROOT / "environment.yml").read_text().splitlines()
    start = lines.index("dependencies:")
    found = {}
    for line in lines[start + 1 :]:
        if line and not line.startswith(" "):
            break  # next top-level key
        match = re.fullmatch(r"  - ([^#\s:][^#]*?)\s*(#.*)?", line)
        if not match:
            continue  # comments, the nested pip: list
        name, spec = _split_requirement(match.group(1))
        if name in ("python", "pip"):
            continue
        # conda's "=2.13" means "any 2.13.x": pip writes that "==2.13.*"
        if re.fullmatch(r"=[0-9.]+", spec):
            spec = f"={spec}.*"
        found[CONDA_TO_PIP.get(name, name)] = spec
    return found


def test_conda_and_pip_environments_list_the_same_packages_and_bounds():
    pip_side, conda_side = pyproject_requirements(), conda_requirements()
    assert pip_side, "no requirements parsed from pyproject.toml"
    missing_in_conda = sorted(set(pip_side) - set(conda_side))
    missing_in_pip = sorted(set(conda_side) - set(pip_side))
    assert not missing_in_conda, f"in pyproject.toml but not environment.yml: {missing_in_conda}"
    assert not missing_in_pip, f"in environment.yml but not pyproject.toml: {missing_in_pip}"
    differing = {n: (pip_side[n], conda_side[n]) for n in pip_side if pip_side[n] != conda_side[n]}
    assert not differing, f"version bounds differ (pyproject, environment.yml): {differing}"


def test_conda_environment_installs_the_course_package_itself():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s+- -e \.\s*$", text, re.MULTILINE), "environment.yml must pip-install -e ."


def test_torch_is_bounded_to_one_release_series():
    """An open range lets pip pick a multi-GB CUDA build instead of the local CPU wheel."""
    spec = pyproject_requirements()["torch"]
    assert re.fullmatch(r"==\d+\.\d+\.(\*|\d+)", spec), f"torch must be pinned, got {spec!r}"


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert "make test" in ci
