"""The course's tooling: what builds, releases, runs and grades the notebooks (not taught).

- :mod:`lectures_lib.tooling.exercises`: exercise markers, nbgrader metadata, student versions;
- :mod:`lectures_lib.tooling.grading`: the grade command (submissions against the hidden tests),
  with :mod:`~lectures_lib.tooling.sandbox` (bubblewrap, the remote stand-ins),
  :mod:`~lectures_lib.tooling.worker` (the submission's side) and
  :mod:`~lectures_lib.tooling.wire` (the plain data that crosses);
- :mod:`lectures_lib.tooling.notebooks`: re-execute notebooks in place (``make notebooks``);
- :mod:`lectures_lib.tooling.site`: the static site (``make site``);
- :mod:`lectures_lib.tooling.translate`: the Chinese notebooks from the English ones and
  ``translations/`` (``make notebooks`` runs it; the sync test is ``tests/test_translations.py``);
- :mod:`lectures_lib.tooling.lab`: JupyterLab on the course (``make lab``);
- :mod:`lectures_lib.tooling.course`: the course's files in a clone or the installed package
  (``copy DIR``; the notebooks read their stored runs through it);
- :mod:`lectures_lib.tooling.hub`: JupyterHub for a class (``hub CLASS.csv``, ``make hub``);
- :mod:`lectures_lib.tooling.cli`: ``python -m lectures_lib COMMAND``, every ``make`` target.

The taught modules (attention, layers, models, ...) never import from here. Imports go one way:
``grading`` uses ``exercises``, never the reverse. Commands that work on the course's own files
(``test``, ``notebooks``, ``student``, ``site``, ``lab``, and ``grade`` without ``--course``) need
a clone of the repository; from an installed package they say so (:func:`clone_root`).
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["ROOT", "CloneRequired", "clone_root"]

ROOT = Path(__file__).resolve().parents[2]  # the repository, when run from a clone


class CloneRequired(RuntimeError):
    """A command needs the course's repository (notebooks/, tests/, README.md) and it is absent."""


def clone_root(command: str, needs: tuple[str, ...] = ("notebooks",)) -> Path:
    """The repository root, or :class:`CloneRequired` saying what ``command`` needs and how to get it."""
    if not isinstance(command, str) or not command:
        raise TypeError(f"command must be a non-empty str, got {type(command).__name__}")
    missing = [name for name in needs if not (ROOT / name).exists()]
    if missing:
        raise CloneRequired(
            f"`python -m lectures_lib {command}` works on a clone of the course: it needs "
            f"{', '.join(name + '/' if '.' not in name else name for name in missing)} next to "
            f"the lectures_lib package ({ROOT} has none). Clone the repository and install it "
            "with `pip install -e '.[dev,grading]'`, then run the command there"
        )
    return ROOT
