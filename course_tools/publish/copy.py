"""Write the course into any folder: ``python -m course_tools copy DIR``.

The course's files come from the installed package or the clone
(:func:`lectures_lib.course.course_files`, the learner's side: the notebooks read their stored
runs through it). ``copy DIR`` lays the files out as a clone does, so every relative link in the
notebooks holds::

    DIR/notebooks/NN_....ipynb            the instructor's notebooks (solutions filled in)
    DIR/notebooks/zh-Hans/ (zh-Hant/)     with --lang zh-CN (zh-TW)
    DIR/student/[zh-Hans/]NN_....ipynb    with --student: solutions stripped, hidden tests removed
    DIR/benchmarks/                       the stored runs and the benchmark scripts
    DIR/README.md (README.zh-CN.md, ...)  the course's README in that language

An existing file is never overwritten (it may be a learner's work) unless ``--force`` is given;
the command says what it wrote and what it kept.

The notebooks it writes are *trusted* for the user who runs it (:func:`trust_notebooks`: Jupyter's
notebook signature, in that user's Jupyter data folder), so the attention explorer of 04 and 05
is live the first time the learner opens a copy, without re-running its cell (issue 40).
"""

from __future__ import annotations

import argparse
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from lectures_lib.course import course_files
from lectures_lib.languages import normalise_language
from lectures_lib.plain_checks import check_bool, check_path

LANGUAGE_FOLDERS = {"en": "", "zh-Hans": "zh-Hans", "zh-Hant": "zh-Hant"}
READMES = {"en": "README.md", "zh-Hans": "README.zh-CN.md", "zh-Hant": "README.zh-TW.md"}


def trust_notebooks(paths) -> None:
    """Sign ``paths`` (notebooks the course just wrote for the user running this) as trusted.

    Jupyter's own mechanism (``jupyter trust``): the signature of each notebook's content goes
    into the notebook database of the user's Jupyter data folder (``jupyter --data-dir``), so
    JupyterLab, run by that user, shows their stored HTML outputs with their styles and scripts
    (the attention explorer). A notebook changed afterwards is trusted again once its cells are
    run, as any notebook is. Only the course's own notebooks are signed, never a learner's file.
    """
    import nbformat
    from nbformat.sign import NotebookNotary

    notary = NotebookNotary()
    for path in paths:
        if Path(path).suffix == ".ipynb":
            notary.sign(nbformat.read(path, as_version=4))


@dataclass
class CopyReport:
    """What :func:`copy_course` did: the files it wrote and the existing ones it kept."""

    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)

    def summary(self, dest: Path) -> str:
        lines = [f"wrote {len(self.written)} file(s) under {dest}"]
        if self.kept:
            names = [p.relative_to(dest).as_posix() for p in self.kept]
            notebooks = [n for n in names if n.endswith(".ipynb")]
            others = len(names) - len(notebooks)
            lines.append(f"kept {len(names)} existing file(s) unchanged (--force overwrites "
                         f"them): {', '.join(notebooks) or 'no notebook'}"
                         + (f" and {others} other file(s)" if others else ""))
        return "\n".join(lines)


def _put(target: Path, write, report: CopyReport, force: bool) -> None:
    if target.exists() and not force:
        report.kept.append(target)
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    write(target)
    report.written.append(target)


def copy_course(dest: Path, *, student: bool = False, language: str = "en",
                force: bool = False) -> CopyReport:
    """Write the course's notebooks (one language), stored runs and README into ``dest``.

    ``student``: the student versions (``release`` of the same notebooks) in ``dest/student/``
    instead of the instructor's in ``dest/notebooks/``. ``language``: en, zh-CN (zh-Hans) or
    zh-TW (zh-Hant). Existing files are kept unless ``force``.
    """
    dest = check_path(dest, "dest")
    check_bool(student, "student")
    check_bool(force, "force")
    language = normalise_language(language)
    if dest.exists() and not dest.is_dir():
        raise NotADirectoryError(f"dest must be a folder, got the file {dest}")
    source = course_files()
    sub = LANGUAGE_FOLDERS[language]
    notebooks = sorted((source / "notebooks" / sub).glob("*.ipynb"))
    if not notebooks:
        raise FileNotFoundError(f"no notebooks in {source / 'notebooks' / sub}")
    report = CopyReport()
    if student:
        import nbformat

        from course_tools.publish.exercises import release_notebook

        for path in notebooks:  # every notebook converted first: a marker error writes nothing
            released = release_notebook(nbformat.read(path, as_version=4), name=path.stem)
            nbformat.validate(released)
            _put(dest / "student" / sub / path.name,
                 lambda target, nb=released: nbformat.write(nb, target), report, force)
    else:
        for path in notebooks:
            _put(dest / "notebooks" / sub / path.name,
                 lambda target, p=path: shutil.copyfile(p, target), report, force)
    for path in [*sorted((source / "benchmarks").iterdir()), source / READMES[language]]:
        if path.is_file():
            _put(dest / path.relative_to(source),
                 lambda target, p=path: shutil.copyfile(p, target), report, force)
    trust_notebooks(report.written)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m course_tools copy",
        description="Write the course (notebooks, stored benchmark runs, README) into a folder, "
                    "from the installed package or the clone; existing files are kept.")
    parser.add_argument("dest", type=Path, help="the folder to write into (created if missing)")
    parser.add_argument("--student", action="store_true",
                        help="the student versions (solutions stripped) in DEST/student/")
    parser.add_argument("--lang", default="en",
                        help="en (default), zh-CN or zh-TW (DEST/notebooks/zh-Hans, zh-Hant)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files that already exist (your edits are lost)")
    args = parser.parse_args(argv)
    try:
        report = copy_course(args.dest, student=args.student, language=args.lang,
                             force=args.force)
    except ValueError as error:
        parser.error(str(error))
    print(report.summary(args.dest))
    folder = args.dest / ("student" if args.student else "notebooks") / LANGUAGE_FOLDERS[
        normalise_language(args.lang)]
    print(f"the notebooks are in {folder}")
    return 0
