"""Assignments with a lifecycle (issue 41): what the instructor released, to whom, until when.

An **assignment** is a name (nbgrader's assignment id, e.g. ``ps1``), the course notebooks it is
made of (``01_self_attention``, ...), a **deadline** (timezone-aware; a time given without a zone
is the hub's local time) and a **late policy**. It is stored as plain JSON, one file per
assignment, in the hub's state folder: ``HUBDIR/assignments/<name>.json`` (root's, ``0600``)::

    {"name": "ps1", "notebooks": ["01_self_attention"],
     "deadline": "2026-12-12T23:59:00+08:00",
     "late_policy": {"per_day": 0.1, "zero_after_days": 7},
     "releases": [{"version": 1, "time": "...",
                   "fingerprints": {"en": {"01_self_attention": "<sha256>"}, "zh-Hans": ...}}]}

**Release** (:func:`release`): each student gets the student version (solutions stripped, hidden
tests removed: :func:`~course_tools.publish.exercises.release_notebook`) of each notebook *in
their language* (the class list's), written into ``~/course/student/[zh-Hans|zh-Hant]/`` by a
process running *as the student* (their files stay theirs; a link they planted reaches only what
they could write anyway), with a note ``ASSIGNMENT-<name>.md`` (the notebooks, the deadline, the
late policy) in their language. Each release records the *fingerprint* of what it gave each
language (:func:`fingerprint`: the cells' types and sources, so running cells or JupyterLab's
saving does not count as a change, editing one does).

**Re-release of a corrected notebook never touches a student's work.** For each notebook of a
student: absent: written; the same as this release: left alone; the same as an earlier release
(the student never edited it): replaced by the corrected one; anything else (the student's
work): kept byte for byte, and the corrected notebook is written *beside* it as
``<notebook>.v<N>.ipynb``, the note saying so. Whichever the student works in is submitted (the
submit service sends the assignment's notebooks with their ``.vN`` copies);
:func:`pick_submitted` takes, per notebook, the newest version the student edited (else the
newest), so ``hub collect --assignment`` hands the grader one ``<notebook>.ipynb`` per notebook.

**Late policy** (:class:`LatePolicy`): a submission after the deadline loses ``per_day`` of its
raw score per started day late, and all of it more than ``zero_after_days`` days late (None:
never); :meth:`LatePolicy.penalty` is the points lost, the ``late_submission_penalty`` column of
the gradebook (:mod:`.gradebook`), whichever grader scored it.

Command line (:mod:`.handout`, which also writes the note and places the notebooks as the student):
``python -m course_tools hub release HUBDIR NAME NOTEBOOK... --deadline TIME [--late-per-day F]
[--late-zero-after DAYS]`` and ``hub assignments HUBDIR``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

FOLDER = "assignments"  # HUBDIR/assignments/<name>.json
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # nbgrader's assignment id, a file name
NOTEBOOK = re.compile(r"\d\d_[a-z0-9_]+")  # a course notebook's stem
VERSIONED = re.compile(r"(?P<stem>\d\d_[a-z0-9_]+)(?:\.v(?P<version>\d+))?\.ipynb")


# ---- the data -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatePolicy:
    """What lateness costs: ``per_day`` of the raw score per started day late (0.1: 10 %), and
    the whole score when more than ``zero_after_days`` days late (None: never zero)."""

    per_day: float = 0.0
    zero_after_days: float | None = None

    def __post_init__(self):
        if isinstance(self.per_day, bool) or not isinstance(self.per_day, (int, float)) or not (
                0 <= self.per_day <= 1):
            raise ValueError(f"per_day must be a fraction in [0, 1], got {self.per_day!r}")
        days = self.zero_after_days
        if days is not None and (isinstance(days, bool) or not isinstance(days, (int, float))
                                 or days < 0):
            raise ValueError(f"zero_after_days must be a number of days >= 0 or None, got "
                             f"{days!r}")

    def penalty(self, raw_score: float, late: timedelta | None) -> float:
        """The points ``raw_score`` loses for arriving ``late`` (None or <= 0: on time)."""
        if late is None or late <= timedelta(0):
            return 0.0
        days = late / timedelta(days=1)
        if self.zero_after_days is not None and days > self.zero_after_days:
            return float(raw_score)
        return float(raw_score) * min(1.0, self.per_day * math.ceil(days))

    def describe(self) -> str:
        """In words (English; :data:`NOTES` has the note's in each language)."""
        if not self.per_day and self.zero_after_days is None:
            return "late work is accepted without penalty"
        text = f"late work loses {self.per_day:.0%} per started day" if self.per_day else \
            "late work is accepted without penalty"
        if self.zero_after_days is not None:
            text += f", and scores 0 after {self.zero_after_days:g} days"
        return text

    def as_dict(self) -> dict:
        return {"per_day": self.per_day, "zero_after_days": self.zero_after_days}


@dataclass(frozen=True)
class Release:
    """One release of an assignment: its version (1, 2, ...), when, and the fingerprint of each
    notebook each language was given (``{"en": {"01_self_attention": "<sha256>"}}``)."""

    version: int
    time: str
    fingerprints: dict[str, dict[str, str]]


@dataclass(frozen=True)
class Assignment:
    """A released assignment (see the module doc); :func:`load` reads one, :func:`release`
    makes or updates one."""

    name: str
    notebooks: tuple[str, ...]
    deadline: datetime  # timezone-aware
    late_policy: LatePolicy = LatePolicy()
    releases: tuple[Release, ...] = field(default=())

    def __post_init__(self):
        check_name(self.name)
        if not self.notebooks:
            raise ValueError(f"notebooks must name at least one course notebook, got "
                             f"{self.notebooks!r}")
        for stem in self.notebooks:
            if not isinstance(stem, str) or not NOTEBOOK.fullmatch(stem):
                raise ValueError(f"notebooks must be course notebooks' names like "
                                 f"01_self_attention, got {stem!r}")
        if not isinstance(self.deadline, datetime) or self.deadline.tzinfo is None:
            raise ValueError(f"deadline must be a timezone-aware datetime, got "
                             f"{self.deadline!r}")

    @property
    def version(self) -> int:
        """The latest release's version (0 before the first)."""
        return self.releases[-1].version if self.releases else 0

    def late_by(self, when: datetime) -> timedelta | None:
        """How late a submission at ``when`` (aware; naive: the hub's local time) is; None if
        on time."""
        when = when if when.tzinfo is not None else when.astimezone()
        return when - self.deadline if when > self.deadline else None

    def released(self, language: str, stem: str) -> dict[int, str]:
        """Version -> the fingerprint that version gave ``language`` for notebook ``stem``."""
        return {r.version: r.fingerprints[language][stem] for r in self.releases
                if stem in r.fingerprints.get(language, {})}

    def to_json(self) -> str:
        return json.dumps({
            "name": self.name, "notebooks": list(self.notebooks),
            "deadline": self.deadline.isoformat(), "late_policy": self.late_policy.as_dict(),
            "releases": [{"version": r.version, "time": r.time, "fingerprints": r.fingerprints}
                         for r in self.releases]}, indent=1, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> Assignment:
        data = json.loads(text)
        return cls(data["name"], tuple(data["notebooks"]),
                   datetime.fromisoformat(data["deadline"]), LatePolicy(**data["late_policy"]),
                   tuple(Release(r["version"], r["time"], r["fingerprints"])
                         for r in data["releases"]))


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ValueError(f"assignment name must be letters, digits, _ or - (starting with a "
                         f"letter or digit, at most 64; e.g. ps1), got {name!r}")
    return name


def parse_deadline(text: str) -> datetime:
    """An ISO time (``2026-12-12T23:59``; with a zone, ``...+08:00``), aware: a time without a
    zone is the hub's local time."""
    try:
        when = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        raise ValueError(f"deadline must be an ISO time like 2026-12-12T23:59 (or "
                         f"2026-12-12T23:59+08:00), got {text!r}") from None
    return when if when.tzinfo is not None else when.astimezone()


def fingerprint(nb: dict) -> str:
    """The sha256 of a notebook's cells' types and sources (outputs, counts and metadata left
    out): what tells a student's edit from a run or a save. ``nb`` is plain JSON (a dict)."""
    digest = hashlib.sha256()
    for cell in nb.get("cells", []) if isinstance(nb, dict) else []:
        source = cell.get("source", "") if isinstance(cell, dict) else ""
        source = "".join(source) if isinstance(source, list) else str(source)
        digest.update(json.dumps([cell.get("cell_type") if isinstance(cell, dict) else None,
                                  source]).encode())
    return digest.hexdigest()


# ---- stored in the hub's folder ---------------------------------------------------------------


def path_of(hub_dir: Path, name: str) -> Path:
    return Path(hub_dir) / FOLDER / f"{check_name(name)}.json"


def load(hub_dir: Path, name: str) -> Assignment:
    """The assignment ``name`` of the hub in ``hub_dir`` (FileNotFoundError naming the released
    ones when it was never released)."""
    path = path_of(hub_dir, name)
    if not path.is_file():
        known = ", ".join(a.name for a in list_assignments(hub_dir)) or "none"
        raise FileNotFoundError(f"assignment {name!r} was never released in {hub_dir} "
                                f"(released: {known})")
    return Assignment.from_json(path.read_text(encoding="utf-8"))


def list_assignments(hub_dir: Path) -> list[Assignment]:
    """Every released assignment, by deadline."""
    folder = Path(hub_dir) / FOLDER
    found = [Assignment.from_json(p.read_text(encoding="utf-8"))
             for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    return sorted(found, key=lambda a: (a.deadline, a.name))


def save(hub_dir: Path, assignment: Assignment) -> Path:
    """Write ``assignment`` (root's, 0600, whole or not at all)."""
    from course_tools.grading._report import write_atomic

    folder = Path(hub_dir) / FOLDER
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    path = path_of(hub_dir, assignment.name)
    write_atomic(path, assignment.to_json() + "\n")
    os.chmod(path, 0o600)
    return path


# ---- release ------------------------------------------------------------------------------------


def student_version(stem: str, language: str) -> dict:
    """The student version of course notebook ``stem`` in ``language`` (plain JSON), from the
    installed course (the wheel's or the clone's ``notebooks/``)."""
    import nbformat

    from course_tools.publish.copy import LANGUAGE_FOLDERS
    from course_tools.publish.exercises import release_notebook
    from lectures_lib.course import course_files

    path = course_files() / "notebooks" / LANGUAGE_FOLDERS[language] / f"{stem}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"notebook {stem!r} is not a course notebook in {language} "
                                f"(no {path})")
    released = release_notebook(nbformat.read(path, as_version=4), name=stem)
    nbformat.validate(released)
    return json.loads(nbformat.writes(released))


def release(hub_dir: Path, name: str, notebooks: list[str] | None = None, *,
            deadline: datetime | None = None, late_policy: LatePolicy | None = None,
            students: list[str] | None = None) -> dict[str, dict[str, str]]:
    """Release (or re-release) assignment ``name`` to the class of ``hub_dir`` (every student, or
    ``students``): the first release needs ``notebooks`` and ``deadline``; a later one keeps
    what it is not given. Returns, per student, per notebook what happened (``written``,
    ``current``, ``replaced``: an unedited earlier release, ``beside``: the student's work kept
    and the corrected one written as ``<notebook>.v<N>.ipynb``). Root only (it writes as each
    student)."""
    from course_tools.classroom.roster import _class
    from lectures_lib.languages import normalise_language

    hub_dir = Path(hub_dir)
    try:
        old = load(hub_dir, name)
    except FileNotFoundError:
        if notebooks is None or deadline is None:
            raise ValueError(f"assignment {name!r}'s first release needs its notebooks and "
                             "its deadline") from None
        old = None
    chosen = tuple(Path(n).stem for n in notebooks) if notebooks else old.notebooks
    if deadline is not None and deadline.tzinfo is None:
        deadline = deadline.astimezone()
    classes = _class(hub_dir)
    unknown = sorted(set(students or ()) - set(classes))
    if unknown:
        raise ValueError(f"students must be in the class list, got {unknown}")
    languages = sorted({normalise_language(lang) for lang in classes.values()})
    versions = {lang: {stem: student_version(stem, lang) for stem in chosen}
                for lang in languages}  # every notebook made first: an error writes nothing
    prints = {lang: {stem: fingerprint(nb) for stem, nb in nbs.items()}
              for lang, nbs in versions.items()}
    previous = old.releases if old else ()
    changed = not previous or previous[-1].fingerprints != prints
    version = (previous[-1].version if previous else 0) + (1 if changed else 0)
    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    assignment = Assignment(
        check_name(name), chosen, deadline or old.deadline,
        late_policy or (old.late_policy if old else LatePolicy()),
        (*previous, Release(version, stamp, prints)) if changed else previous)
    import pwd

    for student in students or classes:  # every account first: a missing one writes nothing
        try:
            pwd.getpwnam(student)
        except KeyError:
            raise ValueError(f"student {student!r} has no Unix account: run the hub with "
                             "--create-users first") from None
    save(hub_dir, assignment)
    done = {}
    for student in sorted(students or classes):
        language = normalise_language(classes[student])
        done[student] = _place_as(student, language, assignment, versions[language])
    return done


def _place_as(student: str, language: str, assignment: Assignment,
              notebooks: dict[str, dict]) -> dict[str, str]:
    """Run :func:`place` as ``student`` (its input on stdin: plain JSON)."""
    import pwd

    from course_tools.classroom.roster import STUDENT_FOLDERS

    try:
        home = Path(pwd.getpwnam(student).pw_dir)
    except KeyError:
        raise RuntimeError(f"student {student!r} has no Unix account: run the hub with "
                           "--create-users first") from None
    order = {
        "folder": str(home / "course" / STUDENT_FOLDERS[language]),
        "version": assignment.version, "notebooks": notebooks,
        "earlier": {stem: sorted(set(assignment.released(language, stem).values()))
                    for stem in notebooks},
        "note_name": f"ASSIGNMENT-{assignment.name}.md",
        "note": {"language": language, "assignment": assignment.to_json()},
    }
    result = subprocess.run(
        [sys.executable, "-I", "-m", "course_tools.classroom.handout", "_place"],
        input=json.dumps(order), user=student, group=student, cwd=home, capture_output=True,
        text=True, env={"HOME": str(home), "PATH": os.environ.get("PATH", "")}, timeout=300)
    if result.returncode != 0:
        raise RuntimeError(f"releasing {assignment.name} to {student} failed: "
                           f"{result.stderr[-800:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def pick_submitted(assignment: Assignment, language: str, files: list[Path]
                   ) -> dict[str, Path]:
    """Per notebook of ``assignment``, the submitted file to grade among ``files`` (a
    submission's ``<notebook>.ipynb`` and ``<notebook>.v<N>.ipynb``): the newest version the
    student changed (its fingerprint is no release's), else the newest version there is.
    Notebooks absent from ``files`` are absent from the result."""
    chosen = {}
    for stem in assignment.notebooks:
        released = set(assignment.released(language, stem).values())
        candidates = []
        for path in files:
            found = VERSIONED.fullmatch(path.name)
            if found and found["stem"] == stem:
                candidates.append((int(found["version"] or 0), path))
        candidates.sort(reverse=True)
        edited = []
        for _version, path in candidates:
            try:
                if fingerprint(json.loads(path.read_text(encoding="utf-8"))) not in released:
                    edited.append(path)
            except (OSError, ValueError, RecursionError):
                edited.append(path)  # unreadable: the grader reports it as such
        if candidates:
            chosen[stem] = edited[0] if edited else candidates[0][1]
    return chosen
