"""Feedback into each student's folder (issue 41): ``python -m course_tools hub feedback HUBDIR
NAME --reports FILE [--nbgrader COURSE_DIR]``.

After grading, each student who submitted finds ``~/course/feedback/<NAME>/feedback.md``: per
exercise the points and the checker's message (in the student's language: ``hub collect``
writes ``language.txt`` beside each submission and the grader speaks it), the written answers'
points and the grader's comments from nbgrader's formgrader (with ``--nbgrader``), the score
and the late penalty as the gradebook (:mod:`.gradebook`) has them. With ``--nbgrader``, the
HTML feedback of ``nbgrader generate_feedback`` (``COURSE_DIR/feedback/<student>/<NAME>/``) is
copied beside it. The files are written by a process running *as the student* (they are the
student's), the folder ``0700`` and each file ``0600``: no other student reads them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from course_tools.classroom.assignments import Assignment, load
from course_tools.classroom.commands import ASSIGNMENT_HELP, HubCommand

FOLDER = "feedback"  # ~/course/feedback/<assignment>/
MAX_HTML_BYTES = 8 * 2**20
WORDS = {
    "en": {"title": "Feedback: {name}", "submitted": "Submitted", "late": "late by",
           "score": "Score", "before": "{raw:g} before the late penalty of {penalty:g}",
           "exercise": "exercise", "points": "points", "message": "message",
           "hand": "graded by hand", "pending": "not graded yet", "comment": "comment"},
    "zh-Hans": {"title": "反馈：{name}", "submitted": "提交时间", "late": "迟交",
                "score": "得分", "before": "迟交扣分 {penalty:g} 之前为 {raw:g}",
                "exercise": "练习", "points": "分数", "message": "说明",
                "hand": "人工评分", "pending": "尚未评分", "comment": "评语"},
    "zh-Hant": {"title": "回饋：{name}", "submitted": "提交時間", "late": "遲交",
                "score": "得分", "before": "遲交扣分 {penalty:g} 之前為 {raw:g}",
                "exercise": "練習", "points": "分數", "message": "說明",
                "hand": "人工評分", "pending": "尚未評分", "comment": "評語"},
}
_EXERCISE = re.compile(r"(?P<exercise>.+-ex\d+)-(?:answer|test|solution)(?:-\d+)?")


def _cell(text: object) -> str:
    """One table cell of markdown: one line, no ``|``."""
    return " ".join(str(text).split()).replace("|", "\\|")


def hand_grades(course_dir: Path, assignment: str, student: str, notebook: str
                ) -> dict[str, tuple[float | None, str]]:
    """From nbgrader's gradebook: per exercise id (``01_self_attention-ex2``), the points given
    by hand (None: not yet) and the grader's comments."""
    from nbgrader.api import Gradebook, MissingEntry

    found: dict[str, tuple[float | None, str]] = {}
    with Gradebook(f"sqlite:///{Path(course_dir) / 'gradebook.db'}") as gradebook:
        try:
            submitted = gradebook.find_submission_notebook(notebook, assignment, student)
        except MissingEntry:
            return found
        for grade in submitted.grades:
            match = _EXERCISE.fullmatch(grade.name)
            if match and "-answer" in grade.name and grade.manual_score is not None:
                points, comment = found.get(match["exercise"], (0.0, ""))
                found[match["exercise"]] = ((points or 0.0) + grade.manual_score, comment)
        for comment in submitted.comments:
            match = _EXERCISE.fullmatch(comment.name)
            if match and comment.comment:
                points, text = found.get(match["exercise"], (None, ""))
                found[match["exercise"]] = (points, " ".join(filter(None, (text,
                                                                           comment.comment))))
    return found


def feedback_text(assignment: Assignment, language: str, reports: list[dict],
                  when: datetime | None, hand: dict[str, tuple[float | None, str]]) -> str:
    """The student's ``feedback.md``, in ``language``: ``reports`` are the course grader's for
    this student's notebooks; ``hand`` what :func:`hand_grades` found (may be empty)."""
    from course_tools.classroom.gradebook import max_score

    words = WORDS[language]
    lines = [f"# {words['title'].format(name=assignment.name)}", ""]
    late = assignment.late_by(when) if when is not None else None
    if when is not None:
        lines.append(f"{words['submitted']}: {when:%Y-%m-%d %H:%M:%S %z}"
                     + (f" ({words['late']} {late})" if late else ""))
    raw = sum(float(r["score"]) for r in reports) + sum(
        points for points, _ in hand.values() if points is not None)
    penalty = assignment.late_policy.penalty(raw, late)
    total = f"{words['score']}: {max(0.0, raw - penalty):g} / {max_score(assignment):g}"
    if penalty:
        total += " (" + words["before"].format(raw=raw, penalty=penalty) + ")"
    lines += [total, ""]
    for report in reports:
        lines += [f"## {_cell(report['notebook'] or report['submission'])}", "",
                  f"| {words['exercise']} | {words['points']} | {words['message']} |",
                  "|---|---|---|"]
        for row in report["exercises"]:
            title = _cell(f"{row['id']} {row['title']}")
            points, comment = hand.get(row["id"], (None, ""))
            if row["manual"]:
                given = words["pending"] if points is None else f"{points:g}"
                lines.append(f"| {title} | {given} / {row['max_points']:g} | {words['hand']} |")
            else:
                lines.append(f"| {title} | {row['points']:g} / {row['max_points']:g} | "
                             f"{_cell(row['message'])} |")
            if comment:
                lines.append(f"| | | {words['comment']}: {_cell(comment)} |")
        if report.get("error"):
            lines += ["", _cell(report["error"])]
        lines.append("")
    return "\n".join(lines)


def write_as(student: str, folder: Path, files: dict[str, str]) -> None:
    """Write ``files`` (name -> text) into ``folder`` as ``student`` (0700 folder, 0600 files)."""
    import pwd

    home = Path(pwd.getpwnam(student).pw_dir)
    result = subprocess.run(
        [sys.executable, "-I", "-m", "course_tools.classroom.handout", "_feedback"],
        input=json.dumps({"folder": str(folder), "files": files}), user=student, group=student,
        cwd=home, capture_output=True, text=True, timeout=120,
        env={"HOME": str(home), "PATH": os.environ.get("PATH", "")})
    if result.returncode != 0:
        raise RuntimeError(f"writing {student}'s feedback failed: {result.stderr[-800:]}")


def write_private(order: dict) -> list[str]:
    """As the student: ``order["files"]`` into ``order["folder"]``, folder 0700, files 0600 (a
    link the student planted is replaced, never followed)."""
    folder = Path(order["folder"])
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder.parent, 0o700)
    os.chmod(folder, 0o700)
    for name, text in order["files"].items():
        if Path(name).name != name or name.startswith("."):
            raise ValueError(f"a feedback file's name must be plain, got {name!r}")
        path = folder / name
        if path.is_symlink():
            path.unlink()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
    return sorted(order["files"])


def give_feedback(hub_dir: Path, name: str, reports_file: Path,
                  course_dir: Path | None = None) -> dict[str, list[str]]:
    """Write each submitter's feedback for assignment ``name`` (see the module doc); returns
    student -> the files written. Root only (it writes as each student)."""
    import pwd

    from course_tools.classroom.gradebook import from_reports, read_reports
    from course_tools.classroom.roster import _class

    assignment = load(hub_dir, name)
    classes = _class(hub_dir)
    reports = read_reports(reports_file, assignment.name)
    times = from_reports(reports)
    done = {}
    for student in sorted({r["student"] for r in reports}):
        if student not in classes:
            raise ValueError(f"a report for {student!r}, who is not in the class list")
        language = classes[student]
        mine = sorted((r for r in reports if r["student"] == student),
                      key=lambda r: str(r["notebook"]))
        hand: dict[str, tuple[float | None, str]] = {}
        files = {}
        if course_dir is not None:
            for stem in assignment.notebooks:
                hand |= hand_grades(course_dir, assignment.name, student, stem)
            html = Path(course_dir) / "feedback" / student / assignment.name
            for path in sorted(html.glob("*.html")) if html.is_dir() else []:
                if path.is_file() and path.stat().st_size <= MAX_HTML_BYTES:
                    files[path.name] = path.read_text(encoding="utf-8", errors="replace")
        files["feedback.md"] = feedback_text(assignment, language, mine, times[student][1],
                                             hand)
        home = Path(pwd.getpwnam(student).pw_dir)
        folder = home / "course" / FOLDER / assignment.name
        write_as(student, folder, files)
        done[student] = sorted(files)
    return done


def main(argv: list[str]) -> int:
    parser = HubCommand(
        "feedback", "Each submitter's feedback (points, the checker's message per exercise, "
        "the grader's comments) into their own ~/course/feedback/NAME/, readable only by them.",
        assignment=ASSIGNMENT_HELP, root="feedback is written into each student's folder as "
        "that student: run it as root")
    parser.add_argument("--reports", type=Path, required=True, metavar="FILE",
                        help="`python -m course_tools grade submitted/*/NAME --format json -o "
                        "FILE`'s output")
    parser.add_argument("--nbgrader", type=Path, default=None, metavar="COURSE_DIR",
                        help="nbgrader's course folder: the written answers' points and "
                        "comments from formgrader, and generate_feedback's HTML")
    args = parser.parse_hub(argv)
    try:
        done = give_feedback(args.hub_dir, args.assignment, args.reports, args.nbgrader)
    except (ValueError, FileNotFoundError, RuntimeError) as error:
        parser.error(str(error))
    for student, files in done.items():
        print(f"{student}: ~/course/{FOLDER}/{args.assignment}/ {', '.join(files)}")
    print(f"feedback for {len(done)} student(s)")
    return 0
