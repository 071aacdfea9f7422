"""The grade command's reports: a table for a terminal, a CSV gradebook, nbgrader's export shape,
JSON; terminal control characters removed.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import tempfile
from pathlib import Path

# Terminal control: CSI/OSC escape sequences first, then every other C0/C1 control character.
_ESCAPES = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-_])")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean_text(text: object) -> str:
    """``text`` without terminal escape sequences or control characters (tabs, newlines kept)."""
    return _CONTROL.sub("", _ESCAPES.sub("", str(text)))


# What ends or bends a line somewhere: C0/C1 controls (newline, carriage return, tab, escape,
# NEL) and Unicode's line and paragraph separators (str.splitlines breaks at each of them).
_BREAKS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: object) -> str:
    """``text`` on one line: every control character and line separator written as its Python
    escape (``\\n``, ``\\x1b``, ``\\u2028``), so a submission's name or message (a file name may
    hold a newline) cannot forge a line of a report, or colour a terminal."""
    return _BREAKS.sub(lambda found: repr(found.group())[1:-1], str(text))


def _cell(text: object) -> str:
    """A gradebook cell from text the submission may choose: one line (a tab or CR escaped), and
    never a formula (a cell a spreadsheet reads as one, starting = + - or @, gets a leading ')."""
    text = one_line(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


_REPORT_KEYS = ("submission", "notebook", "score", "max_score", "manual_max_score", "error",
                "exercises")


def _check_report(report: object, name: str = "report") -> None:
    """A report as :func:`grade_submission` returns it."""
    if not isinstance(report, dict):
        raise TypeError(f"{name} must be a report dict from grade_submission, got "
                        f"{type(report).__name__}")
    missing = [key for key in _REPORT_KEYS if key not in report]
    if missing:
        raise ValueError(f"{name} must be a report from grade_submission (keys "
                         f"{list(_REPORT_KEYS)}), missing {missing}")


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(clean_text(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _failed_report(path: Path, reason: str) -> dict:
    return {"submission": clean_text(path), "notebook": None, "score": 0.0, "max_score": 0.0,
            "manual_max_score": 0.0, "error": _short(reason), "exercises": []}


def format_table(report: dict) -> str:
    """A per-exercise table for a terminal."""
    _check_report(report)
    lines = [f"{one_line(report['submission'])} ({report['notebook'] or 'unknown notebook'}): "
             f"{report['score']:g} / {report['max_score']:g} automatic points"
             + (f", + {report['manual_max_score']:g} graded by hand"
                if report["manual_max_score"] else "")]
    if report["error"]:
        lines.append(f"  note: {report['error']}")
    lines.append(f"  {'exercise':<30} {'points':>9}  {'passed':<6}  message")
    for row in report["exercises"]:
        passed = "hand" if row["manual"] else ("yes" if row["passed"] else "no")
        points = f"{row['points']:g}/{row['max_points']:g}"
        lines.append(f"  {row['id']:<30} {points:>9}  {passed:<6}  {_short(row['message'], 160)}")
    return "\n".join(one_line(line) for line in lines)  # each name and message: one line


def format_csv(reports: list[dict]) -> str:
    """A gradebook: one row per submission, one column per exercise (automatic points)."""
    if not isinstance(reports, (list, tuple)):
        raise TypeError(f"reports must be a list of report dicts, got {type(reports).__name__}")
    for i, report in enumerate(reports):
        _check_report(report, f"reports[{i}]")
    columns = []
    for report in reports:
        for row in report["exercises"]:
            if row["id"] not in columns:
                columns.append(row["id"])
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["submission", "notebook", "score", "max_score", "manual_max_score",
                     *columns, "error"])
    for report in reports:
        points = {row["id"]: ("hand" if row["manual"] else f"{row['points']:g}")
                  for row in report["exercises"]}
        writer.writerow([_cell(report["submission"]), _cell(report["notebook"] or ""),
                         f"{report['score']:g}",
                         f"{report['max_score']:g}", f"{report['manual_max_score']:g}",
                         *(points.get(c, "") for c in columns), _cell(report["error"] or "")])
    return buffer.getvalue()


# A student id as nbgrader and a gradebook take it: a user name or an address, starting with a
# letter or digit (never a formula's = + - @), no space, comma, quote or control character.
_STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}")


def check_student_id(student_id: object, name: str = "student_id") -> str:
    """``student_id`` if it is a plain identifier (see :data:`_STUDENT_ID`), else ValueError."""
    if not isinstance(student_id, str) or not _STUDENT_ID.fullmatch(student_id):
        raise ValueError(f"{name} must be a plain student id (letters, digits and . _ @ + -, "
                         f"starting with a letter or digit, at most 100), got "
                         f"{one_line(repr(student_id))[:80]}")
    return student_id


def submission_timestamp(submission: object) -> str:
    """The time ``hub collect`` (or nbgrader's collect) wrote in ``timestamp.txt`` beside a
    submission, as an ISO time; "" when there is none or it is not a time."""
    from datetime import datetime

    try:
        path = Path(str(submission)).parent / "timestamp.txt"
        text = path.read_text(encoding="utf-8")[:100].strip() if path.is_file() else ""
        return datetime.fromisoformat(text).isoformat(sep=" ") if text else ""
    except (OSError, ValueError):
        return ""


def format_nbgrader_csv(reports: list[dict], student_ids: list[str],
                        assignment: str | None = None) -> str:
    """The grades in the shape of ``nbgrader export``'s CSV (one row per submission).

    Columns ``assignment, duedate, timestamp, student_id, last_name, first_name, email,
    raw_score, late_submission_penalty, score, max_score``. ``student_ids[i]`` is the id of
    ``reports[i]``, from a source the instructor holds (``grade --student-ids`` or nbgrader's
    ``submitted/<student>/`` folders: :mod:`._student_ids`), never from the file's name, which
    the student chose; each must be a plain identifier (:func:`check_student_id`), one row per
    student and assignment. The assignment is the course notebook (or ``assignment``); the
    timestamp is the submission's time from ``timestamp.txt`` beside it (``hub collect``). Every
    text cell is one line and never a formula. The score is the automatic points (as nbgrader's
    autograde before manual grading), ``max_score`` every point, written answers too, and the
    numbers are written as nbgrader writes them (``4.0``), so the two agree; one CSV per
    assignment, the late policy applied, is ``hub gradebook`` (:mod:`course_tools.classroom.
    gradebook`).
    """
    if not isinstance(reports, (list, tuple)):
        raise TypeError(f"reports must be a list of report dicts, got {type(reports).__name__}")
    for i, report in enumerate(reports):
        _check_report(report, f"reports[{i}]")
    if not isinstance(student_ids, (list, tuple)) or len(student_ids) != len(reports):
        raise ValueError(f"student_ids must be a list of one id per report ({len(reports)}), "
                         f"got {type(student_ids).__name__} of "
                         f"{len(student_ids) if isinstance(student_ids, (list, tuple)) else '?'}")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["assignment", "duedate", "timestamp", "student_id", "last_name",
                     "first_name", "email", "raw_score", "late_submission_penalty", "score",
                     "max_score"])
    seen: dict[tuple[str, str], str] = {}
    for i, (report, student) in enumerate(zip(reports, student_ids)):
        student = check_student_id(student, f"student_ids[{i}]")
        course = assignment or Path(report["notebook"] or "").stem
        if course and (student, course) in seen:  # (an unread file names no assignment)
            raise ValueError(f"student_ids: {student!r} has two submissions for {course!r} "
                             f"({one_line(seen[student, course])} and "
                             f"{one_line(report['submission'])}): one row each, please")
        seen[student, course] = str(report["submission"])
        stamp = _cell(submission_timestamp(report["submission"]))
        score, most = (str(round(float(report[key]), 6)) for key in ("score", "max_score"))
        if report["manual_max_score"]:  # nbgrader's max_score: written answers' points too
            most = str(round(float(report["max_score"]) + float(report["manual_max_score"]), 6))
        writer.writerow([_cell(course), "", stamp, student, "", "", "", score, "0.0", score, most])
    return buffer.getvalue()


def to_json(report: dict) -> str:
    """``report`` as one line of JSON: newlines in its strings are escaped by JSON itself, and
    the line breaks JSON leaves as they are (NEL, U+2028, U+2029) are escaped here."""
    text = json.dumps(report, ensure_ascii=False)
    return text.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace(
        "\u2029", "\\u2029")


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that a reader (or a crash) sees the old file or the whole
    new one, never a part: a temporary file beside it, flushed to disk, then ``os.replace``
    (atomic on POSIX and Windows within one file system). The temporary file is removed if
    anything fails; the file gets the usual permissions (0666 less the umask)."""
    path = Path(path)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as file:
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
