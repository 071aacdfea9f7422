"""Every command the READMEs (English, 简体, 繁體) and ``make help`` give exists and parses.

Nothing long runs: a ``python -m course_tools ...`` command is handed to the command's own
``argparse`` parser (caught at its first ``parse_args``, so nothing after the parse runs); a
``make TARGET VAR=...`` is expanded with ``make -n`` (print, do not run) and the commands it prints
are checked the same way. A command line in a code block must parse whole; one quoted inline in a
sentence (``python -m course_tools hub`` "says so when it cannot") must name a command that exists
and only options that command accepts.
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = ("README.md", "README.zh-CN.md", "README.zh-TW.md")
COURSE = ("course_tools", "lectures_lib")  # the course's own modules: their commands must parse


def _spans(text: str) -> list[tuple[str, bool]]:
    """``(command text, whole)``: the lines of fenced code blocks (whole commands, a trailing
    ``# comment`` and ``\\`` continuations joined) and inline code spans (quotes in prose)."""
    found = []
    fences = re.split(r"^```[^\n]*\n", text, flags=re.M)
    for index, part in enumerate(fences):
        if index % 2:  # inside a fence
            joined = re.sub(r"\\\n\s*", " ", part)
            found += [(line, True) for line in joined.splitlines()]
        else:
            found += [(span, False) for span in re.findall(r"`([^`\n]+)`", part)]
    return found


def _mentions(pattern: str) -> list[tuple[str, str, bool]]:
    """``(readme, the command from the pattern's match on, whole)`` in the three READMEs."""
    found = []
    for readme in READMES:
        for span, whole in _spans((ROOT / readme).read_text(encoding="utf-8")):
            for match in re.finditer(pattern, span):
                command = match.group(0)
                if whole and "#" in command:  # a comment after the command
                    command = command[: command.index("#")]
                found.append((readme, command.strip(), whole))
    return found


PYTHON_M = r"python3? -m [\w.]+[^`#;&|<>]*"
MAKE = r"(?<![\w-])make [a-z][\w-]*(?: +[A-Z_]+=\S+)*"


class _Parsed(Exception):
    def __init__(self, parser: argparse.ArgumentParser, args: list[str]):
        self.parser, self.args = parser, args


def _parser_of(module: str, argv: list[str], monkeypatch) -> tuple[argparse.ArgumentParser, list]:
    """The argparse parser that ``python -m module *argv`` parses its arguments with, and what
    it would parse: the module's ``main`` runs until its first ``parse_args``."""
    def caught(self, args=None, namespace=None):
        raise _Parsed(self, list(args))

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", caught)
    main = importlib.import_module(module).main
    saved = list(sys.path)  # the grade command drops the working directory from sys.path
    try:
        main(list(argv))
    except _Parsed as parsed:
        return parsed.parser, parsed.args
    finally:
        sys.path[:] = saved
        monkeypatch.undo()
    raise AssertionError(f"python -m {module} {shlex.join(argv)} parsed nothing")


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """Every option string of ``parser`` and of its subcommands' parsers."""
    found = set()
    for action in parser._actions:
        found.update(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found |= _options(sub)
    return found


def _check_python_m(command: str, whole: bool, monkeypatch) -> None:
    words = shlex.split(command)
    module, argv = words[2], [w for w in words[3:] if w != "..."]
    spec = importlib.util.find_spec(module)
    assert spec is not None, f"{command}: no module {module}"
    if spec.submodule_search_locations is not None:  # a package runs its __main__
        assert importlib.util.find_spec(f"{module}.__main__"), f"{command}: {module} has no __main__"
    assert module != "lectures_lib", f"{command}: the old entry point (python -m course_tools)"
    if module.split(".")[0] not in COURSE or (not argv and not whole):
        return
    if module == "course_tools":  # the entry point: its commands
        from course_tools import cli

        assert argv and argv[0] in cli.commands(), f"{command}: no command {argv[:1]}"
        module = cli.module_of(argv[0])
        argv = argv if module == "course_tools.cli" or argv[0] in ("release", "source") else argv[1:]
    parser, args = _parser_of(module, argv, monkeypatch)
    unknown = [w.split("=")[0] for w in argv if w.startswith("-") and w.split("=")[0] not in
               _options(parser)]
    assert not unknown, f"{command}: {parser.prog} accepts no {unknown}"
    if whole:
        try:
            parser.parse_args(args)
        except SystemExit as error:
            raise AssertionError(f"{command}: {parser.prog} refuses these arguments") from error


def test_the_scan_finds_the_commands():
    python = _mentions(PYTHON_M)
    make = _mentions(MAKE)
    assert {readme for readme, _, _ in python} == set(READMES), "every README gives commands"
    assert {"make lab-student", "make test"} <= {c for _, c, _ in make}, "the scan reads"
    assert any(whole for *_, whole in python) and any(not whole for *_, whole in python)


@pytest.mark.parametrize("readme, command, whole", sorted(set(_mentions(PYTHON_M))))
def test_every_python_m_command_in_the_readmes_parses(readme, command, whole, monkeypatch):
    _check_python_m(command, whole, monkeypatch)


def test_a_wrong_command_or_option_fails_the_check(monkeypatch):
    """The check can fail: an unknown command, an unknown option, a missing argument."""
    for command, whole in [("python -m course_tools grades x.ipynb", True),
                           ("python -m course_tools grade x.ipynb --no-such-flag", False),
                           ("python -m course_tools hub", True),
                           ("python -m course_tools.no_such_module", False),
                           ("python -m lectures_lib copy x", False)]:  # not an entry point
        with pytest.raises(AssertionError):
            _check_python_m(command, whole, monkeypatch)


def _make_targets() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([a-z][\w-]*):", text, flags=re.M))


def _make_variables() -> set[str]:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"\$\(([A-Z_]+)\)", text)) | set(
        re.findall(r"^([A-Z_]+) *[?:]?=", text, flags=re.M))


def _make_help() -> list[str]:
    """The ``make X`` lines ``make help`` prints (none without make: those tests skip)."""
    if shutil.which("make") is None:
        return []
    shown = subprocess.run(["make", "--no-print-directory", "help"], cwd=ROOT, capture_output=True,
                           text=True, timeout=60, check=True).stdout
    return re.findall(MAKE, shown)


needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this system")


@needs_make
@pytest.mark.parametrize("readme, command, whole",
                         sorted(set(_mentions(MAKE))) + [("make help", c, True) for c in
                                                         sorted(set(_make_help()))])
def test_every_make_command_in_the_readmes_and_make_help_exists(readme, command, whole,
                                                                monkeypatch):
    words = command.split()
    target, settings = words[1], words[2:]
    assert target in _make_targets(), f"{readme}: `{command}`: the Makefile has no target {target}"
    unknown = [s.split("=")[0] for s in settings if s.split("=")[0] not in _make_variables()]
    assert not unknown, f"{readme}: `{command}`: the Makefile reads no {unknown}"
    if target in ("clean", "system-deps", "help"):  # shell, not course commands
        return
    printed = subprocess.run(["make", "--no-print-directory", "-n", target, *settings], cwd=ROOT,
                             capture_output=True, text=True, timeout=60)
    assert printed.returncode == 0, f"`{command}`: make -n: {printed.stderr[-1000:]}"
    course = [line for line in printed.stdout.splitlines()
              if re.search(r"-m (course_tools|lectures_lib)\b", line)]
    scripts = re.findall(r"python3? (benchmarks/\S+\.py)", printed.stdout)
    assert course or scripts or target in ("quick", "wheel", "venv"), (command, printed.stdout)
    for line in course:
        _check_python_m(line[line.index("python"):].replace("python3 ", "python ", 1), True,
                        monkeypatch)
    for script in scripts:
        assert (ROOT / script).is_file(), f"`{command}` runs {script}, which is missing"


def test_the_contract_tests_cite_what_the_readme_says():
    """tests/test_contract.py cites README.md's paragraph on the contract: it is there."""
    cited = (ROOT / "tests" / "test_contract.py").read_text(encoding="utf-8").split('"""')[1]
    assert "README.md" in cited and "Conventions (the course's" in cited
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## The library: `lectures_lib`" in readme
    assert "Conventions (the course's contract):" in readme


def test_the_old_entry_point_names_the_new_one(tmp_path):
    """``python -m lectures_lib X`` (the READMEs' form before issue 42) exits 2 and prints the
    ``python -m course_tools X`` to run, without running anything."""
    run = subprocess.run([sys.executable, "-m", "lectures_lib", "copy", "my course", "--student"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert run.returncode == 2, run
    assert "python -m course_tools copy 'my course' --student" in run.stderr, run.stderr
    assert run.stdout == ""
