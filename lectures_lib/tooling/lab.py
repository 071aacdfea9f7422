"""Start JupyterLab on the course: ``python -m lectures_lib lab`` (what ``make lab`` runs).

JupyterLab is rooted at the repository and opens on ``notebooks/``, so the README and every
relative link between notebooks (``../README.md``, ``02_multi_head_attention.ipynb``) work.
``--student`` opens ``student/`` instead: the learner's own copies of the notebooks, with the
solutions stripped (made from ``notebooks/`` the first time, never overwritten afterwards). The
notebooks in ``notebooks/`` are the instructor's: running them in the lab changes the tracked files.

The server listens on 127.0.0.1 only. ``--port`` picks the port (default 8888; Jupyter moves to
the next free one if it is taken), ``--no-browser`` keeps it headless, ``--token`` fixes the
access token (default: Jupyter makes one and prints the URL). Stop it with Ctrl+C (twice) in the
terminal, or File > Shut Down in the lab.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from . import ROOT

NOTEBOOKS = ROOT / "notebooks"
STUDENT = ROOT / "student"


def lab_command(
    root: Path = ROOT,
    port: int = 8888,
    open_browser: bool = True,
    token: str | None = None,
    open_on: str = "notebooks",
) -> list[str]:
    """The command line that starts JupyterLab rooted at ``root``, showing folder ``open_on``.

    Used by ``make lab`` and by the tests, so the tests start the lab exactly as a learner does.
    """
    command = [
        sys.executable, "-m", "jupyterlab",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        f"--ServerApp.root_dir={root}",
        f"--LabApp.default_url=/lab/tree/{open_on}",
        f"--ServerApp.open_browser={open_browser}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--ServerApp.allow_root=True")  # containers and CI often run as root
    if token is not None:
        command.append(f"--IdentityProvider.token={token}")
    return command


def ensure_student_copies(notebooks: Path = NOTEBOOKS, student: Path = STUDENT) -> list[Path]:
    """Write the student version of every notebook that ``student`` does not hold yet.

    A learner's existing copy is never overwritten (it holds their work); delete it to get a
    fresh one. Returns the paths written.
    """
    from .exercises import release

    written = []
    with tempfile.TemporaryDirectory() as folder:
        for fresh in release(notebooks, Path(folder)):
            target = student / fresh.relative_to(folder)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fresh, target)
                written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lectures_lib lab", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--token", default=None, help="fixed access token")
    parser.add_argument(
        "--student", action="store_true",
        help="open the student versions in student/ (created on first use, never overwritten)",
    )
    args = parser.parse_args(argv)
    open_on = "notebooks"
    if args.student:
        written = ensure_student_copies()
        for path in written:
            print(f"wrote the student version {path.relative_to(ROOT)}")
        print(f"student/ holds your copies; {len(written)} new. Delete a copy to get a fresh one.")
        open_on = STUDENT.name
    else:
        print("Opening the instructor's notebooks/ (solutions filled in). To work on your own "
              "copies, run `make lab-student` (python -m lectures_lib lab --student).")
    command = lab_command(port=args.port, open_browser=not args.no_browser, token=args.token,
                          open_on=open_on)
    print("Stop JupyterLab with Ctrl+C twice here, or File > Shut Down in the lab.", flush=True)
    server = subprocess.Popen(command)
    # A SIGTERM to this launcher (a test harness, `kill`) stops the server and its kernels too.
    signal.signal(signal.SIGTERM, lambda *_: server.terminate())
    while True:
        try:
            return server.wait()
        except KeyboardInterrupt:  # the server got Ctrl+C too: let it shut its kernels down
            continue


if __name__ == "__main__":
    raise SystemExit(main())
