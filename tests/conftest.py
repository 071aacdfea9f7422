"""Shared test setup: a headless plotting backend and one CPU thread (tests are tiny)."""

import os

os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402

# setuptools before anything imports the standard library's distutils: pip's internals (read by
# tests/test_packaging.py) import it, and nbgrader imports setuptools, whose distutils shim then
# fails its own assertion when both land on one pytest worker.
import setuptools  # noqa: E402,F401
import torch  # noqa: E402

torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed():
    """Every test starts from the same random state."""
    torch.manual_seed(0)
    yield


# Property-based tests (hypothesis): few examples, derandomized, so `make test` is deterministic
# and fast on 2 cores. HYPOTHESIS_PROFILE=thorough runs many more random examples locally.
from hypothesis import HealthCheck, settings  # noqa: E402

settings.register_profile(
    "course", max_examples=25, derandomize=True, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough", max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "course"))


@pytest.fixture(scope="module")
def browser():
    """Headless Debian Chromium (tests/browser_helpers.py); skips or fails as the helpers say."""
    from .browser_helpers import launch, require_playwright

    yield from launch(require_playwright())


# ---- system packages pip cannot install --------------------------------------------------------
# A test that needs one carries `@pytest.mark.system_package("bubblewrap")` (or calls
# require_system_package in a fixture). Without the package it is skipped, the skip naming it, and
# the run ends with one line listing what was not tested and the command that installs it all;
# under CI (the environment variable CI set: .ci/run installs them first) a missing one fails.
INSTALL_COMMAND = "make system-deps"
_SKIP_TAG = "[system package: {}]"


def _bubblewrap_problem() -> str | None:
    from course_tools.grading import sandbox

    return sandbox.sandbox_problem()


def _chromium_problem() -> str | None:
    from .browser_helpers import CHROMIUM

    return None if CHROMIUM is not None else "Chromium is not installed (no `chromium` on PATH)"


def _cjk_font_problem() -> str | None:
    from lectures_lib import fonts

    return None if fonts.find_cjk_font() is not None else "no CJK font is installed"


def _proxy_problem() -> str | None:
    import shutil

    return None if shutil.which("configurable-http-proxy") else (
        "JupyterHub's proxy is not installed (no `configurable-http-proxy` on PATH; it is npm's)")


# Debian package -> (what it is for, probe giving None or why it cannot be used here)
SYSTEM_PACKAGES = {
    "bubblewrap": ("the grading sandbox", _bubblewrap_problem),
    "chromium": ("the browser tests", _chromium_problem),
    "fonts-noto-cjk": ("Chinese characters in plots", _cjk_font_problem),
    # not Debian's: npm's package (`npm install -g`), which pip cannot install either
    "configurable-http-proxy": ("the class hub test", _proxy_problem),
}
_problems: dict[str, str | None] = {}


def system_package_problem(package: str) -> str | None:
    """None when ``package`` is usable here, else why not (probed once per process)."""
    if package not in SYSTEM_PACKAGES:
        raise KeyError(f"unknown system package {package!r}: one of {sorted(SYSTEM_PACKAGES)}")
    if package not in _problems:
        _problems[package] = SYSTEM_PACKAGES[package][1]()
    return _problems[package]


def require_system_package(package: str, *, module_level: bool = False) -> None:
    """Skip the calling test (or module) when ``package`` is missing; fail under CI."""
    problem = system_package_problem(package)
    if problem is None:
        return
    reason = (f"{_SKIP_TAG.format(package)} needs {package} for {SYSTEM_PACKAGES[package][0]}: "
              f"{problem}; `{INSTALL_COMMAND}` installs it")
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run these tests)", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)


# ---- the tiers: `make quick` (-m "not slow"), `make test` (-m "not system"), `make test-system` --
# A test's tier is a marker set where the test is written, so it follows the test when the test is
# renamed or moved: `pytestmark = pytest.mark.system` (or `.slow`) at the top of a file, or
# `@pytest.mark.slow` on one test.
# - system: the course run as a system: it grades whole notebooks in the sandbox, drives nbgrader,
#   Chromium, JupyterLab or JupyterHub, builds the wheel into a fresh environment, starts a Dask
#   cluster, executes notebooks through the tools, or needs a system package pip cannot install
#   (every `system_package` test is system, by the rule below). `make test` runs everything else
#   (minutes on 2 cores); `make test-system` runs this tier, and CI (.ci/run) runs both;
# - slow (`make quick` skips it): every system test, and the tests that train models or take
#   more than about 3 s in `pytest --durations`.
# Where the time goes: benchmarks/README.md, "The test suite".


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("system_package") is not None:
            item.add_marker(pytest.mark.system)
        if item.get_closest_marker("system") is not None:
            item.add_marker(pytest.mark.slow)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "slow: trains, executes notebooks, grades or browses; `make quick` skips it",
    )
    config.addinivalue_line(
        "markers", "system: grades in the sandbox, drives a browser, a hub, nbgrader or a wheel; "
        "`make test` skips it, `make test-system` (and CI) runs it",
    )
    config.addinivalue_line(
        "markers", "system_package(name): the test needs a Debian package pip cannot install "
        f"({', '.join(SYSTEM_PACKAGES)}); skipped without it, named in the run's last line",
    )


def pytest_runtest_setup(item):
    for marker in item.iter_markers("system_package"):
        for package in marker.args:
            require_system_package(package)


def pytest_terminal_summary(terminalreporter):
    import re

    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        for package in re.findall(r"\[system package: ([\w-]+)\]", reason):
            counts[package] = counts.get(package, 0) + 1
    if "not system" in (terminalreporter.config.getoption("markexpr") or ""):
        # (under xdist the deselected items stay on the workers: the expression says it)
        terminalreporter.write_line(
            "not run by this command: the system tier (sandboxed grading, nbgrader, the browser, "
            "the hub, the installed wheel: the tests marked system); `make test-system` "
            "runs it (CI runs both)", yellow=True, bold=True,
        )
    if counts:
        listed = ", ".join(f"{package} ({n} skipped)" for package, n in sorted(counts.items()))
        terminalreporter.write_line(
            f"not tested here, missing system packages: {listed}; install them with "
            f"`{INSTALL_COMMAND}`", yellow=True, bold=True,
        )
