"""course_tools: the instructor's tools for the course (not taught), grouped by job.

- :mod:`course_tools.grading`: the grade command (submissions against the hidden tests), with
  :mod:`course_tools.grading.sandbox` (bubblewrap, the remote stand-ins, the worker on the
  submission's side, the plain data that crosses, nbgrader's sandboxed kernel);
- :mod:`course_tools.publish`: student versions and nbgrader's notebooks (``exercises``), the
  course written into any folder (``copy``), notebooks re-executed in place (``notebooks``,
  ``make notebooks``), the static site (``site``, ``make site``);
- :mod:`course_tools.translation`: the Chinese notebooks from the English ones and
  ``translations/`` (``make notebooks`` runs it; the sync test is
  ``tests/tooling/test_translations.py``);
- :mod:`course_tools.classroom`: JupyterLab on the course (``make lab``) and JupyterHub for a
  class (``hub CLASS.csv``, ``make hub``);
- :mod:`course_tools.cli`: the course's commands, every ``make`` target.

It ships in the same wheel as ``lectures_lib``, the library the notebooks import; it uses the
learner's library (the checkers through :mod:`lectures_lib.checks`, the course's files through
:mod:`lectures_lib.course`), and nothing in ``lectures_lib`` imports it
(``tests/test_architecture.py``). Imports inside go one way: ``grading`` uses
``publish.exercises``, never the reverse. Commands that work on the course's own files
(``test``, ``notebooks``, ``student``, ``site``, ``lab``) need a clone of the repository; from an
installed package they say so (:func:`clone_root`). ``grade``, ``release``, ``source`` and ``copy``
read the installed course (:func:`lectures_lib.course.course_files`).
"""

from __future__ import annotations

import sys as _sys

if _sys.argv[:1] == ["-m"] and not getattr(_sys.flags, "safe_path", False):
    # Run as ``python -m course_tools ...`` (the grade command, the hub's submit service, the
    # sandbox's worker): Python put the working directory first on sys.path, and the grader may
    # be started in a folder of submissions, where a handed-in ``torch.py`` would run with the
    # grader's rights. Import nothing from it: this runs before anything else is imported
    # (``lectures_lib``, torch), as ``python -m`` imports this package first.
    from os import getcwd as _getcwd
    from os.path import samefile as _samefile

    def _unsafe(entry: str) -> bool:
        try:
            return entry in ("", ".") or _samefile(entry, _getcwd())
        except OSError:
            return False

    _sys.path[:] = [entry for entry in _sys.path if not _unsafe(entry)]
    # a clone run without an install: lectures_lib lies beside this package; its folder goes
    # last (after site-packages), as the grader's own restart does (grading._batch._safe_python)
    from os.path import abspath as _abspath
    from os.path import dirname as _dirname

    _sys.path.append(_dirname(_dirname(_abspath(__file__))))

from pathlib import Path  # noqa: E402 - after the scrub above

from lectures_lib.course import ROOT  # noqa: E402 - the repository, when run from a clone

__all__ = ["ROOT", "CloneRequired", "clone_root"]


class CloneRequired(RuntimeError):
    """A command needs the course's repository (notebooks/, tests/, README.md) and it is absent."""


def clone_root(command: str, needs: tuple[str, ...] = ("notebooks",)) -> Path:
    """The repository root, or :class:`CloneRequired` saying what ``command`` needs and how to get it."""
    if not isinstance(command, str) or not command:
        raise TypeError(f"command must be a non-empty str, got {type(command).__name__}")
    missing = [name for name in needs if not (ROOT / name).exists()]
    if missing:
        raise CloneRequired(
            f"`python -m course_tools {command}` works on a clone of the course: it needs "
            f"{', '.join(name + '/' if '.' not in name else name for name in missing)} next to "
            f"the lectures_lib package ({ROOT} has none). Clone the repository and install it "
            "with `pip install -e '.[dev,grading]'`, then run the command there"
        )
    return ROOT
