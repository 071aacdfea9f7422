"""The course's commands without ``make``: ``python -m lectures_lib COMMAND``.

Every ``make`` target runs one of these, so ``make`` is a convenience (Windows has none):

    python -m lectures_lib lab [--student]   JupyterLab on notebooks/ (or your copies in student/)
    python -m lectures_lib test [PART ...]   lint + unit tests + every notebook under nbval
    python -m lectures_lib notebooks         re-execute every notebook in place (stored outputs;
                                             --remeasure also stores new time plots), then
                                             write the Chinese ones (notebooks/zh-Hans, zh-Hant)
    python -m lectures_lib student           write the student versions to student/ (overwrites)
    python -m lectures_lib site              build the static site in build/site/

Run them from the repository (the clone), in the environment the course is installed in.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST_PARTS = ("lint", "unit", "nbval")


def suite_commands(parts: list[str], workers: int) -> list[list[str]]:
    """The commands of ``make test`` (``make lint``, ``make unit``, ``make nbval``), in order."""
    python = sys.executable
    parallel = ["-n", str(workers), "--dist", "loadscope"]  # a notebook stays on one worker
    commands = {
        "lint": [python, "-m", "ruff", "check", "lectures_lib", "tests", "benchmarks", "notebooks"],
        "unit": [python, "-m", "pytest", *parallel, "tests"],
        "nbval": [python, "-m", "pytest", *parallel, "--nbval-lax", "--nbval-current-env",
                  "notebooks"],
    }
    return [commands[part] for part in parts]


def _run_tests(parts: list[str], workers: int) -> int:
    if not (ROOT / "tests").is_dir():
        print(f"error: no tests/ next to {Path(__file__).parent}: run this from a clone of the "
              "course, installed with `pip install -e '.[dev]'`", file=sys.stderr)
        return 2
    for command in suite_commands(parts or list(TEST_PARTS), workers):
        print("$ " + " ".join(command[1:] if command[0] == sys.executable else command), flush=True)
        code = subprocess.call(command, cwd=ROOT)
        if code != 0:
            return code
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lectures_lib",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[3:11]),
    )
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("lab", help="start JupyterLab (--help for its options)", add_help=False)
    test = commands.add_parser("test", help="lint, unit tests and nbval, as `make test`")
    test.add_argument("parts", nargs="*", metavar="PART",
                      help=f"any of {', '.join(TEST_PARTS)} (default: all, in this order)")
    test.add_argument("--workers", type=int, default=2, help="parallel pytest workers (default 2)")
    notebooks = commands.add_parser("notebooks", help="re-execute every notebook in place")
    notebooks.add_argument("--remeasure", action="store_true",
                           help="also store new plots of the cells that time something")
    commands.add_parser("student", help="write student versions of the notebooks to student/")
    site = commands.add_parser("site", help="build the static HTML site in build/site/")
    site.add_argument("--out", type=Path, default=ROOT / "build" / "site")

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["lab"]:  # the lab has its own options: hand them over untouched
        from .lab import main as lab_main

        return lab_main(argv[1:])
    args = parser.parse_args(argv)
    if args.command == "test":
        unknown = sorted(set(args.parts) - set(TEST_PARTS))
        if unknown:
            parser.error(f"unknown test part(s) {unknown}: choose from {list(TEST_PARTS)}")
        return _run_tests(args.parts, args.workers)
    if args.command == "notebooks":
        from .notebooks import main as notebooks_main

        code = notebooks_main(["execute", str(ROOT / "notebooks")]
                              + (["--remeasure"] if args.remeasure else []))
        from .translate import main as translate_main  # the Chinese notebooks, from this run

        return code or translate_main(["generate"])
    if args.command == "student":
        from .exercises import main as exercises_main

        return exercises_main(["release", str(ROOT / "notebooks"), str(ROOT / "student")])
    if args.command == "site":
        from .site import main as site_main

        return site_main(["--out", str(args.out)])
    raise AssertionError(f"unhandled command {args.command!r}")


if __name__ == "__main__":
    raise SystemExit(main())
