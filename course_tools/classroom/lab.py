"""Start JupyterLab on the course: ``python -m course_tools lab`` (what ``make lab`` runs).

JupyterLab is rooted at the repository and opens on ``notebooks/``, so the README and every
relative link between notebooks (``../README.md``, ``02_multi_head_attention.ipynb``) work.
``--student`` opens ``student/`` instead: the learner's own copies of the notebooks, with the
solutions stripped (made from ``notebooks/`` the first time, never overwritten afterwards). The
notebooks in ``notebooks/`` are the instructor's: running them in the lab changes the tracked files.

``--lang zh-CN`` (``zh-Hans``) or ``--lang zh-TW`` (``zh-Hant``) opens the Chinese notebooks
(``notebooks/zh-Hans/``), or with ``--student`` the Chinese student copies (``student/zh-Hans/``,
made from the Chinese notebooks), and tells the kernels the language (``LECTURES_LANG``) so the
checkers answer in Chinese. JupyterLab's own menus follow its language pack, an option:
``pip install jupyterlab-language-pack-zh-CN`` (or ``-zh-TW``), then Settings > Language.

Installed from the wheel (no clone), or with ``--dir DIR``, the lab is rooted at a folder of the
learner's instead: ``DIR`` (default ``./lectures-course``), into which the course is first
copied from the installed package (:func:`~course_tools.publish.copy.copy_course`: the
notebooks or student copies of the language, the stored runs, the README; an existing file,
which may hold the learner's work, is never overwritten).

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

from course_tools import ROOT

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
    fresh one. The copies written are trusted for the user (:func:`~.course.trust_notebooks`),
    so their stored explorers are live. Returns the paths written.
    """
    from course_tools.publish.copy import trust_notebooks
    from course_tools.publish.exercises import release

    written = []
    with tempfile.TemporaryDirectory() as folder:
        for fresh in release(notebooks, Path(folder)):
            target = student / fresh.relative_to(folder)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(fresh, target)
                written.append(target)
    trust_notebooks(written)
    return written


def is_clone(root: Path = ROOT) -> bool:
    """Whether ``root`` is the course's repository (not an installed package's folder)."""
    return (root / "pyproject.toml").is_file() and (root / "notebooks").is_dir()


def _serve(command: list[str], language: str) -> int:
    print("Stop JupyterLab with Ctrl+C twice here, or File > Shut Down in the lab.", flush=True)
    server = subprocess.Popen(command, env={**os.environ, "LECTURES_LANG": language})
    # A SIGTERM to this launcher (a test harness, `kill`) stops the server and its kernels too.
    signal.signal(signal.SIGTERM, lambda *_: server.terminate())
    while True:
        try:
            return server.wait()
        except KeyboardInterrupt:  # the server got Ctrl+C too: let it shut its kernels down
            continue


def _lab_in_folder(args, language: str, folder: Path) -> int:
    """The lab rooted at the learner's ``folder``, the course copied there from the package."""
    from course_tools.publish.copy import LANGUAGE_FOLDERS, copy_course

    folder = folder.resolve()
    report = copy_course(folder, student=args.student, language=language)
    print(report.summary(folder))
    open_on = ("student" if args.student else "notebooks") + (
        f"/{LANGUAGE_FOLDERS[language]}" if LANGUAGE_FOLDERS[language] else "")
    if language != "en":
        _language_pack_hint(language)
    print(f"JupyterLab opens on {folder / open_on}")
    return _serve(lab_command(root=folder, port=args.port, open_browser=not args.no_browser,
                              token=args.token, open_on=open_on), language)


def language_folders(language: str = "en") -> tuple[Path, Path]:
    """(notebooks, student copies) of ``language``: ``notebooks/``, or ``notebooks/zh-Hans/`` ..."""
    if language == "en":
        return NOTEBOOKS, STUDENT
    return NOTEBOOKS / language, STUDENT / language


def _language_pack_hint(language: str) -> None:
    import importlib.util

    pack = {"zh-Hans": "zh_CN", "zh-Hant": "zh_TW"}[language]
    if importlib.util.find_spec(f"jupyterlab_language_pack_{pack}") is None:
        print(f"JupyterLab's menus in Chinese (optional): pip install "
              f"jupyterlab-language-pack-{pack.replace('_', '-')}, then Settings > Language.")
    else:
        print(f"JupyterLab's Chinese language pack is installed: Settings > Language > {pack}.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools lab", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.add_argument("--token", default=None, help="fixed access token")
    parser.add_argument(
        "--student", action="store_true",
        help="open the student versions in student/ (created on first use, never overwritten)",
    )
    parser.add_argument("--lang", default="en",
                        help="en (default), zh-CN / zh-Hans or zh-TW / zh-Hant: the notebooks' "
                             "language (the Chinese ones are in notebooks/zh-Hans, zh-Hant)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="root the lab at this folder, copying the course into it first "
                             "(the default outside a clone: ./lectures-course)")
    args = parser.parse_args(argv)
    from lectures_lib.languages import normalise_language

    try:
        language = normalise_language(args.lang)
    except ValueError as error:
        parser.error(f"--lang: {error}")
    if args.dir is not None or not is_clone():
        return _lab_in_folder(args, language, args.dir or Path.cwd() / "lectures-course")
    notebooks, student = language_folders(language)
    if not any(notebooks.glob("*.ipynb")):
        print(f"error: {notebooks.relative_to(ROOT)} holds no notebook: the {language} notebooks "
              "are generated by `make notebooks` (python -m course_tools notebooks)",
              file=sys.stderr)
        return 2
    open_on = notebooks.relative_to(ROOT).as_posix()
    if language != "en":
        _language_pack_hint(language)
    if args.student:
        written = ensure_student_copies(notebooks, student)
        for path in written:
            print(f"wrote the student version {path.relative_to(ROOT)}")
        where = student.relative_to(ROOT).as_posix()
        print(f"{where}/ holds your copies; {len(written)} new. Delete a copy to get a fresh one.")
        open_on = where
    else:
        print("Opening the instructor's notebooks/ (solutions filled in). To work on your own "
              "copies, run `make lab-student` (python -m course_tools lab --student).")
    return _serve(lab_command(port=args.port, open_browser=not args.no_browser,
                              token=args.token, open_on=open_on), language)


if __name__ == "__main__":
    raise SystemExit(main())
