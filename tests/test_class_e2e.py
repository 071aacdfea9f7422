"""A term end to end, as the README's class section gives it, from the built wheel (issue 41).

The wheel is built (sdist, then the wheel from it, as ``tests/test_installed_course.py`` does) and
installed with its ``class``, ``grading`` and ``cluster`` extras into a fresh virtual environment
of the system's Python in a folder outside the repository (pip's cache and its configured wheel
folders make this minutes, not a download); every command then runs that environment's
``python -m course_tools`` from that folder, with nothing of the clone on ``sys.path`` (checked).
Then the README's sequence: a hub for three students in three languages (en, zh-CN, zh-TW) and an
instructor; ``hub release`` of assignment ps1 (notebook 01) with a deadline and a late policy;
two students log in with Chromium, write their answer to notebook 01's first exercise in
JupyterLab (one wrong, one right), save and submit from JupyterLab's Course menu, the second
after the deadline;
the third does not submit; ``hub collect`` names the missing and the late; ``grade`` grades only
that notebook locally and then on a two-worker Dask cluster over mutual TLS (``grading-tls``),
with the same scores; ``hub feedback`` writes into each submitter's folder; the gradebook CSV
has one row per student, the late policy applied; ``hub remove-class`` ends
the term. Skips, naming what is missing: root, the system's Python, the hub's proxy,
bubblewrap, Chromium. About 12 minutes on 2 shared cores (the install about 3, removing the
environment 2); each step's seconds are printed at the end.
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat
import pytest

from .browser_helpers import require_playwright
from .conftest import require_system_package
from .hub_helpers import exists, free_ports, remove_users, stop_group, wait_for
from .test_installed_course import _clean_env, wheel  # noqa: F401 - the wheel fixture

pytestmark = [pytest.mark.system, pytest.mark.slow]
for _package in ("configurable-http-proxy", "bubblewrap", "chromium"):
    require_system_package(_package, module_level=True)
sync_api = require_playwright()

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
TAG = f"e2e{os.getpid() % 10000}"
# the class list: the one who submits on time, the late one, the one who never submits
ON_TIME, LATE, MISSING = f"{TAG}a", f"{TAG}b", f"{TAG}c"
STUDENTS = {ON_TIME: "en", LATE: "zh-CN", MISSING: "zh-TW"}
FOLDERS = {"en": "student", "zh-CN": "student/zh-Hans", "zh-TW": "student/zh-Hant"}
ADMIN = f"{TAG}t"
ASSIGNMENT, NOTEBOOK = "ps1", "01_self_attention"
SOLUTION_ID = f"{NOTEBOOK}-ex1-solution"
NOTE_TITLE = {"en": f"# Assignment {ASSIGNMENT}", "zh-CN": f"# 作业 {ASSIGNMENT}",
              "zh-TW": f"# 作業 {ASSIGNMENT}"}
# seconds from the release to the deadline: the on-time student's login, answer and submission
# fit in it (the test says so when they do not); the late student submits after it
DEADLINE_S = 240
TIMES: dict[str, float] = {}  # each step's seconds, printed at the end (the README's figures)


class _Clock:
    def __init__(self, step: str):
        self.step = step

    def __enter__(self):
        self.start = time.monotonic()

    def __exit__(self, *_):
        TIMES[self.step] = round(time.monotonic() - self.start, 1)


def _run(command: list[str], cwd: Path, env: dict, timeout: float = 900) -> str:
    result = subprocess.run(command, capture_output=True, text=True, cwd=cwd, env=env,
                            timeout=timeout)
    assert result.returncode == 0, (f"{command} failed:\n{result.stdout[-3000:]}\n"
                                    f"{result.stderr[-3000:]}")
    return result.stdout


@pytest.fixture(scope="module")
def installed(wheel):  # noqa: F811
    """(folder, venv): the wheel with its extras in a fresh environment of the system's Python
    (one the students' accounts can execute), in a folder outside the repository."""
    if os.geteuid() != 0:
        pytest.skip("the class test runs as root (Unix users for the students)")
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"the class test needs the system's {SYSTEM_PYTHON} (students execute it)")
    folder = Path(tempfile.mkdtemp(prefix="course-e2e-", dir="/tmp"))
    os.chmod(folder, 0o711)  # the students' servers run the environment's Python below it
    assert not folder.is_relative_to(ROOT)
    venv = folder / "venv"
    env = _clean_env(venv)
    torch = re.search(r'"(torch==[^"]+)"', (ROOT / "pyproject.toml").read_text()).group(1)
    try:
        with _Clock("install (venv, torch, the wheel with [class,grading,cluster])"):
            _run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], folder, env)
            pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
            # torch as pip's configuration finds it (a CPU wheel folder or index); then the
            # wheel, its dependencies from pip's cache where it holds them
            _run([*pip, torch], folder, env)
            _run([*pip, "--find-links", str(wheel.parent),
                  f"lectures_lib[class,grading,cluster]=={wheel.name.split('-')[1]}"],
                 folder, env)
        yield folder, venv
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _solution() -> str:
    """The course's own answer to 01's first exercise (what the on-time student types)."""
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, "-m", "course_tools", "source", NOTEBOOK, out],
                       check=True, capture_output=True)
        nb = nbformat.read(Path(out) / f"{NOTEBOOK}.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SOLUTION_ID]
    return re.sub(r"^\s*### (BEGIN|END) SOLUTION\n", "", cell.source, flags=re.M)


WRONG = '''def my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):
    """A wrong answer: the values, unweighted."""
    return v, None
'''


def _log_in_and_write(browser, url: str, name: str, password: str, language: str,
                      answer: str | None):
    """A student's session in JupyterLab: log in (the hub starts their server), find the
    released assignment's note and notebook in their language; with ``answer``, open the
    notebook, write the answer into the exercise's cell and save. Returns (context, page)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    listing = page.locator(".jp-DirListing-content")
    item = listing.locator(".jp-DirListing-item", has_text=f"{NOTEBOOK}.ipynb")
    item.wait_for(timeout=240_000)
    sync_api.expect(listing).to_contain_text(f"ASSIGNMENT-{ASSIGNMENT}.md")
    crumbs = page.locator(".jp-BreadCrumbs").inner_text()
    assert FOLDERS[language].split("/")[-1] in crumbs, (language, crumbs)
    if answer is None:
        return context, page
    item.dblclick()
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.wait_for(timeout=60_000)
    sync_api.expect(page.locator(".jp-StatusBar-Widget")).to_contain_text(
        re.compile(r"course sandbox\) \| Idle"), timeout=120_000)
    cell = panel.locator(".jp-CodeCell", has_text="raise NotImplementedError").first
    cell.scroll_into_view_if_needed()  # (JupyterLab renders the cells in view)
    sync_api.expect(cell).to_contain_text("def my_additive_attention", timeout=30_000)
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(answer)
    page.keyboard.press("Escape")
    page.keyboard.press("Control+s")
    sync_api.expect(page.locator(".lm-TabBar-tab.jp-mod-current")).not_to_have_class(
        re.compile("jp-mod-dirty"), timeout=30_000)
    return context, page


# the Course menu of the students' JupyterLab and its submit item, in each language
MENU = {"en": ("Course", "Submit an assignment…"), "zh-CN": ("课程", "提交作业…"),
        "zh-TW": ("課程", "提交作業…")}


def _submit(context, page, language: str) -> None:
    """From JupyterLab: Course > Save All, then Course > Submit an assignment… (the submit
    page, in a new tab, in the student's language): choose ps1, submit, confirm."""
    menu, item = MENU[language]
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).click()
    page.locator(".lm-Menu-itemLabel", has_text="Save All").click()
    page.locator(".lm-MenuBar-itemLabel", has_text=menu).click()
    with context.expect_page() as opened:
        page.locator(".lm-Menu-itemLabel", has_text=item).click()
    submit = opened.value
    submit.wait_for_load_state()
    submit.check(f"input[value='{ASSIGNMENT}']")
    submit.click("#submit")
    sync_api.expect(submit.locator("#notebooks")).to_have_text(f"{NOTEBOOK}.ipynb")
    submit.click("#confirm")
    sync_api.expect(submit.locator("#message")).to_contain_text(ASSIGNMENT, timeout=60_000)
    sync_api.expect(submit.locator("#message")).to_contain_text(NOTEBOOK)
    submit.close()


def _saved_answer(name: str, language: str) -> str:
    home = Path(pwd.getpwnam(name).pw_dir)
    nb = nbformat.read(home / "course" / FOLDERS[language] / f"{NOTEBOOK}.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.metadata.get("nbgrader", {}).get("grade_id") == SOLUTION_ID]
    return cell.source


def test_a_term_from_the_wheel_release_submit_collect_grade_and_remove(installed, browser):
    folder, venv = installed
    env = _clean_env(venv)
    python = str(venv / "bin" / "python")

    def course(*args: str, timeout: float = 900) -> str:
        return _run([python, "-m", "course_tools", *args], folder, env, timeout=timeout)

    # nothing of the clone: the course and its tools come from the environment's site-packages
    where = _run([python, "-c", "import sys, course_tools, lectures_lib; print(course_tools."
                  "__file__); print(lectures_lib.__file__); print('\\n'.join(sys.path))"],
                 folder, env).split()
    assert all(not Path(p).resolve().is_relative_to(ROOT) for p in where if p), where
    assert all(Path(p).is_relative_to(venv) for p in where[:2]), where

    for name in [*STUDENTS, ADMIN]:
        assert not exists(name), f"test user {name} already exists"
    (folder / "class.csv").write_text(
        "username,language\n" + "".join(f"{n},{lang}\n" for n, lang in STUDENTS.items()))
    port = free_ports()
    url = f"http://127.0.0.1:{port}"
    log = (folder / "hub.log").open("w")
    hub = subprocess.Popen([python, "-m", "course_tools", "hub", "class.csv", "--dir", "hub",
                            "--port", str(port), "--create-users", "--admin", ADMIN],
                           cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
                           start_new_session=True)
    hub_dir = folder / "hub"
    contexts = []
    try:
        with _Clock("hub up"):
            wait_for(f"{url}/hub/login", hub, folder / "hub.log")
        with (hub_dir / "passwords.csv").open() as file:
            passwords = {row["username"]: row["password"] for row in csv.DictReader(file)}
        assert passwords.keys() == STUDENTS.keys()

        # release assignment 1 (notebook 01) with a deadline DEADLINE_S from now, to each
        # student in their language
        deadline = (datetime.datetime.now().astimezone() + datetime.timedelta(
            seconds=DEADLINE_S)).replace(microsecond=0)
        with _Clock("release"):
            released = course("hub", "release", "hub", ASSIGNMENT, NOTEBOOK, "--deadline",
                              deadline.isoformat(), "--late-per-day", "0.1")
        for name, language in STUDENTS.items():
            home = Path(pwd.getpwnam(name).pw_dir) / "course" / FOLDERS[language]
            assert (home / f"{NOTEBOOK}.ipynb").stat().st_uid == pwd.getpwnam(name).pw_uid
            assert NOTE_TITLE[language] in (home / f"ASSIGNMENT-{ASSIGNMENT}.md").read_text(
                encoding="utf-8"), released

        # two students submit from JupyterLab, one before the deadline, one after; the third
        # logs in and does not submit
        with _Clock("on-time student: login, answer, save, submit"):
            context, page = _log_in_and_write(browser, url, ON_TIME, passwords[ON_TIME],
                                              STUDENTS[ON_TIME], WRONG)
            contexts.append(context)
            _submit(context, page, STUDENTS[ON_TIME])
        assert datetime.datetime.now().astimezone() < deadline, (
            f"the on-time student's steps took longer than the {DEADLINE_S} s to the deadline")
        with _Clock("late student: login, answer, save"):
            late_context, late_page = _log_in_and_write(browser, url, LATE, passwords[LATE],
                                                        STUDENTS[LATE], _solution())
            contexts.append(late_context)
        with _Clock("third student: login only"):
            contexts.append(_log_in_and_write(browser, url, MISSING, passwords[MISSING],
                                              STUDENTS[MISSING], None)[0])
        # submission times are kept to the second (timestamp.txt): submit a clear second after
        while datetime.datetime.now().astimezone() <= deadline + datetime.timedelta(seconds=2):
            time.sleep(1)
        with _Clock("late student: submit"):
            _submit(late_context, late_page, STUDENTS[LATE])
        assert "return v, None" in _saved_answer(ON_TIME, STUDENTS[ON_TIME])
        assert "raise NotImplementedError" not in _saved_answer(LATE, STUDENTS[LATE])

        # collect: the missing and the late named
        with _Clock("collect"):
            collected = course("hub", "collect", "hub", "submitted", "--assignment", ASSIGNMENT)
        assert re.search(rf"^{MISSING}: no submission", collected, re.M), collected
        assert re.search(rf"^{LATE}: .*LATE by", collected, re.M), collected
        assert not re.search(rf"^{ON_TIME}: .*LATE", collected, re.M), collected
        assert re.search(rf"no submission: {MISSING}; late: {LATE}\b", collected), collected
        for name in (ON_TIME, LATE):
            got = sorted(p.name for p in (folder / "submitted" / name / ASSIGNMENT).glob(
                "*.ipynb"))
            assert got == [f"{NOTEBOOK}.ipynb"], (name, got)  # only that assignment's notebook
        assert not (folder / "submitted" / MISSING / ASSIGNMENT).exists()

        # grade that assignment only, locally: one report per submitter
        (folder / "grading-secret").write_bytes(os.urandom(32))
        handed_in = sorted(str(p.relative_to(folder)) for p in folder.glob(
            f"submitted/*/{ASSIGNMENT}"))  # the shell's submitted/*/ps1
        with _Clock("grade locally (2 submissions)"):
            course("grade", *handed_in, "--secret-file", "grading-secret", "--format", "json",
                   "--output", "reports.jsonl", "--quiet")
        local = _reports(folder / "reports.jsonl")
        assert local.keys() == {ON_TIME, LATE}, local  # only 01, only the two who submitted
        assert local[LATE][0] == local[LATE][1] > 0, local  # the course's answer: full marks
        assert local[ON_TIME][0] == 0 < local[ON_TIME][1], local  # the wrong one: none

        # and on a 2-worker Dask cluster over mutual TLS: the same scores
        with _Clock("grade on a 2-worker Dask cluster over TLS"):
            cluster = _grade_on_cluster(folder, venv, env, handed_in)
        assert cluster == local, (cluster, local)

        # feedback into each submitter's own folder, in their language; none for the missing
        with _Clock("feedback"):
            course("hub", "feedback", "hub", ASSIGNMENT, "--reports", "reports.jsonl")
        for name, (title, late_words) in {ON_TIME: (f"# Feedback: {ASSIGNMENT}", None),
                                          LATE: (f"# 反馈：{ASSIGNMENT}", "迟交")}.items():
            user = pwd.getpwnam(name)
            path = Path(user.pw_dir) / "course" / "feedback" / ASSIGNMENT / "feedback.md"
            assert path.stat().st_uid == user.pw_uid and path.stat().st_mode & 0o077 == 0
            text = path.read_text(encoding="utf-8")
            assert text.startswith(title) and "01_self_attention-ex1" in text, text
            score, top = local[name]
            assert f"| {score:g} / {top:g} |" in text, text  # the exercise's points
            assert (late_words in text) if late_words else ("(late by" not in text), text
        assert not (Path(pwd.getpwnam(MISSING).pw_dir) / "course" / "feedback").exists()

        # the gradebook: every student of the class, the late policy applied
        with _Clock("gradebook"):
            course("hub", "gradebook", "hub", ASSIGNMENT, "--reports", "reports.jsonl",
                   "--output", f"gradebook-{ASSIGNMENT}.csv")
        with (folder / f"gradebook-{ASSIGNMENT}.csv").open(newline="") as file:
            rows = {row["student_id"]: row for row in csv.DictReader(file)}
        assert rows.keys() == STUDENTS.keys(), rows
        assert {row["assignment"] for row in rows.values()} == {ASSIGNMENT}, rows
        late, on_time, missing = rows[LATE], rows[ON_TIME], rows[MISSING]
        assert float(late["raw_score"]) == local[LATE][0], late
        assert float(late["late_submission_penalty"]) == pytest.approx(0.1 * local[LATE][0])
        assert float(late["score"]) == pytest.approx(0.9 * local[LATE][0]), late
        assert float(on_time["late_submission_penalty"]) == 0 == float(on_time["score"])
        assert missing["timestamp"] == "" and float(missing["score"]) == 0, missing
        assert len({row["max_score"] for row in rows.values()}) == 1
        assert float(late["max_score"]) > local[LATE][1]  # the written answers count too

        # the end of term: the hub stopped, the class's users and their homes removed
        _stop(hub, contexts)
        with _Clock("remove-class"):
            removed = course("hub", "remove-class", "hub", "--remove-homes")
        assert re.search(r"removed users: (.*)", removed), removed
        assert all(not exists(name) for name in STUDENTS), removed
    finally:
        _stop(hub, contexts)
        log.close()
        remove_users(STUDENTS, check=False)  # what a failure left behind
        print((folder / "hub.log").read_text()[-4000:])
        print(json.dumps(TIMES, indent=1))


def _stop(hub: subprocess.Popen, contexts: list) -> None:
    """Close the students' browsers, stop the hub (its proxy, services, servers) and whatever
    the students still run (a kernel can outlive its hub: issue 38)."""
    while contexts:
        contexts.pop().close()
    if hub.poll() is None:
        stop_group(hub)
    for name in STUDENTS:
        subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
    time.sleep(1)


def _reports(path: Path) -> dict[str, tuple[float, float]]:
    """{student: (score, max_score)} from the grader's JSON lines (the student: the folder of
    submitted/<student>/ps1/, as hub collect wrote it)."""
    found = {}
    for line in path.read_text().splitlines():
        report = json.loads(line)
        student = Path(report["submission"]).parent.parent.name
        assert student not in found, f"two reports for {student}"
        found[student] = (float(report["score"]), float(report["max_score"]))
    return found


def _grade_on_cluster(folder: Path, venv: Path, env: dict, submissions: list[str]) -> dict:
    """The README's cluster commands: grading-tls, a scheduler, two workers (root may run them
    here, on this throwaway machine only), grade --scheduler; the gradebook's scores."""
    python, dask = str(venv / "bin" / "python"), str(venv / "bin" / "dask")
    _run([python, "-m", "course_tools", "grading-tls", "tls"], folder, env)
    port = free_ports(1)
    address = f"tls://127.0.0.1:{port}"

    def tls(role: str) -> list[str]:
        return ["--tls-ca-file", f"tls/{role}/ca.pem", "--tls-cert", f"tls/{role}/cert.pem",
                "--tls-key", f"tls/{role}/key.pem"]

    worker_env = dict(env, LECTURES_GRADING_SECRET_FILE=str(folder / "grading-secret"),
                      LECTURES_GRADING_WORKER_AS_ROOT="unsafe")
    logs, processes = [], []
    try:
        for index, command in enumerate([
                [dask, "scheduler", "--protocol", "tls", "--host", "127.0.0.1", "--port",
                 str(port), "--no-dashboard", *tls("scheduler")],
                [dask, "worker", address, "--nthreads", "1", *tls("worker")],
                [dask, "worker", address, "--nthreads", "1", *tls("worker")]]):
            logs.append((folder / f"dask{index}.log").open("w"))
            processes.append(subprocess.Popen(command, cwd=folder, stdout=logs[-1],
                                              stderr=subprocess.STDOUT, start_new_session=True,
                                              env=worker_env if index else env))
            if index == 0:
                time.sleep(3)
        _wait_for_workers(python, address, folder, env, 2)
        _run([python, "-m", "course_tools", "grade", *submissions, "--scheduler", address,
              "--tls", "tls/client", "--secret-file", "grading-secret", "--format", "json",
              "--output", "cluster.jsonl", "--quiet"], folder, env)
        return _reports(folder / "cluster.jsonl")
    finally:
        for process in reversed(processes):
            stop_group(process)
        for file in logs:
            file.close()


def _wait_for_workers(python: str, address: str, folder: Path, env: dict, count: int) -> None:
    code = ("import sys; from distributed import Client; from distributed.security import "
            "Security; s = Security(tls_ca_file='tls/client/ca.pem', tls_client_cert="
            "'tls/client/cert.pem', tls_client_key='tls/client/key.pem', require_encryption="
            f"True); c = Client('{address}', security=s, timeout=60); c.wait_for_workers({count},"
            " timeout=120); print(len(c.scheduler_info()['workers']))")
    out = _run([python, "-c", code], folder, env, timeout=240)
    assert out.strip() == str(count), out
