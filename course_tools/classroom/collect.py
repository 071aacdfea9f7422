"""``python -m course_tools hub collect HUBDIR OUT``: each student's latest submission
(``--notebook``: of that notebook only) with its time (``timestamp.txt``) and language
(``language.txt``), in nbgrader's layout with ``--assignment`` (a released one,
:mod:`.assignments`: its notebooks, its deadline, a correction graded under the notebook's name);
who did not submit, and who was late (against ``--deadline``, else the released assignment's).
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from course_tools.classroom.commands import HubCommand


def submission_time(folder_name: str) -> datetime | None:
    """The time in an exchange folder's name (``20261205T013702-1a2b3c``: the hub's local time)."""
    try:
        return datetime.strptime(folder_name.split("-", 1)[0], "%Y%m%dT%H%M%S")
    except ValueError:
        return None


def submissions(hub_dir: Path, student: str) -> list[tuple[datetime, Path]]:
    """A student's submissions in the exchange, oldest first: (its time, aware, in the hub's
    zone; its folder). A link there is no submission."""
    found = []
    for run in sorted((Path(hub_dir) / "exchange" / student).glob("*T*")):
        when = submission_time(run.name)
        if when is not None and run.is_dir() and not run.is_symlink():
            found.append((when.astimezone(), run))  # naive local time -> aware
    return found


def notebook_names(run: Path) -> list[str]:
    """The notebooks of one submission's folder."""
    return sorted(p.name for p in run.glob("*.ipynb"))


@dataclass(frozen=True)
class Collected:
    """One student's collected submission: ``folder`` None when there is none to collect."""

    student: str
    folder: Path | None
    time: datetime | None  # the submission's time (aware: the hub's local zone)
    late: timedelta | None  # past the deadline by (None: on time, or no deadline)
    notebooks: tuple[str, ...]


def _released(hub_dir: Path, assignment: str | None):
    """The released assignment ``assignment`` (hub release), or None (none named, or never
    released: a plain name for nbgrader's layout)."""
    if assignment is None:
        return None
    from course_tools.classroom import assignments as lifecycle

    if not lifecycle.path_of(hub_dir, assignment).is_file():
        return None
    return lifecycle.load(hub_dir, assignment)


def judged_deadline(hub_dir: Path, assignment: str | None, deadline: datetime | None
                    ) -> datetime | None:
    """The deadline :func:`collect` judges lateness by (aware): ``deadline`` (naive: the hub's
    local time), else the released assignment's; None without either."""
    if deadline is None:
        released = _released(hub_dir, assignment)
        deadline = released.deadline if released is not None else None
    if deadline is not None and deadline.tzinfo is None:
        deadline = deadline.astimezone()  # a naive deadline is the hub's local time
    return deadline


def collect(hub_dir: Path, out: Path, *, assignment: str | None = None,
            notebooks: list[str] | None = None, deadline: datetime | None = None
            ) -> list[Collected]:
    """Each student's latest submission (of ``notebooks``' stems, when given: the latest that
    holds one of them) into ``out/<student>/`` or, with ``assignment``, nbgrader's layout
    ``out/<student>/<assignment>/`` (``grade --student-ids-from-folders`` reads it when ``out``
    is named ``submitted``), with ``timestamp.txt`` (its time, as nbgrader's collect writes it)
    and ``language.txt`` (the grader's messages in the student's). One entry per student."""
    from course_tools.classroom.roster import USERNAME, _class
    from lectures_lib.languages import SUBMISSION_FILE

    if assignment is not None and not USERNAME.fullmatch(assignment.lower()):
        raise ValueError(f"assignment must be a plain name (letters, digits, _ or -), "
                         f"got {assignment!r}")
    wanted = None if not notebooks else {Path(name).stem for name in notebooks}
    released = _released(hub_dir, assignment)  # its notebooks, deadline, versions (or None)
    if released is not None:
        wanted = wanted or set(released.notebooks)
    deadline = judged_deadline(hub_dir, assignment, deadline)
    collected = []
    for student, language in sorted(_class(hub_dir).items()):
        chosen = None
        for when, run in reversed(submissions(hub_dir, student)):
            files = sorted((p.name, p) for p in run.glob("*.ipynb")
                           if p.is_file() and (wanted is None or p.stem in wanted))
            if released is not None:  # NAME.ipynb or a correction NAME.vN.ipynb, as NAME.ipynb
                from course_tools.classroom.assignments import pick_submitted

                picked = pick_submitted(released, language, [
                    p for p in run.glob("*.ipynb") if p.is_file()])
                files = [(f"{stem}.ipynb", picked[stem]) for stem in sorted(picked)
                         if stem in wanted]
            if files:
                chosen = (when, files)
                break
        if chosen is None:
            collected.append(Collected(student, None, None, None, ()))
            continue
        when, files = chosen
        target = Path(out) / student / (assignment or "")
        target.mkdir(parents=True, exist_ok=True)
        for name, path in files:
            shutil.copyfile(path, target / name)
        (target / "timestamp.txt").write_text(when.isoformat(sep=" "))
        (target / SUBMISSION_FILE).write_text(language)  # the checkers speak it
        late = when - deadline if deadline is not None and when > deadline else None
        collected.append(Collected(student, target, when, late, tuple(n for n, _ in files)))
    return collected


def main(argv: list[str]) -> int:
    parser = HubCommand(
        "collect", "Each student's latest submission into OUT (then: python -m course_tools "
        "grade OUT), with its time (timestamp.txt); names who did not submit and who was late.")
    parser.add_argument("out", type=Path, help="e.g. submitted/ (then: python -m course_tools grade)")
    parser.add_argument("--assignment", default=None, metavar="NAME",
                        help="nbgrader's layout OUT/<student>/NAME/ (e.g. ps1; OUT named "
                        "submitted/, so grade --student-ids-from-folders and nbgrader read it); "
                        "a released assignment (hub release) brings its notebooks and deadline")
    parser.add_argument("--notebook", action="append", default=None, metavar="NAME",
                        help="collect only this notebook (e.g. 01_self_attention; repeatable): "
                        "the latest submission that holds it")
    parser.add_argument("--deadline", default=None, metavar="TIME",
                        help="ISO time (e.g. 2026-12-05T23:59, the hub's local time unless it "
                        "names a zone): submissions after it are listed as late (default: "
                        "a released assignment's own deadline)")
    args = parser.parse_hub(argv)
    deadline = None
    if args.deadline is not None:
        try:
            deadline = datetime.fromisoformat(args.deadline)
        except ValueError:
            parser.error(f"--deadline must be an ISO time like 2026-12-05T23:59, "
                         f"got {args.deadline!r}")
    try:
        rows = collect(args.hub_dir, args.out, assignment=args.assignment,
                       notebooks=args.notebook, deadline=deadline)
        deadline = judged_deadline(args.hub_dir, args.assignment, deadline)  # collect's own
    except ValueError as error:
        parser.error(str(error))
    for row in rows:
        if row.folder is None:
            print(f"{row.student}: no submission")
        else:
            late = f", LATE by {row.late}" if row.late else ""
            print(f"{row.student}: {row.folder} (submitted {row.time:%Y-%m-%d %H:%M:%S %z}"
                  f"{late}: {', '.join(row.notebooks)})")
    missing = [row.student for row in rows if row.folder is None]
    late = [row.student for row in rows if row.late]
    print(f"{len(rows) - len(missing)} of {len(rows)} collected; no submission: "
          f"{', '.join(missing) or 'none'}" + (
              f"; late: {', '.join(late) or 'none'} (deadline {deadline:%Y-%m-%d %H:%M:%S %z})"
              if deadline is not None else ""))
    return 0
