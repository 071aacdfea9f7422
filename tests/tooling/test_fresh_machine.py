"""The README's `make test` on a fresh machine: without bubblewrap, Chromium and a CJK font (the
system packages pip cannot install), every test that needs one skips, naming it, and the run ends
with one line listing what was not tested and the command that installs it (`make system-deps`).

The run is real: the tests that need the three packages run in a child pytest with the packages
hidden (tests/fresh_machine.py: a bubblewrap mount namespace, so hiding them needs bubblewrap
here; CI has it)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from ..fresh_machine import run_hidden

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
# The files whose tests need a system package (the grading ones in both ways: a module marker,
# and a fixture that calls require_system_package).
NEEDING = ["tests/tooling/test_grading.py", "tests/tooling/test_grading_secret.py",
           "tests/tooling/test_grading_attacks.py", "tests/tooling/test_grading_trained.py",
           "tests/tooling/test_nbgrader_sandbox.py", "tests/tooling/test_grading_host.py",
           "tests/tooling/test_sandbox_kernel.py", "tests/test_browser.py",
           "tests/test_explorer_browser.py", "tests/test_fonts.py", "tests/test_hub_browser.py"]


@pytest.mark.system_package("bubblewrap")
def test_without_the_system_packages_the_run_passes_and_names_them():
    run = run_hidden([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                      *NEEDING], cwd=ROOT, capture_output=True, text=True,
                     timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-6000:]
    last = out.strip().splitlines()[-1]
    assert re.search(r"\d+ passed, \d+ skipped in", last) and "error" not in last, last
    summary = [line for line in out.splitlines() if line.startswith("not tested here")]
    assert len(summary) == 1, out[-3000:]
    for package in ("bubblewrap", "chromium", "fonts-noto-cjk", "configurable-http-proxy"):
        assert re.search(rf"\b{package} \(\d+ skipped\)", summary[0]), summary[0]
    assert "`make system-deps`" in summary[0]


def test_make_system_deps_installs_what_ci_installs():
    """One command for users and CI: .ci/run calls it before `make test`, and it installs the
    three Debian packages the conftest names."""
    from ..conftest import SYSTEM_PACKAGES

    # the commands .ci/run runs, in order (its comments may name them too)
    commands = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
                .splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert "make system-deps" in commands and "make test" in commands, commands
    assert commands.index("make system-deps") < commands.index("make test"), commands
    dry = subprocess.run(["make", "-n", "system-deps"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    for package in SYSTEM_PACKAGES:
        assert package in dry.stdout, (package, dry.stdout)
