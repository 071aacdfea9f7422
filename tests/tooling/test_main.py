"""`python -m course_tools COMMAND`: the course's commands without make (Windows, conda)."""

import subprocess
import sys
from pathlib import Path

import pytest

from course_tools.cli import TEST_PARTS, main, suite_commands, together

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "course_tools", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_help_lists_every_command():
    """The real entry point: `python -m course_tools` in a fresh interpreter."""
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    for command in ("lab", "test", "notebooks", "student", "site"):
        assert command in result.stdout, f"{command!r} missing from --help"


def test_lab_hands_its_options_to_the_launcher(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["lab", "--help"])
    assert stop.value.code == 0
    shown = capsys.readouterr().out
    assert "--student" in shown and "--port" in shown, shown


def test_unknown_test_part_is_refused_with_the_choices(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["test", "lnit"])
    assert stop.value.code == 2
    message = capsys.readouterr().err
    assert "lnit" in message and "unit" in message, message


def test_make_test_runs_the_same_commands():
    """Each part of `make test` is one `python -m course_tools test PART` call."""
    makefile = (ROOT / "Makefile").read_text()
    for part in TEST_PARTS:
        assert f"\n{part}: $(STAMP)\n\t$(BIN)/python -m course_tools test {part}" in makefile, part
    assert "\ntest-system: $(STAMP)\n\t$(BIN)/python -m course_tools test system" in makefile
    lint, unit, nbval = suite_commands(list(TEST_PARTS), workers=3)
    assert lint[1:] == ["-m", "ruff", "check", "lectures_lib", "course_tools", "tests", "benchmarks",
                        "notebooks"]
    assert unit[1:] == ["-m", "pytest", "-n", "3", "--dist", "loadscope", "-m", "not system",
                        "tests"]
    assert "\ntest: $(STAMP)\n\t$(BIN)/python -m course_tools test --workers $(WORKERS)\n" in makefile
    lint_again, both = together(list(TEST_PARTS), workers=3)  # what `make test` runs
    assert lint_again == lint and both[1:] == ["-m", "pytest", "-n", "3", "--dist", "loadscope",
                                               "--nbval-lax", "--nbval-current-env",
                                               "-m", "not system", "notebooks", "tests"]
    assert together(["unit"], workers=3) == [unit] and together(["nbval"], 3) == [nbval]
    (system,) = suite_commands(["system"], workers=3)  # the rest of the unit suite, exactly
    assert system[1:] == ["-m", "pytest", "-n", "3", "--dist", "loadscope", "-m", "system", "tests"]
    assert nbval[-3:] == ["--nbval-lax", "--nbval-current-env", "notebooks"]
