"""Start JupyterLab on the course's notebooks: ``python -m lectures_lib.lab`` (what ``make lab`` runs).

The server listens on 127.0.0.1 only. ``--port`` picks the port (default 8888; Jupyter moves to
the next free one if it is taken), ``--no-browser`` keeps it headless, ``--token`` fixes the
access token (default: Jupyter makes one and prints the URL).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def lab_command(
    notebooks: Path = NOTEBOOKS,
    port: int = 8888,
    open_browser: bool = True,
    token: str | None = None,
) -> list[str]:
    """The command line that starts JupyterLab on ``notebooks`` (used by ``make lab`` and tests)."""
    command = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={notebooks}",
        f"--ServerApp.open_browser={open_browser}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")  # containers and CI often run as root
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    return command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--token", default=None, help="fixed access token")
    parser.add_argument("--notebooks", type=Path, default=NOTEBOOKS)
    args = parser.parse_args(argv)
    command = lab_command(args.notebooks, args.port, not args.no_browser, args.token)
    return subprocess.call(command)


if __name__ == "__main__":
    raise SystemExit(main())
