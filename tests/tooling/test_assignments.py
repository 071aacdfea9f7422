"""Assignments with a lifecycle (issue 41), without a hub: the data stored as JSON, the late
policy, the fingerprint that tells an edit from a run, the re-release rule (placing run here as
the current user; the system test runs it as real students) and which submitted file is graded."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from course_tools.classroom import assignments as A
from course_tools.classroom.handout import note, place

TAIPEI = timezone(timedelta(hours=8))


def _assignment(**changes) -> A.Assignment:
    fields = {"name": "ps1", "notebooks": ("01_self_attention",),
              "deadline": datetime(2026, 12, 12, 23, 59, tzinfo=TAIPEI),
              "late_policy": A.LatePolicy(0.1, 7)} | changes
    return A.Assignment(**fields)


def test_late_policy_costs_a_share_per_started_day_and_everything_past_its_limit():
    policy = A.LatePolicy(per_day=0.25, zero_after_days=3)
    assert policy.penalty(8, None) == 0 and policy.penalty(8, timedelta(0)) == 0
    assert policy.penalty(8, timedelta(minutes=1)) == pytest.approx(2)  # a started day
    assert policy.penalty(8, timedelta(days=1, seconds=1)) == pytest.approx(4)
    assert policy.penalty(8, timedelta(days=3)) == pytest.approx(6)
    assert policy.penalty(8, timedelta(days=3, seconds=1)) == 8  # past the limit: all of it
    assert A.LatePolicy().penalty(8, timedelta(days=30)) == 0  # no policy, no penalty
    assert A.LatePolicy(0.5).penalty(8, timedelta(days=5)) == 8  # never more than the score
    for bad in ({"per_day": 1.5}, {"per_day": -0.1}, {"per_day": True},
                {"zero_after_days": -1}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            A.LatePolicy(**bad)


def test_an_assignment_is_plain_json_with_an_aware_deadline(tmp_path):
    (tmp_path / "class.json").write_text("[]")
    first = _assignment(releases=(A.Release(1, "2026-12-01T10:00:00+08:00",
                                            {"en": {"01_self_attention": "abc"}}),))
    path = A.save(tmp_path, first)
    assert path == tmp_path / "assignments" / "ps1.json" and path.stat().st_mode & 0o077 == 0
    data = json.loads(path.read_text())
    assert data["deadline"] == "2026-12-12T23:59:00+08:00"
    assert data["late_policy"] == {"per_day": 0.1, "zero_after_days": 7}
    assert A.load(tmp_path, "ps1") == first
    assert [a.name for a in A.list_assignments(tmp_path)] == ["ps1"]
    with pytest.raises(FileNotFoundError, match="released: ps1"):
        A.load(tmp_path, "ps2")
    assert first.late_by(datetime(2026, 12, 12, 15, 58, tzinfo=timezone.utc)) is None
    assert first.late_by(datetime(2026, 12, 12, 16, 0, tzinfo=timezone.utc)) == timedelta(
        minutes=1)
    naive = A.parse_deadline("2026-12-12T23:59")
    assert naive.tzinfo is not None  # the hub's local time
    with pytest.raises(ValueError, match="deadline must be an ISO time"):
        A.parse_deadline("next friday")
    with pytest.raises(ValueError, match="timezone-aware"):
        _assignment(deadline=datetime(2026, 12, 12))
    with pytest.raises(ValueError, match="assignment name"):
        _assignment(name="../ps1")
    with pytest.raises(ValueError, match="01_self_attention"):
        _assignment(notebooks=("01_self_attention.ipynb",))


def _nb(source: str, output: str | None = None) -> dict:
    cell = {"id": "c1", "cell_type": "code", "source": source, "metadata": {},
            "execution_count": None,
            "outputs": [] if output is None else [{"output_type": "stream", "name": "stdout",
                                                   "text": output}]}
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_the_fingerprint_changes_with_an_edit_not_with_a_run():
    assert A.fingerprint(_nb("x = 1")) == A.fingerprint(_nb("x = 1", output="1\n"))
    assert A.fingerprint(_nb("x = 1")) != A.fingerprint(_nb("x = 2"))
    assert A.fingerprint(_nb(["x = ", "1"])) == A.fingerprint(_nb("x = 1"))


def _order(folder: Path, assignment: A.Assignment, nb: dict, earlier: list[str]) -> dict:
    return {"folder": str(folder), "version": assignment.version,
            "notebooks": {"01_self_attention": nb}, "earlier": {"01_self_attention": earlier},
            "note_name": "ASSIGNMENT-ps1.md",
            "note": {"language": "zh-Hant", "assignment": assignment.to_json()}}


def test_a_re_release_replaces_an_unedited_copy_and_puts_the_correction_beside_an_edited_one(
        tmp_path):
    v1, v2 = _nb("raise NotImplementedError()"), _nb("# corrected\nraise NotImplementedError()")
    one = _assignment(releases=(A.Release(1, "t", {"zh-Hant": {
        "01_self_attention": A.fingerprint(v1)}}),))
    untouched, edited = tmp_path / "untouched", tmp_path / "edited"
    for folder in (untouched, edited):
        assert place(_order(folder, one, v1, [A.fingerprint(v1)])) == {
            "01_self_attention": "written"}
        assert place(_order(folder, one, v1, [A.fingerprint(v1)])) == {
            "01_self_attention": "current"}
    work = json.dumps(_nb("def answer():\n    return 42", output="ran"))
    (edited / "01_self_attention.ipynb").write_text(work)
    two = _assignment(releases=(*one.releases, A.Release(2, "t", {"zh-Hant": {
        "01_self_attention": A.fingerprint(v2)}})))
    earlier = [A.fingerprint(v1), A.fingerprint(v2)]
    assert place(_order(untouched, two, v2, earlier)) == {"01_self_attention": "replaced"}
    assert A.fingerprint(json.loads((untouched / "01_self_attention.ipynb").read_text())) == \
        A.fingerprint(v2)
    assert place(_order(edited, two, v2, earlier)) == {"01_self_attention": "beside"}
    assert (edited / "01_self_attention.ipynb").read_text() == work  # byte for byte
    assert A.fingerprint(json.loads((edited / "01_self_attention.v2.ipynb").read_text())) == \
        A.fingerprint(v2)
    text = (edited / "ASSIGNMENT-ps1.md").read_text()
    assert "01_self_attention.v2.ipynb" in text and "截止時間" in text and "10%" in text
    assert "v2" not in (untouched / "ASSIGNMENT-ps1.md").read_text()
    # what the grader takes: the newest version the student changed, else the newest
    assert A.pick_submitted(two, "zh-Hant", [edited / "01_self_attention.ipynb",
                                             edited / "01_self_attention.v2.ipynb"]) == {
        "01_self_attention": edited / "01_self_attention.ipynb"}
    (edited / "01_self_attention.v2.ipynb").write_text(work)
    assert A.pick_submitted(two, "zh-Hant", [edited / "01_self_attention.ipynb",
                                             edited / "01_self_attention.v2.ipynb"]) == {
        "01_self_attention": edited / "01_self_attention.v2.ipynb"}
    assert A.pick_submitted(two, "zh-Hant", [untouched / "01_self_attention.ipynb"]) == {
        "01_self_attention": untouched / "01_self_attention.ipynb"}
    assert A.pick_submitted(two, "zh-Hant", [untouched / "02_other.ipynb"]) == {}


def test_the_note_speaks_the_students_language():
    assignment = _assignment(releases=(A.Release(1, "t", {}),))
    assert "Deadline: 2026-12-12 23:59 +0800" in note(assignment, "en", [])
    assert "loses 10% per started day, and scores 0 after 7 days" in note(assignment, "en", [])
    assert "截止时间：2026-12-12 23:59 +0800" in note(assignment, "zh-Hans", [])
    assert "迟交超过 7 天得 0 分" in note(assignment, "zh-Hans", [])


def test_the_student_version_comes_from_the_installed_course_in_each_language():
    english = A.student_version("01_self_attention", "en")
    chinese = A.student_version("01_self_attention", "zh-Hant")
    assert A.fingerprint(english) != A.fingerprint(chinese)
    text = json.dumps(english)
    assert "### BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    with pytest.raises(FileNotFoundError, match="not a course notebook"):
        A.student_version("99_nothing", "en")


def test_collect_of_a_released_assignment_takes_its_notebooks_its_deadline_and_the_edited_copy(
        tmp_path):
    from course_tools.classroom.collect import collect

    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "class.json").write_text(json.dumps([
        {"username": name, "language": "en"} for name in ("ann", "ben", "cai")]))
    v1, v2 = _nb("raise NotImplementedError()"), _nb("# corrected\nraise NotImplementedError()")
    deadline = datetime(2026, 12, 5, 12, 0).astimezone()
    A.save(hub, _assignment(deadline=deadline, releases=(
        A.Release(1, "t", {"en": {"01_self_attention": A.fingerprint(v1)}}),
        A.Release(2, "t", {"en": {"01_self_attention": A.fingerprint(v2)}}))))
    work = _nb("def answer():\n    return 42")

    def submit(student: str, stamp: str, files: dict[str, dict]) -> None:
        run = hub / "exchange" / student / f"{stamp}-abc123"
        run.mkdir(parents=True)
        for name, nb in files.items():
            (run / name).write_text(json.dumps(nb))

    # ann: on time, worked in her first copy and left the correction unedited
    submit("ann", "20261205T110000", {"01_self_attention.ipynb": work,
                                      "01_self_attention.v2.ipynb": v2,
                                      "02_multi_head_attention.ipynb": v1})
    # ben: late, worked in the correction; an earlier on-time submission of 02 only
    submit("ben", "20261205T100000", {"02_multi_head_attention.ipynb": work})
    submit("ben", "20261205T130500", {"01_self_attention.ipynb": v1,
                                      "01_self_attention.v2.ipynb": work})
    rows = {row.student: row for row in collect(hub, tmp_path / "submitted",
                                                 assignment="ps1")}
    assert rows["cai"].folder is None  # no submission
    assert rows["ann"].late is None and rows["ann"].notebooks == ("01_self_attention.ipynb",)
    assert rows["ben"].late == timedelta(hours=1, minutes=5)
    for student in ("ann", "ben"):
        folder = tmp_path / "submitted" / student / "ps1"
        assert sorted(p.name for p in folder.iterdir()) == ["01_self_attention.ipynb",
                                                            "language.txt", "timestamp.txt"]
        assert (folder / "language.txt").read_text() == "en"
        graded = json.loads((folder / "01_self_attention.ipynb").read_text())
        assert A.fingerprint(graded) == A.fingerprint(work)  # the copy the student edited
    stamp = datetime.fromisoformat((tmp_path / "submitted/ben/ps1/timestamp.txt").read_text())
    assert stamp == datetime(2026, 12, 5, 13, 5).astimezone()


@pytest.mark.parametrize("late_minutes", [None, 5])
def test_collects_summary_judges_by_the_released_deadline_without_deadline_on_the_command_line(
        tmp_path, capsys, late_minutes):
    """``hub collect --assignment ps1`` of a released assignment prints who was late against
    its own deadline, also when nobody was (``late: none``), with that deadline."""
    from course_tools.classroom.hub import main

    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "class.json").write_text(json.dumps([
        {"username": name, "language": "en"} for name in ("ann", "ben")]))
    deadline = datetime(2026, 12, 5, 12, 0).astimezone()
    A.save(hub, _assignment(deadline=deadline, releases=(
        A.Release(1, "t", {"en": {"01_self_attention": A.fingerprint(_nb("pass"))}}),)))
    when = deadline + timedelta(minutes=late_minutes or -5)
    run = hub / "exchange" / "ann" / f"{when:%Y%m%dT%H%M%S}-abc123"
    run.mkdir(parents=True)
    (run / "01_self_attention.ipynb").write_text(json.dumps(_nb("x = 1")))
    assert main(["collect", str(hub), str(tmp_path / "submitted"), "--assignment", "ps1"]) == 0
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("1 of 2 collected; no submission: ben; late: ")
    assert summary.endswith(f"late: {'ann' if late_minutes else 'none'} (deadline "
                            f"{deadline:%Y-%m-%d %H:%M:%S %z})"), summary
    capsys.readouterr()
    (hub / "assignments" / "ps1.json").unlink()  # a plain name, no deadline: no late list
    assert main(["collect", str(hub), str(tmp_path / "plain"), "--assignment", "ps1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "1 of 2 collected; no submission: ben"


@pytest.mark.slow  # nbgrader generate_assignment of the seven notebooks: about 30 s
def test_the_hubs_release_is_nbgraders_release_in_every_language(tmp_path):
    """Every graded or locked cell of the student version the hub releases (any language) has
    the nbgrader checksum of the cell ``nbgrader generate_assignment`` releases from the course's
    source; what autograde's "Attribute 'checksum' ... has changed!" warning reports on a locked
    test cell is nbgrader's own: its gradebook keeps the cell *with* its hidden tests (autograde
    puts them back from there), the release has them removed (jupyter/nbgrader#1961)."""
    import os
    import subprocess
    import sys

    pytest.importorskip("nbgrader")
    import nbformat
    from nbgrader import utils
    from nbgrader.api import Gradebook

    from course_tools.publish.exercises import release
    from lectures_lib.course import course_files

    notebooks = course_files() / "notebooks"
    (tmp_path / "nbgrader_config.py").write_text(
        f"c = get_config()\nc.CourseDirectory.root = r'{tmp_path}'\n")
    release(notebooks, tmp_path / "source" / "ps1", keep_solutions=True)  # the English edition
    assert not list((tmp_path / "source" / "ps1").glob("*/*.ipynb"))
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "ps1",
                           "--create", "--force"], cwd=tmp_path, env=env, capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    hidden = 0
    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        for path in sorted((tmp_path / "release" / "ps1").glob("*.ipynb")):
            theirs = {c.metadata.nbgrader["grade_id"]: c for c in nbformat.read(
                path, as_version=4).cells if "grade_id" in c.metadata.get("nbgrader", {})}
            for language in ("en", "zh-Hans", "zh-Hant"):
                ours = nbformat.reads(json.dumps(A.student_version(path.stem, language)), 4)
                cells = {c.metadata.nbgrader["grade_id"]: c for c in ours.cells
                         if "grade_id" in c.metadata.get("nbgrader", {})}
                assert cells.keys() == theirs.keys(), (path.stem, language)
                for grade_id, cell in cells.items():
                    meta = cell.metadata.nbgrader
                    if not (meta.get("locked") or meta.get("grade")):
                        continue
                    if language != "en" and not meta.get("locked"):
                        continue  # a written answer's question is in the student's language
                    assert utils.compute_checksum(cell) == theirs[grade_id].metadata.nbgrader[
                        "checksum"], (path.stem, language, grade_id)
            for grade_id, cell in theirs.items():
                stored = gradebook.find_source_cell(grade_id, path.stem, "ps1")
                if cell.metadata.nbgrader.get("locked") and "HIDDEN TESTS" in stored.source:
                    hidden += 1  # nbgrader's own checksum differs: the hidden tests
                    assert stored.checksum != cell.metadata.nbgrader["checksum"]
    assert hidden > 0


def test_a_release_to_a_student_without_an_account_writes_nothing(tmp_path):
    hub = tmp_path / "hub"
    hub.mkdir()
    (hub / "class.json").write_text(json.dumps([{"username": "nosuchuser41x",
                                                 "language": "en"}]))
    with pytest.raises(ValueError, match="'nosuchuser41x' has no Unix account"):
        A.release(hub, "ps1", ["01_self_attention"], deadline=datetime(2026, 12, 12, 23, 59))
    assert A.list_assignments(hub) == []
    with pytest.raises(ValueError, match="first release needs its notebooks and its deadline"):
        A.release(hub, "ps1")
    with pytest.raises(ValueError, match="students must be in the class list"):
        A.release(hub, "ps1", ["01_self_attention"], deadline=DEADLINE_FOR_TESTS,
                  students=["someone"])


DEADLINE_FOR_TESTS = datetime(2026, 12, 12, 23, 59, tzinfo=TAIPEI)
