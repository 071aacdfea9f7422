"""An assignment through its lifecycle with real Unix students and the real nbgrader (issue 41):
release → edit → re-release a corrected notebook → submit (one late, one not at all) → collect
→ grade (the course grader, in its sandbox; nbgrader in the sandboxed kernel) → grade a written
answer by hand in nbgrader's formgrader (its server and HTTP API) → feedback into each
submitter's folder, the checkers' messages in the student's language in both graders' feedback
→ one gradebook CSV, the same from both graders.

Four students (en, zh-CN, zh-TW who does not submit, zh-TW who does) are made by ``hub --create-users --config-only`` and removed
by ``hub remove-class --remove-homes``. No hub runs: what a student does in JupyterLab is done as
that Unix user (their edits written by a process of theirs; the submit service's ``submit``,
which reads their folder as them). Skips, naming what is missing: root, bubblewrap, nbgrader, a
sandbox."""

from __future__ import annotations

import csv
import io
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import nbformat
import pytest

from course_tools.grading.sandbox import sandbox_problem

from .conftest import require_system_package

pytestmark = [pytest.mark.system, pytest.mark.slow]
require_system_package("bubblewrap", module_level=True)
pytest.importorskip("nbgrader", reason="nbgrader is the optional extra '.[grading]'")
if sandbox_problem():
    pytest.skip(f"the lifecycle test grades in the sandbox: {sandbox_problem()}",
                allow_module_level=True)

from .hub_helpers import class_python, exists  # noqa: E402

TAG = f"lc{os.getpid() % 10000}"
ALICE, BOB, CHEN, DAI = f"{TAG}a", f"{TAG}b", f"{TAG}c", f"{TAG}d"
LANGUAGES = {ALICE: "en", BOB: "zh-CN", CHEN: "zh-TW", DAI: "zh-TW"}
NOTEBOOK = "01_self_attention"
FOLDERS = {ALICE: "student", BOB: "student/zh-Hans", CHEN: "student/zh-Hant",
           DAI: "student/zh-Hant"}
# A checker's verdict as CheckResult's HTML shows it (nbgrader's feedback keeps that output):
# "<b>additive_attention: 通過</b>", in the student's language.
VERDICT = re.compile(r"<b>\w+: (passed|failed|通过|未通过|通過|未通過)</b>")
CORRECT = '''import sys
import course_tools.classroom.assignments as A
from course_tools.classroom.handout import main

original = A.student_version


def corrected(stem, language):  # the instructor's correction: a note at the end
    nb = original(stem, language)
    nb["cells"].append({"id": "correction", "cell_type": "markdown", "metadata": {},
                        "source": "Correction: the window in exercise 3 is 9 tokens wide."})
    return nb


A.student_version = corrected
raise SystemExit(main(sys.argv[1:]))
'''


def _run(python: Path, *args: str, cwd: Path, env: dict | None = None) -> str:
    result = subprocess.run([str(python), *args], cwd=cwd, capture_output=True, text=True,
                            env=env, timeout=900)
    assert result.returncode == 0, f"{args[:4]}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result.stdout


def _write_as(python: Path, student: str, path: Path, text: str) -> None:
    """The student saves a file (a process of theirs writes it)."""
    subprocess.run([str(python), "-I", "-c", "import sys; open(sys.argv[1], 'w', "
                    "encoding='utf-8').write(sys.stdin.read())", str(path)], input=text,
                   user=student, group=student, check=True, text=True, cwd="/")


def _solved(released: Path, language: str) -> str:
    """The released notebook with the reference solutions typed in (what a correct student
    writes), from the course's notebook of the same language."""
    from course_tools.publish.copy import LANGUAGE_FOLDERS
    from course_tools.publish.exercises import annotate_notebook
    from lectures_lib.course import course_files

    course = annotate_notebook(nbformat.read(
        course_files() / "notebooks" / LANGUAGE_FOLDERS[language] / f"{NOTEBOOK}.ipynb", 4),
        NOTEBOOK)
    mine = nbformat.read(released, 4)
    for index, cell in enumerate(course.cells):
        if cell.metadata.get("nbgrader", {}).get("solution") and cell.cell_type == "code":
            mine.cells[index].source = cell.source
    return nbformat.writes(mine)


def _answered(released: Path) -> str:
    """The released notebook with one written answer and no code solved."""
    mine = nbformat.read(released, 4)
    for cell in mine.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == f"{NOTEBOOK}-ex2-answer":
            cell.source = cell.source.replace("YOUR ANSWER HERE", "T 很小时权重更尖锐。")
    return nbformat.writes(mine)


def _csv(text: str) -> dict[str, dict]:
    return {row["student_id"]: row for row in csv.DictReader(io.StringIO(text))}


def _grade_by_hand(course: Path, env: dict, student: str, grade_name: str, points: float,
                   comment: str) -> None:
    """What an instructor does in formgrader: its page (a Jupyter server with nbgrader's
    formgrader extension, in the course folder) lists the written answer as waiting for a
    human, renders the submission, and stores the points and the comment through its API."""
    import signal
    import socket

    requests = pytest.importorskip("requests")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = os.urandom(16).hex()
    log = (course / "formgrader.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter", "server", f"--ServerApp.token={token}",
         f"--port={port}", "--ServerApp.ip=127.0.0.1", "--allow-root", "--no-browser"],
        cwd=course, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url, session = f"http://127.0.0.1:{port}/formgrader", requests.Session()
    session.headers["Authorization"] = f"token {token}"
    try:
        for _ in range(120):
            try:
                listed = session.get(f"{url}/api/submitted_notebooks/ps1/{NOTEBOOK}", timeout=5)
                if listed.status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert server.poll() is None, (course / "formgrader.log").read_text()[-3000:]
            time.sleep(0.5)
        mine = next(s for s in listed.json() if s["student"] == student)
        page = session.get(f"{url}/submissions/{mine['id']}/", timeout=30)
        assert page.status_code == 200 and grade_name in page.text  # the answer, to grade
        grades = session.get(f"{url}/api/grades", params={"submission_id": mine["id"]},
                             timeout=30).json()
        grade = next(g for g in grades if g["name"] == grade_name)
        assert grade["needs_manual_grade"] and grade["manual_score"] is None
        session.get(f"{url}/", timeout=30)  # the page's _xsrf cookie, as a browser gets it
        session.headers["X-XSRFToken"] = session.cookies["_xsrf"]
        stored = session.put(f"{url}/api/grade/{grade['id']}", json={"manual_score": points},
                             timeout=30)
        assert stored.status_code == 200 and stored.json()["manual_score"] == points
        comments = session.get(f"{url}/api/comments", params={"submission_id": mine["id"]},
                               timeout=30).json()
        note = next(c for c in comments if c["name"] == grade_name)
        stored = session.put(f"{url}/api/comment/{note['id']}",
                             json={"manual_comment": comment}, timeout=30)
        assert stored.status_code == 200, stored.text[:500]
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
        log.close()


def test_release_submit_collect_grade_feedback_and_one_gradebook_from_both_graders():
    if os.geteuid() != 0:
        pytest.skip("the students are Unix users: run as root")
    assert not any(exists(name) for name in LANGUAGES), f"test users {TAG}* exist"
    folder = Path(tempfile.mkdtemp(prefix="course-lifecycle-", dir="/tmp"))
    os.chmod(folder, 0o711)
    (folder / "class.csv").write_text("username,language\n" + "".join(
        f"{name},{language}\n" for name, language in LANGUAGES.items()))
    python = class_python(folder)
    hub = folder / "hub"
    course = folder / "course"  # nbgrader's course folder; hub collect writes its submitted/
    try:
        _run(python, "-m", "course_tools", "hub", str(folder / "class.csv"), "--dir", str(hub),
             "--create-users", "--config-only", cwd=folder)
        homes = {name: Path(pwd.getpwnam(name).pw_dir) for name in LANGUAGES}

        # 1. release: each student's language, the note beside it
        printed = _run(python, "-m", "course_tools", "hub", "release", str(hub), "ps1", NOTEBOOK,
                       "--deadline", (datetime.now() + timedelta(days=1)).isoformat(
                           timespec="seconds"), "--late-per-day", "0.5", cwd=folder)
        assert all(f"{name}: {NOTEBOOK} written" in printed for name in LANGUAGES), printed
        released = {name: homes[name] / "course" / FOLDERS[name] / f"{NOTEBOOK}.ipynb"
                    for name in LANGUAGES}
        for name, path in released.items():
            assert path.stat().st_uid == pwd.getpwnam(name).pw_uid  # the student's file
        assert "截止時間" in (released[CHEN].parent / "ASSIGNMENT-ps1.md").read_text()
        assert "练习" in released[BOB].read_text(encoding="utf-8")  # the zh-CN edition

        # 2. alice and dai solve the code, bob answers in writing only, chen does nothing
        alice_work = _solved(released[ALICE], "en")
        _write_as(python, ALICE, released[ALICE], alice_work)
        _write_as(python, DAI, released[DAI], _solved(released[DAI], "zh-Hant"))
        _write_as(python, BOB, released[BOB], _answered(released[BOB]))
        submit = ("import sys; from pathlib import Path; from course_tools.classroom.submit "
                  "import submit; print(submit(Path(sys.argv[1]), sys.argv[2]))")
        _run(python, "-c", submit, str(hub), ALICE, cwd=folder)
        _run(python, "-c", submit, str(hub), DAI, cwd=folder)

        # 3. a corrected notebook, and the deadline now: alice's and bob's work kept, chen's
        # untouched copy replaced
        deadline = datetime.now() + timedelta(seconds=2)
        printed = _run(python, "-c", CORRECT, "release", str(hub), "ps1", "--deadline",
                       deadline.isoformat(timespec="seconds"), cwd=folder)
        assert "version 2" in printed, printed
        assert f"{ALICE}: {NOTEBOOK} beside" in printed and f"{CHEN}: {NOTEBOOK} replaced" in \
            printed, printed
        assert released[ALICE].read_text(encoding="utf-8") == alice_work  # byte for byte
        beside = released[ALICE].with_name(f"{NOTEBOOK}.v2.ipynb")
        assert "Correction:" in beside.read_text() and beside.stat().st_uid == pwd.getpwnam(
            ALICE).pw_uid
        assert f"{NOTEBOOK}.v2.ipynb" in (released[ALICE].parent / "ASSIGNMENT-ps1.md").read_text()
        assert "Correction:" in released[CHEN].read_text(encoding="utf-8")
        time.sleep(max(0.0, (deadline - datetime.now()).total_seconds()) + 1.5)
        _run(python, "-c", submit, str(hub), BOB, cwd=folder)  # late

        # 4. collect: the released deadline, the missing and the late, nbgrader's layout
        printed = _run(python, "-m", "course_tools", "hub", "collect", str(hub),
                       str(course / "submitted"), "--assignment", "ps1", cwd=folder)
        assert f"no submission: {CHEN}; late: {BOB}" in printed, printed
        for name in (ALICE, BOB, DAI):
            assert sorted(p.name for p in (course / "submitted" / name / "ps1").iterdir()) == [
                f"{NOTEBOOK}.ipynb", "language.txt", "timestamp.txt"]

        # 5. the course grader: only this assignment's notebook, messages in the language
        _run(python, "-m", "course_tools", "grade", str(course / "submitted"), "--format",
             "json", "--output", str(folder / "grades.jsonl"), "--quiet", cwd=folder)
        reports = {Path(r["submission"]).parts[-3]: r for r in map(
            json.loads, (folder / "grades.jsonl").read_text().splitlines())}
        assert sorted(reports) == [ALICE, BOB, DAI]
        assert reports[ALICE]["score"] == reports[ALICE]["max_score"] > 0
        assert reports[DAI]["score"] == reports[ALICE]["score"]
        assert reports[BOB]["score"] == 0
        bob_ex1 = next(r for r in reports[BOB]["exercises"] if r["id"] == f"{NOTEBOOK}-ex1")
        assert "未通过" in bob_ex1["message"], bob_ex1  # zh-CN's checker verdict

        # 6. nbgrader: source, generate, autograde in the sandboxed kernel
        from course_tools.grading.sandbox import kernel as sandbox_kernel

        kernels = folder / "kernels"
        assert sandbox_kernel.main(["--install", "--prefix", str(kernels)]) == 0
        (course / "nbgrader_config.py").write_text(
            f'c = get_config()\nc.CourseDirectory.root = r"{course}"\n'
            f'c.CourseDirectory.course_id = "attention"\nc.ExecutePreprocessor.timeout = 300\n'
            f"{sandbox_kernel.CONFIG_LINE}\n")
        env = dict(os.environ, JUPYTER_PATH=str(kernels / "share" / "jupyter"),
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
        _run(python, "-m", "course_tools", "source", NOTEBOOK, str(course / "source" / "ps1"),
             cwd=course)
        for step in (["generate_assignment", "ps1", "--create", "--force"],
                     ["autograde", "ps1", "--create", "--force"]):
            _run(Path(sys.executable), "-m", "nbgrader", *step, cwd=course, env=env)

        # 7. one gradebook, the same from both graders (before any hand grading)
        gradebook = ["-m", "course_tools", "hub", "gradebook", str(hub), "ps1"]
        ours = _run(python, *gradebook, "--reports", str(folder / "grades.jsonl"), cwd=folder)
        theirs = _run(python, *gradebook, "--nbgrader", str(course), cwd=folder)
        assert ours == theirs, f"course grader:\n{ours}\nnbgrader:\n{theirs}"
        rows = _csv(ours)
        assert rows[CHEN]["timestamp"] == "" and rows[CHEN]["score"] == "0.0"
        assert rows[ALICE]["late_submission_penalty"] == "0.0"
        _run(Path(sys.executable), "-m", "nbgrader", "export", cwd=course, env=env)
        exported = _csv((course / "grades.csv").read_text())
        from course_tools.grading._report import format_nbgrader_csv

        per_notebook = _csv(format_nbgrader_csv([reports[n] for n in (ALICE, BOB, DAI)],
                                                [ALICE, BOB, DAI]))
        for name in (ALICE, BOB, DAI):  # nbgrader's own export: the same names, points and maxima
            assert {k: exported[name][k] for k in ("assignment", "raw_score", "max_score")} == \
                {k: rows[name][k] for k in ("assignment", "raw_score", "max_score")}
            # and grade --format nbgrader-csv (one notebook: its row is the assignment's)
            assert {k: per_notebook[name][k] for k in ("raw_score", "max_score")} == \
                {k: exported[name][k] for k in ("raw_score", "max_score")}

        # 8. a written answer graded by hand in nbgrader's formgrader (its own server and API,
        # what its page sends), then nbgrader's feedback
        _grade_by_hand(course, env, BOB, f"{NOTEBOOK}-ex2-answer", 1.5,
                       "Right direction; say why.")
        _run(Path(sys.executable), "-m", "nbgrader", "generate_feedback", "ps1", cwd=course,
             env=env)
        rows = _csv(_run(python, *gradebook, "--nbgrader", str(course), cwd=folder))
        assert (rows[BOB]["raw_score"], rows[BOB]["late_submission_penalty"],
                rows[BOB]["score"]) == ("1.5", "0.75", "0.75")  # half off: one day late

        # 9. feedback into each submitter's folder, theirs alone
        printed = _run(python, "-m", "course_tools", "hub", "feedback", str(hub), "ps1",
                       "--reports", str(folder / "grades.jsonl"), "--nbgrader", str(course),
                       cwd=folder)
        assert "feedback for 3 student(s)" in printed, printed
        for name in (ALICE, BOB, DAI):
            box = homes[name] / "course" / "feedback" / "ps1"
            assert box.stat().st_mode & 0o777 == 0o700 and box.stat().st_uid == pwd.getpwnam(
                name).pw_uid
            files = sorted(p.name for p in box.iterdir())
            assert files == [f"{NOTEBOOK}.html", "feedback.md"], files
            for path in box.iterdir():
                assert path.stat().st_mode & 0o777 == 0o600
                assert path.stat().st_uid == pwd.getpwnam(name).pw_uid
        alice_text = (homes[ALICE] / "course/feedback/ps1/feedback.md").read_text()
        assert "PASSED" in alice_text and "# Feedback: ps1" in alice_text
        bob_text = (homes[BOB] / "course/feedback/ps1/feedback.md").read_text()
        assert "# 反馈：ps1" in bob_text and "未通过" in bob_text
        assert "1.5 / 2" in bob_text and "Right direction; say why." in bob_text
        assert "迟交扣分 0.75" in bob_text
        dai_text = (homes[DAI] / "course/feedback/ps1/feedback.md").read_text()
        assert "# 回饋：ps1" in dai_text and "通過" in dai_text and "通过" not in dai_text
        # nbgrader's HTML feedback: its kernel ran each notebook in the student's language
        # (language.txt beside the submission), so the checkers' verdicts are theirs
        verdicts = {name: {m for m in VERDICT.findall(
            (homes[name] / f"course/feedback/ps1/{NOTEBOOK}.html").read_text())}
            for name in (ALICE, BOB, DAI)}
        assert verdicts == {ALICE: {"passed"}, BOB: {"未通过"}, DAI: {"通過"}}, verdicts
        assert not (homes[CHEN] / "course" / "feedback").exists()
    finally:
        subprocess.run([str(python) if "python" in locals() else sys.executable, "-m",
                        "course_tools", "hub", "remove-class", str(hub), "--remove-homes"],
                       cwd=folder, capture_output=True)
        for name in LANGUAGES:  # what remove-class could not (e.g. the hub's set-up failed)
            if exists(name):
                subprocess.run(["userdel", "--remove", name], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
