"""The course's files wherever the library is: a clone, or the installed package.

The installed package is the course: its wheel (built from a clone or from the sdist) holds the
notebooks in every language, the stored benchmark runs that the notebooks read and the READMEs,
under ``lectures_lib/_course/`` (``setup.py`` copies the files :data:`SHIPPED` names there at
build time, from the same files a clone has, so there is no second tracked copy to drift). In a
clone (an editable install) the same names resolve to the repository's own folders.
:func:`course_files` is that one resolver; the notebooks read their stored runs through
:func:`stored_benchmark`, so they run in any folder: a clone, a learner's copy, a hub's home
folder. (Writing the course into a folder is the instructor's tool ``copy``:
``course_tools.publish.copy``.)
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "SHIPPED", "course_files", "stored_benchmark"]

ROOT = Path(__file__).resolve().parents[1]  # the repository, when run from a clone
PACKAGE_DATA = Path(__file__).resolve().parent / "_course"  # filled in by setup.py
# What a wheel holds (setup.py reads this tuple as text and copies these, relative to the clone's
# root). Globs.
SHIPPED = ("notebooks/*.ipynb", "notebooks/zh-Hans/*.ipynb", "notebooks/zh-Hant/*.ipynb",
           "benchmarks/*.json", "benchmarks/*.png", "benchmarks/*.py", "benchmarks/README.md",
           "README.md", "README.zh-CN.md", "README.zh-TW.md", "LICENSE")


def course_files() -> Path:
    """The folder holding ``notebooks/`` and ``benchmarks/``: the installed package's, or the clone.

    Raises FileNotFoundError naming both places when neither has them (a package built without
    its course files).
    """
    for folder in (PACKAGE_DATA, ROOT):
        if (folder / "notebooks").is_dir() and (folder / "benchmarks").is_dir():
            return folder
    raise FileNotFoundError(
        f"the course's files (notebooks/, benchmarks/) are neither in the installed package "
        f"({PACKAGE_DATA}) nor in a clone ({ROOT}): reinstall the course from its wheel or sdist")


def stored_benchmark(name: str) -> Path:
    """The path of a stored benchmark run, e.g. ``stored_benchmark("long_range.json")``."""
    if not isinstance(name, str) or not name or Path(name).name != name:
        raise ValueError(f"name must be a file name in benchmarks/ (no folder), got {name!r}")
    path = course_files() / "benchmarks" / name
    if not path.is_file():
        stored = sorted(p.name for p in path.parent.iterdir() if p.suffix in (".json", ".png"))
        raise FileNotFoundError(f"no stored benchmark {name!r} in {path.parent}; stored: {stored}")
    return path
