"""One gradebook CSV per assignment, the same from either grader (issue 41): ``python -m
course_tools hub gradebook HUBDIR NAME (--reports FILE | --nbgrader COURSE_DIR) -o FILE``.

The columns are ``nbgrader export``'s (:data:`COLUMNS`), one row per student of the class (a
student without a submission: an empty timestamp and 0, as nbgrader's), numbers written as
nbgrader writes them (``str(float)``), times as naive UTC (nbgrader's database keeps them so):

* ``assignment``: the released assignment's name (``ps1``), never a notebook's;
* ``duedate``: its deadline; ``timestamp``: the submission's time (``timestamp.txt`` beside it,
  written by ``hub collect``; nbgrader's database holds the same, read by its autograde);
* ``raw_score``: the points earned, automatic and (once graded by hand in nbgrader's formgrader)
  written answers; ``late_submission_penalty``: the assignment's :class:`~.assignments.LatePolicy`
  applied here, to either grader's raw score, so both agree (nbgrader's own late plugin is not
  used: it would need the policy twice); ``score = max(0, raw - penalty)``;
* ``max_score``: every point of the assignment's notebooks, automatic *and* written answers
  (nbgrader's ``max_score``), read from the course's notebooks (:func:`max_score`).

From the course grader: its JSON lines (``grade submitted/*/NAME --format json -o FILE``), each
report's student being the ``<student>`` folder of ``submitted/<student>/NAME/NB.ipynb`` (the
layout ``hub collect --assignment NAME`` writes from the class list; never a file's name). From
nbgrader: its ``gradebook.db`` after ``nbgrader autograde`` (and formgrader).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from datetime import datetime, timezone
from pathlib import Path

from course_tools.classroom.assignments import Assignment, load
from course_tools.classroom.commands import ASSIGNMENT_HELP, HubCommand

COLUMNS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name",
           "email", "raw_score", "late_submission_penalty", "score", "max_score")
MAX_REPORTS_BYTES = 64 * 2**20


def max_score(assignment: Assignment) -> float:
    """Every point of the assignment: its notebooks' exercises, automatic and by hand (the sum
    of nbgrader's grade cells' points, as ``generate_assignment`` records them)."""
    import nbformat

    from course_tools.publish.exercises import find_exercises
    from lectures_lib.course import course_files

    total = 0.0
    for stem in assignment.notebooks:
        nb = nbformat.read(course_files() / "notebooks" / f"{stem}.ipynb", as_version=4)
        total += sum(exercise.points for exercise in find_exercises(nb))
    return total


def _utc(when: datetime | None) -> str:
    """nbgrader's way of writing a time: naive UTC, ``str(datetime)``."""
    if when is None:
        return ""
    return str(when.astimezone(timezone.utc).replace(tzinfo=None))


def _number(value: float) -> str:
    return str(round(float(value), 6))


def gradebook_csv(assignment: Assignment, students: list[str],
                  scores: dict[str, tuple[float, datetime | None]], maximum: float) -> str:
    """The CSV: one row per student of ``students`` (sorted); ``scores[student]`` = (raw score,
    the submission's aware time) for those who submitted."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    for student in sorted(students):
        raw, when = scores.get(student, (0.0, None))
        late = assignment.late_by(when) if when is not None else None
        penalty = assignment.late_policy.penalty(raw, late)
        writer.writerow([assignment.name, _utc(assignment.deadline), _utc(when), student, "", "",
                         "", _number(raw), _number(penalty), _number(max(0.0, raw - penalty)),
                         _number(maximum)])
    return buffer.getvalue()


def read_reports(path: Path, assignment: str) -> list[dict]:
    """The course grader's JSON lines, each with the student of its ``submitted/<student>/
    <assignment>/`` path (``student``); a report of another assignment's folder is refused."""
    from course_tools.grading._report import check_student_id

    path = Path(path)
    if not path.is_file() or path.stat().st_size > MAX_REPORTS_BYTES:
        raise ValueError(f"reports must be the JSON lines file of `grade --format json` (at "
                         f"most {MAX_REPORTS_BYTES >> 20} MiB), got {path}")
    reports = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        report = json.loads(line)
        parts = Path(report["submission"]).parts
        if len(parts) < 4 or parts[-4] != "submitted" or parts[-2] != assignment:
            raise ValueError(f"{path}, line {number}: {report['submission']!r} is not in the "
                             f"layout submitted/<student>/{assignment}/NOTEBOOK.ipynb that "
                             f"`hub collect --assignment {assignment}` writes")
        report["student"] = check_student_id(parts[-3], f"{path}, line {number}")
        reports.append(report)
    return reports


def from_reports(reports: list[dict]) -> dict[str, tuple[float, datetime | None]]:
    """Per student: the sum of their notebooks' scores and the submission's time."""
    from course_tools.grading._report import submission_timestamp

    scores: dict[str, tuple[float, datetime | None]] = {}
    for report in reports:
        stamp = submission_timestamp(report["submission"])
        when = datetime.fromisoformat(stamp) if stamp else None
        if when is not None and when.tzinfo is None:
            when = when.astimezone()
        raw, _ = scores.get(report["student"], (0.0, None))
        scores[report["student"]] = (raw + float(report["score"]), when)
    return scores


def from_nbgrader(course_dir: Path, assignment: str
                  ) -> tuple[dict[str, tuple[float, datetime | None]], float]:
    """Per student with a submission in nbgrader's ``gradebook.db``: (raw score, time); and the
    assignment's maximum as nbgrader recorded it."""
    from nbgrader.api import Gradebook, MissingEntry

    database = Path(course_dir) / "gradebook.db"
    if not database.is_file():
        raise ValueError(f"no nbgrader gradebook in {course_dir} (gradebook.db): run nbgrader "
                         "generate_assignment and autograde there first")
    scores = {}
    with Gradebook(f"sqlite:///{database}") as gradebook:
        try:
            recorded = gradebook.find_assignment(assignment)
        except MissingEntry:
            raise ValueError(f"nbgrader's gradebook in {course_dir} has no assignment "
                             f"{assignment!r}") from None
        maximum = float(recorded.max_score)
        for submission in recorded.submissions:
            when = submission.timestamp
            if when is not None:
                when = when.replace(tzinfo=timezone.utc)  # nbgrader keeps naive UTC
            scores[submission.student_id] = (float(submission.score), when)
    return scores, maximum


def main(argv: list[str]) -> int:
    parser = HubCommand(
        "gradebook", "One gradebook CSV for a released assignment, in nbgrader export's "
        "columns, the late policy applied; from the course grader's JSON lines or nbgrader's "
        "gradebook.", assignment=ASSIGNMENT_HELP)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--reports", type=Path, metavar="FILE",
                        help="`python -m course_tools grade submitted/*/NAME --format json -o "
                        "FILE`'s output")
    source.add_argument("--nbgrader", type=Path, metavar="COURSE_DIR",
                        help="nbgrader's course folder (its gradebook.db), after autograde")
    parser.add_argument("--output", "-o", type=Path, default=None,
                        help="the CSV file (default: standard output)")
    args = parser.parse_hub(argv)
    from course_tools.classroom.roster import _class
    from course_tools.grading._report import write_atomic

    try:
        assignment = load(args.hub_dir, args.assignment)
        maximum = max_score(assignment)
        if args.reports is not None:
            scores = from_reports(read_reports(args.reports, assignment.name))
        else:
            scores, recorded = from_nbgrader(args.nbgrader, assignment.name)
            if abs(recorded - maximum) > 1e-9:
                parser.error(f"nbgrader's {assignment.name} is worth {recorded:g} points, the "
                             f"course's notebooks {maximum:g}: generate it from `python -m "
                             f"course_tools source` of {', '.join(assignment.notebooks)}")
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    students = sorted(_class(args.hub_dir))
    strangers = sorted(set(scores) - set(students))
    if strangers:
        parser.error(f"scores for students not in the class list: {strangers}")
    text = gradebook_csv(assignment, students, scores, maximum)
    if args.output is None:
        sys.stdout.write(text)
    else:
        write_atomic(args.output, text)
        print(f"wrote {len(students)} rows to {args.output}", file=sys.stderr)
    return 0
