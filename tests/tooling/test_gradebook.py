"""One gradebook CSV per assignment (issue 41), without grading: nbgrader export's columns, one row
per student of the class, the late policy applied to the raw score, every point of the
assignment as the maximum, and the course grader's reports read by their collected layout only.
(tests/test_assignment_term.py compares it from both graders on the same real submissions.)"""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timedelta, timezone

import pytest

from course_tools.classroom import assignments as A
from course_tools.classroom import gradebook as G

DEADLINE = datetime(2026, 12, 12, 23, 59, tzinfo=timezone(timedelta(hours=8)))


def _rows(text: str) -> dict[str, dict]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(text))}


def test_the_gradebook_has_nbgrader_exports_columns_and_applies_the_late_policy():
    assignment = A.Assignment("ps1", ("01_self_attention",), DEADLINE, A.LatePolicy(0.25, 2))
    scores = {"ann": (4.0, DEADLINE - timedelta(hours=1)),
              "ben": (4.0, DEADLINE + timedelta(hours=30)),  # 2 started days: half
              "cai": (3.0, DEADLINE + timedelta(days=2, seconds=1))}  # past the limit: 0
    text = G.gradebook_csv(assignment, ["dee", "cai", "ben", "ann"], scores, 8.0)
    assert text.splitlines()[0] == ",".join(G.COLUMNS)
    rows = _rows(text)
    assert list(rows) == ["ann", "ben", "cai", "dee"]
    assert {r["assignment"] for r in rows.values()} == {"ps1"}
    assert {r["duedate"] for r in rows.values()} == {"2026-12-12 15:59:00"}  # naive UTC
    assert {r["max_score"] for r in rows.values()} == {"8.0"}
    assert (rows["ann"]["raw_score"], rows["ann"]["late_submission_penalty"],
            rows["ann"]["score"]) == ("4.0", "0.0", "4.0")
    assert rows["ann"]["timestamp"] == "2026-12-12 14:59:00"
    assert (rows["ben"]["late_submission_penalty"], rows["ben"]["score"]) == ("2.0", "2.0")
    assert (rows["cai"]["late_submission_penalty"], rows["cai"]["score"]) == ("3.0", "0.0")
    assert (rows["dee"]["timestamp"], rows["dee"]["score"]) == ("", "0.0")  # no submission


def test_the_maximum_counts_written_answers_too():
    import nbformat

    from course_tools.publish.exercises import find_exercises
    from lectures_lib.course import course_files

    nb = nbformat.read(course_files() / "notebooks" / "01_self_attention.ipynb", as_version=4)
    exercises = find_exercises(nb)
    automatic = sum(e.points for e in exercises if e.tests)
    by_hand = sum(e.points for e in exercises if not e.tests)
    assert automatic > 0 and by_hand > 0
    assignment = A.Assignment("ps1", ("01_self_attention",), DEADLINE)
    assert G.max_score(assignment) == automatic + by_hand


def test_reports_are_read_by_their_collected_layout_only(tmp_path):
    folder = tmp_path / "submitted" / "ann" / "ps1"
    folder.mkdir(parents=True)
    (folder / "timestamp.txt").write_text("2026-12-12 23:00:00+08:00")
    report = {"submission": str(folder / "01_self_attention.ipynb"), "score": 4.0}
    lines = tmp_path / "grades.jsonl"
    lines.write_text(json.dumps(report) + "\n" + json.dumps(
        report | {"submission": str(folder / "02_multi_head_attention.ipynb"),
                  "score": 1.5}) + "\n")
    scores = G.from_reports(G.read_reports(lines, "ps1"))
    assert scores == {"ann": (5.5, datetime(2026, 12, 12, 23, 0, tzinfo=timezone(
        timedelta(hours=8))))}
    with pytest.raises(ValueError, match="submitted/<student>/ps2/"):
        G.read_reports(lines, "ps2")
    lines.write_text(json.dumps(report | {"submission": str(tmp_path / "bob_01.ipynb")}))
    with pytest.raises(ValueError, match="layout"):
        G.read_reports(lines, "ps1")


def test_feedback_speaks_the_students_language_and_is_written_private(tmp_path):
    from course_tools.classroom.feedback import feedback_text, write_private

    assignment = A.Assignment("ps1", ("01_self_attention",), DEADLINE, A.LatePolicy(0.5))
    report = {"submission": "submitted/bob/ps1/01_self_attention.ipynb",
              "notebook": "01_self_attention.ipynb", "score": 0.0, "error": "",
              "exercises": [
                  {"id": "01_self_attention-ex1", "title": "additive | attention", "points": 0.0,
                   "max_points": 4.0, "manual": False,
                   "message": "[FAILED] additive_attention: 未通过。函数还没有实现"},
                  {"id": "01_self_attention-ex2", "title": "temperature", "points": 0.0,
                   "max_points": 2.0, "manual": True, "message": "graded by hand"}]}
    text = feedback_text(assignment, "zh-Hans", [report], DEADLINE + timedelta(hours=2),
                         {"01_self_attention-ex2": (1.5, "Right direction")})
    assert text.startswith("# 反馈：ps1")
    assert "0 / 4 | [FAILED] additive_attention: 未通过。函数还没有实现" in text
    assert "additive \\| attention" in text  # a title cannot break the table
    assert "1.5 / 2 | 人工评分" in text and "评语: Right direction" in text
    assert "迟交扣分 0.75 之前为 1.5" in text  # one started day late: half of 1.5
    pending = feedback_text(assignment, "en", [report], DEADLINE, {})
    assert "not graded yet / 2" in pending and "late by" not in pending
    folder = tmp_path / "course" / "feedback" / "ps1"
    (tmp_path / "elsewhere").write_text("keep")
    folder.mkdir(parents=True)
    (folder / "feedback.md").symlink_to(tmp_path / "elsewhere")  # planted: replaced, not followed
    assert write_private({"folder": str(folder), "files": {"feedback.md": text}}) == [
        "feedback.md"]
    assert (tmp_path / "elsewhere").read_text() == "keep"
    assert (folder / "feedback.md").read_text() == text
    assert (folder / "feedback.md").stat().st_mode & 0o777 == 0o600
    assert folder.stat().st_mode & 0o777 == 0o700 and folder.parent.stat().st_mode & 0o777 == 0o700
    with pytest.raises(ValueError, match="plain"):
        write_private({"folder": str(folder), "files": {"../x.md": "no"}})
