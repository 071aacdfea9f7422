"""Re-execute the course's notebooks in place: ``python -m lectures_lib.notebooks execute notebooks``.

This is what ``make notebooks`` runs. Each notebook runs top to bottom in a fresh kernel (its own
folder as working directory), exactly as a student runs it; the stored outputs (plots included)
are what readers of the repository see, and nbval compares the cells marked
``# NBVAL_CHECK_OUTPUT`` against them. A notebook that raises is reported and left unchanged.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient


def find_notebooks(path: Path) -> list[Path]:
    """``path`` itself if it is a notebook, else every ``*.ipynb`` below it (checkpoints skipped)."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def execute_in_place(path: Path, timeout: int = 600) -> float:
    """Execute one notebook in a fresh ``python3`` kernel and save it; returns seconds taken."""
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=False,  # no timestamps in the stored notebook: diffs stay readable
    )
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    nbformat.write(notebook, path)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    execute = commands.add_parser("execute", help="execute notebooks in place")
    execute.add_argument("path", type=Path, help="a notebook or a folder of notebooks")
    args = parser.parse_args(argv)
    failed = []
    for path in find_notebooks(args.path):
        try:
            seconds = execute_in_place(path)
        except Exception as error:  # report every failing notebook, then fail
            print(f"FAILED {path}: {type(error).__name__}: {str(error)[-2000:]}", file=sys.stderr)
            failed.append(path)
        else:
            print(f"executed {path} in {seconds:.1f} s")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
