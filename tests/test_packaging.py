"""The ways to install the course (pip, conda) must work and describe the same environment.

conda creates an environment from environment.yml in two steps: its own packages, then the list
under ``pip:``, which it writes to a requirements file and hands to ``pip install -r`` from the
folder of environment.yml. So that list must be a valid pip requirements file: these tests run
pip's own parser on it, and a ``pip install --dry-run`` of it.
"""

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from pip._internal.exceptions import RequirementsFileParseError
from pip._internal.network.session import PipSession
from pip._internal.req.req_file import parse_requirements

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

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


def environment() -> dict:
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def conda_specs() -> list[str]:
    return [d for d in environment()["dependencies"] if isinstance(d, str)]


def pip_section() -> list[str]:
    sections = [d["pip"] for d in environment()["dependencies"] if isinstance(d, dict)]
    assert len(sections) == 1, f"environment.yml needs exactly one pip: section, got {sections}"
    return sections[0]


def parse_pip_requirements(lines: list[str], folder: Path) -> list:
    """Parse ``lines`` the way ``pip install -r`` does (conda writes them to a file first)."""
    path = folder / "requirements.txt"
    path.write_text("\n".join(lines) + "\n")
    return list(parse_requirements(str(path), session=PipSession()))


def conda_requirements() -> dict[str, str]:
    """environment.yml's packages (conda's and pip's; python and pip excluded), as pip specs."""
    found = {}
    for spec in conda_specs():
        name, bound = _split_requirement(spec)
        if name in ("python", "pip"):
            continue
        # conda's "=2.13" (optionally "=2.13=<build>") means "any 2.13.x": pip writes "==2.13.*"
        pinned = re.fullmatch(r"=([0-9.]+)(=\S+)?", bound)
        if pinned:
            bound = f"=={pinned.group(1)}.*"
        found[CONDA_TO_PIP.get(name, name)] = bound
    for line in pip_section():
        if not line.startswith("-"):
            name, bound = _split_requirement(line)
            found[name] = bound
    return found


def test_environment_yml_is_a_conda_environment():
    env = environment()
    assert env["name"] == "attention-course"
    assert env["channels"] == ["conda-forge"]
    specs = conda_specs()
    assert any(re.fullmatch(r"python>=3\.\d+", s) for s in specs), specs
    assert "pip" in specs, "conda needs pip itself to install the pip: section"


def test_pip_section_is_a_valid_pip_requirements_file(tmp_path):
    parsed = parse_pip_requirements(pip_section(), tmp_path)
    editables = [r for r in parsed if r.is_editable]
    assert [r.requirement for r in editables] == ["."], "the pip: section installs the course: -e ."
    assert not any(line.split()[0] == "--no-deps" for line in pip_section())


def test_the_parser_rejects_what_conda_cannot_run(tmp_path):
    """The check above can fail: the options of `pip install` are not allowed in a file."""
    with pytest.raises(RequirementsFileParseError, match="no such option: --no-deps"):
        parse_pip_requirements(["--no-deps", "-e ."], tmp_path)


def test_pip_section_installs_in_a_dry_run(tmp_path):
    """`pip install --dry-run -r` from the folder of environment.yml, as conda runs it."""
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("\n".join(pip_section()) + "\n")
    report = tmp_path / "report.json"
    command = [
        sys.executable, "-m", "pip", "install", "--dry-run", "--quiet",
        "--report", str(report), "-r", str(requirements),
    ]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, f"pip install --dry-run failed:\n{result.stderr[-3000:]}"
    would_install = {
        _normalise(item["metadata"]["name"]) for item in json.loads(report.read_text())["install"]
    }
    assert "lectures-lib" in would_install, f"the course is not installed: {would_install}"


def test_conda_and_pip_environments_list_the_same_packages_and_bounds():
    pip_side, conda_side = pyproject_requirements(), conda_requirements()
    assert pip_side, "no requirements parsed from pyproject.toml"
    missing_in_conda = sorted(set(pip_side) - set(conda_side))
    missing_in_pip = sorted(set(conda_side) - set(pip_side))
    assert not missing_in_conda, f"in pyproject.toml but not environment.yml: {missing_in_conda}"
    assert not missing_in_pip, f"in environment.yml but not pyproject.toml: {missing_in_pip}"
    differing = {n: (pip_side[n], conda_side[n]) for n in pip_side if pip_side[n] != conda_side[n]}
    assert not differing, f"version bounds differ (pyproject, environment.yml): {differing}"


def test_conda_picks_the_cpu_build_of_pytorch():
    """Without a build string, conda may resolve pytorch to a CUDA build on a machine with a GPU."""
    torch_specs = [s for s in conda_specs() if s.startswith("pytorch")]
    assert len(torch_specs) == 1 and torch_specs[0].endswith("=cpu*"), torch_specs


def test_torch_is_pinned_to_the_tested_release_series():
    """One release series for every route: the notebooks' printed numbers were made with it."""
    spec = pyproject_requirements()["torch"]
    assert re.fullmatch(r"==\d+\.\d+\.(\*|\d+)", spec), f"torch must be pinned, got {spec!r}"


def test_license_is_an_spdx_string_with_its_file():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT", "SPDX form: license = \"MIT\""
    assert "MIT License" in (ROOT / "LICENSE").read_text()
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["license"] == "MIT" and citation["cff-version"].startswith("1.2")


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and "make lab" in readme
    assert "make test" in ci
