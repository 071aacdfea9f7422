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
    lines = [f"{clean_text(report['submission'])} ({report['notebook'] or 'unknown notebook'}): "
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
    return "\n".join(clean_text(line) for line in lines)


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
        writer.writerow([clean_text(report["submission"]), report["notebook"] or "",
                         f"{report['score']:g}",
                         f"{report['max_score']:g}", f"{report['manual_max_score']:g}",
                         *(points.get(c, "") for c in columns), clean_text(report["error"])])
    return buffer.getvalue()


def format_nbgrader_csv(reports: list[dict], assignment: str | None = None) -> str:
    """The grades in the shape of ``nbgrader export``'s CSV (one row per submission).

    Columns ``assignment, duedate, timestamp, student_id, last_name, first_name, email,
    raw_score, late_submission_penalty, score, max_score``; the student id is the submission's
    file name up to the first ``_`` (``alice_05_transformer_decoder.ipynb`` -> ``alice``), the
    assignment the course notebook (or ``assignment``). Automatic points only, as nbgrader's
    autograde before manual grading.
    """
    if not isinstance(reports, (list, tuple)):
        raise TypeError(f"reports must be a list of report dicts, got {type(reports).__name__}")
    for i, report in enumerate(reports):
        _check_report(report, f"reports[{i}]")
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["assignment", "duedate", "timestamp", "student_id", "last_name",
                     "first_name", "email", "raw_score", "late_submission_penalty", "score",
                     "max_score"])
    for report in reports:
        name = Path(clean_text(report["submission"])).name
        student = name.split("_")[0] if "_" in name else Path(name).stem
        course = assignment or Path(report["notebook"] or "").stem
        writer.writerow([course, "", "", student, "", "", "", f"{report['score']:g}", "0.0",
                         f"{report['score']:g}", f"{report['max_score']:g}"])
    return buffer.getvalue()


def to_json(report: dict) -> str:
    return json.dumps(report, ensure_ascii=False)


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
