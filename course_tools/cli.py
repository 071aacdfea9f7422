"""The course's commands without ``make``: ``python -m course_tools COMMAND``.

Every ``make`` target runs one of these, so ``make`` is a convenience (Windows has none):

    python -m course_tools lab [--student]   JupyterLab on notebooks/ (or your copies in student/)
    python -m course_tools test [PART ...]   lint + unit tests + every notebook under nbval;
                                             `test system`: the system tier (CI runs both)
    python -m course_tools notebooks [PATH]  re-execute notebooks in place (all by default;
                                             --remeasure also stores new time plots), then
                                             write and execute the Chinese ones (notebooks/zh-Hans,
                                             zh-Hant: their own outputs, in their language)
    python -m course_tools student           write the student versions to student/ (overwrites)
    python -m course_tools site              build the static site in build/site/
    python -m course_tools release SRC OUT   student versions of SRC (a notebook or a folder)
    python -m course_tools source SRC OUT    nbgrader's source notebooks (solutions + metadata)
    python -m course_tools grade SUB ...     grade submissions (--help: sandbox, --notebook, ...)
    python -m course_tools sandbox-kernelspec --install   nbgrader's kernels in the sandbox
    python -m course_tools grading-tls DIR   certificates of a grading cluster (mutual TLS)
    python -m course_tools copy DIR [--student] [--lang zh-CN]   the course into any folder
    python -m course_tools hub CLASS.csv --dir HUBDIR   JupyterHub for a class (as root)

`copy`, `hub`, `release`, `source` and `grade` work from an installed package (its own course
notebooks: `release course OUT`, `source 01_self_attention OUT`, `grade` without `--course`); the
others work on a clone of the repository (the notebooks, tests and README) and say so when there
is none.
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
from pathlib import Path

from course_tools import ROOT, CloneRequired, clone_root

TEST_PARTS = ("lint", "unit", "nbval")  # `make test`, in this order
# `make test-system` (the tests marked system, tests/conftest.py): grading in the sandbox, nbgrader, the
# browser, the hub, the wheel in a fresh environment; not part of `test` without parts
ALL_PARTS = (*TEST_PARTS, "system")
# Commands with their own option parsers: everything after the name is handed over untouched
# to the module's main() (release and source: with the name, their parser's subcommand).
_DELEGATED = {
    "lab": ("course_tools.classroom.lab", "start JupyterLab (--help for its options)"),
    "copy": ("course_tools.publish.copy", "write the course from the installed package into a "
             "folder (DIR [--student] [--lang en|zh-CN|zh-TW] [--force])"),
    "hub": ("course_tools.classroom.hub", "JupyterHub for a class (CLASS.csv --dir HUBDIR; "
            "`hub release|assignments|collect|gradebook|feedback|status|remove-class HUBDIR`)"),
    "release": ("course_tools.publish.exercises", "write student versions: solutions replaced, "
                "hidden tests removed"),
    "source": ("course_tools.publish.exercises", "write the notebooks with solutions and "
               "nbgrader metadata"),
    "grade": ("course_tools.grading", "grade submitted notebooks (--help for its options)"),
    "grading-tls": ("course_tools.grading._tls", "the certificates of a grading cluster "
                    "(mutual TLS: DIR gets scheduler/, worker/, client/)"),
    "sandbox-kernelspec": ("course_tools.grading.sandbox.kernel", "a Jupyter kernel in the "
                           "sandbox, for nbgrader (--install [--user | --prefix P])"),
}
_OWN = ("test", "notebooks", "student", "site")  # parsed here (_parser)


def commands() -> tuple[str, ...]:
    """Every command ``python -m course_tools`` runs."""
    return (*_DELEGATED, *_OWN)


def module_of(command: str) -> str:
    """The module whose ``main`` parses ``command``'s arguments (this one for its own)."""
    if command not in commands():
        raise ValueError(f"command must be one of {list(commands())}, got {command!r}")
    return _DELEGATED[command][0] if command in _DELEGATED else __name__


def suite_commands(parts: list[str], workers: int) -> list[list[str]]:
    """The commands of ``make test`` (``make lint``, ``make unit``, ``make nbval``), in order."""
    python = sys.executable
    parallel = ["-n", str(workers), "--dist", "loadscope"]  # a notebook stays on one worker
    commands = {
        "lint": [python, "-m", "ruff", "check", "lectures_lib", "course_tools", "tests", "benchmarks",
                 "notebooks"],
        "unit": [python, "-m", "pytest", *parallel, "-m", "not system", "tests"],
        "system": [python, "-m", "pytest", *parallel, "-m", "system", "tests"],
        "nbval": [python, "-m", "pytest", *parallel, "--nbval-lax", "--nbval-current-env",
                  "notebooks"],
    }
    return [commands[part] for part in parts]


def together(parts: list[str], workers: int) -> list[list[str]]:
    """:func:`suite_commands`, with ``unit`` and ``nbval`` in one pytest run when both are asked
    for: the notebooks first, so that each worker starts on one and the unit tests fill the gaps
    (two runs leave a worker idle at the end of each)."""
    commands = suite_commands(parts, workers)
    if "unit" not in parts or "nbval" not in parts:
        return commands
    nbval = commands[parts.index("nbval")]
    both = [*nbval[:-1], "-m", "not system", "notebooks", "tests"]
    merged: list[list[str]] = []
    for part, command in zip(parts, commands):
        if part not in ("unit", "nbval"):
            merged.append(command)
        elif both not in merged:  # where the first of the two stood
            merged.append(both)
    return merged


def _run_tests(parts: list[str], workers: int) -> int:
    root = clone_root("test", ("tests", "notebooks"))
    for command in together(parts or list(TEST_PARTS), workers):
        print("$ " + " ".join(command[1:] if command[0] == sys.executable else command), flush=True)
        code = subprocess.call(command, cwd=root)
        if code != 0:
            return code
    return 0


def _delegate(command: str, rest: list[str]) -> int:
    run = importlib.import_module(_DELEGATED[command][0]).main
    return run([command, *rest] if command in ("release", "source") else rest)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[3:]),
    )
    commands = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in _DELEGATED.items():
        commands.add_parser(name, help=help_text, add_help=False)
    test = commands.add_parser("test", help="lint, unit tests and nbval, as `make test` "
                               "(`test system`: `make test-system`)")
    test.add_argument("parts", nargs="*", metavar="PART",
                      help=f"any of {', '.join(ALL_PARTS)} (default: {' '.join(TEST_PARTS)}, "
                           "in this order; system: the system tier, which CI also runs)")
    test.add_argument("--workers", type=int, default=2, help="parallel pytest workers (default 2)")
    notebooks = commands.add_parser("notebooks", help="re-execute notebooks in place")
    notebooks.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                           help="notebooks or folders (default: every notebook in notebooks/)")
    notebooks.add_argument("--remeasure", action="store_true",
                           help="also store new plots of the cells that time something")
    student = commands.add_parser("student", help="write student versions of the notebooks to student/")
    student.add_argument("--lang", default="en",
                         help="en (default), zh-CN or zh-TW: from notebooks/zh-Hans (zh-Hant) "
                              "to student/zh-Hans (zh-Hant)")
    site = commands.add_parser("site", help="build the static HTML site in build/site/")
    site.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    return parser


def _main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in _DELEGATED:
        return _delegate(argv[0], argv[1:])
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "test":
        unknown = sorted(set(args.parts) - set(ALL_PARTS))
        if unknown:
            parser.error(f"unknown test part(s) {unknown}: choose from {list(ALL_PARTS)}")
        return _run_tests(args.parts, args.workers)
    if args.command == "notebooks":
        from course_tools.publish.notebooks import main as notebooks_main

        paths = args.paths or [clone_root("notebooks") / "notebooks"]
        code = 0
        for path in paths:
            code = max(code, notebooks_main(["execute", str(path)]
                                            + (["--remeasure"] if args.remeasure else [])))
        if code == 0:  # the Chinese notebooks: this run's code, their own outputs (issue 29)
            from course_tools.translation.translate import main as translate_main

            code = translate_main(["generate"]) or _execute_translations(args.paths)
        return code
    if args.command == "student":
        from course_tools.publish.exercises import main as exercises_main
        from lectures_lib.languages import normalise_language

        root = clone_root("student")
        try:
            language = normalise_language(args.lang)
        except ValueError as error:
            parser.error(f"--lang: {error}")
        folder = "" if language == "en" else language
        code = exercises_main(["release", str(root / "notebooks" / folder),
                               str(root / "student" / folder)])
        if code == 0:  # the learner's copies: their explorers live at once (issue 40)
            from course_tools.publish.copy import trust_notebooks

            trust_notebooks(sorted((root / "student" / folder).glob("*.ipynb")))
        return code
    if args.command == "site":
        from course_tools.publish.site import main as site_main

        clone_root("site", ("notebooks", "README.md"))
        return site_main(["--out", str(args.out)])
    raise AssertionError(f"unhandled command {args.command!r}")


def _execute_translations(paths: list[Path]) -> int:
    """Execute the generated Chinese notebooks of the English ones just executed (all of them by
    default), each in its folder with its language, and record which English run they ran beside."""
    from course_tools.publish.notebooks import execute_in_place, find_notebooks
    from course_tools.translation.own_runs import mark_own_run
    from course_tools.translation.translate import LANGUAGES, output_path, translated_notebooks

    chosen = {p.resolve() for path in paths for p in find_notebooks(path)} if paths else None
    failed = 0
    for english in translated_notebooks():
        if chosen is not None and english.resolve() not in chosen:
            continue
        for language in LANGUAGES:
            path = output_path(english, language)
            print(f"executing {path} ...", flush=True)
            try:
                seconds = execute_in_place(path, env={"LECTURES_LANG": language},
                                           english=english)
            except Exception as error:  # report every failing notebook, then fail
                print(f"FAILED {path}: {type(error).__name__}: {str(error)[-2000:]}", file=sys.stderr)
                failed += 1
                continue
            mark_own_run(path, english)
            print(f"executed {path} in {seconds:.1f} s", flush=True)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    """Run one command; a command that needs a clone says so (exit status 2)."""
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except CloneRequired as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
