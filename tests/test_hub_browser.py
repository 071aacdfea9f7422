"""A JupyterHub for a class, in a real browser (issue 30): two students, each on their own copies.

``python -m course_tools hub`` (what ``make hub`` runs) starts JupyterHub on 127.0.0.1 with a
class list of two students, created here as real Unix users (and removed afterwards). Headless
Chromium (tests/browser_helpers.py) logs each in with their own password; each server opens on
that student's copies in their language; a cell runs in the course's sandboxed kernel; the
student saves and submits through the ``course-submit`` service; ``hub collect`` hands the
submissions over. Then the isolation: through the hub, one student's login cannot list or write
the other's files (HTTP 403), and as Unix users neither can read or change the other's home or
the exchange. Skips, naming what is missing: root, jupyterhub, configurable-http-proxy (npm),
bubblewrap, Chromium.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from course_tools.classroom.hub import hub_problem
from course_tools.grading.sandbox import sandbox_problem

from .browser_helpers import require_playwright
from .conftest import require_system_package

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

for _package in ("configurable-http-proxy", "bubblewrap", "chromium"):
    require_system_package(_package, module_level=True)  # skips naming it; fails under CI

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = hub_problem(check_python=False) or sandbox_problem()
if PROBLEM:
    pytest.skip(f"the hub test needs it: {PROBLEM}", allow_module_level=True)
sync_api = require_playwright()

NOTEBOOK = "01_self_attention.ipynb"
STUDENTS = {f"hubtest{os.getpid() % 10000}a": "en", f"hubtest{os.getpid() % 10000}b": "zh-CN"}
FOLDERS = {"en": "student", "zh-CN": "student/zh-Hans"}


def _free_ports(count: int = 4) -> int:
    for base in range(20000 + os.getpid() % 5000 * 4, 60000, 4):
        try:
            sockets = []
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no four free ports")


def _as(user: str, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run(["runuser", "-u", user, "--", *command], capture_output=True, text=True)


def _class_python(folder: Path) -> Path:
    """A Python the students can execute: this one, or (when it lies in a private folder such as
    /root/.pyenv) a virtual environment of the system's Python of the same version, with this
    environment's packages and the clone on a .pth line, its Jupyter folders linked."""
    if _as("nobody", sys.executable, "-c", "pass").returncode == 0:
        return Path(sys.executable)
    base = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not base.exists() or _as("nobody", str(base), "-c", "pass").returncode != 0:
        pytest.skip(f"the hub test needs a Python {sys.version_info.major}."
                    f"{sys.version_info.minor} that other users can execute: {sys.executable} "
                    f"is private and {base} is missing")
    venv = folder / "python"
    subprocess.run([str(base), "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True)
    site = sysconfig.get_paths()["purelib"]
    Path(purelib.stdout.strip(), "course.pth").write_text(f"{ROOT}\n{site}\n")
    for data in ("etc/jupyter", "share/jupyter"):  # JupyterLab's server config and its assets
        (venv / data).parent.mkdir(exist_ok=True)
        (venv / data).symlink_to(Path(sys.prefix) / data)
    return python


@contextlib.contextmanager
def running_hub(students: dict[str, str], *options: str, subdomains: bool = False):
    """A hub for ``students`` ({user: language}, created as Unix users, removed afterwards),
    started as ``python -m course_tools hub CLASS --create-users *options``; yields (url, hub
    folder, passwords). ``subdomains``: each student and service on a subdomain of
    ``localhost`` (``--subdomain-host``; Chromium resolves ``*.localhost`` itself)."""
    import pwd

    existing = [name for name in students if _exists(name, pwd)]
    assert not existing, f"test users already exist: {existing}"
    folder = Path(tempfile.mkdtemp(prefix="course-hub-", dir="/tmp"))
    os.chmod(folder, 0o711)  # the students' servers read the hub's kernel spec below it
    class_list = folder / "class.csv"
    with class_list.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["username", "language"])
        writer.writerows(students.items())
    python = _class_python(folder)
    problem = subprocess.run([str(python), "-c", "from course_tools.classroom.hub import "
                              "hub_problem; print(hub_problem() or '')"], capture_output=True,
                             text=True, check=True).stdout.strip()
    if problem:
        shutil.rmtree(folder)
        pytest.skip(f"the hub test needs it: {problem}")
    port = _free_ports()
    url = f"http://{'localhost' if subdomains else '127.0.0.1'}:{port}"
    log = (folder / "hub.log").open("w")
    server = subprocess.Popen(
        [str(python), "-m", "course_tools", "hub", str(class_list), "--dir",
         str(folder / "hub"), "--port", str(port), "--create-users", *options,
         *(["--subdomain-host", url] if subdomains else [])],
        cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for(f"{url}/hub/login", server, folder / "hub.log")
        with (folder / "hub" / "passwords.csv").open() as file:
            passwords = {row["username"]: row["password"] for row in csv.DictReader(file)}
        yield url, folder / "hub", passwords
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the hub stops the proxy, services and servers
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
        for name in students:
            for _ in range(10):  # userdel refuses while a process of the user is still ending
                if not _exists(name, pwd):
                    break
                subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
                time.sleep(1)
                subprocess.run(["userdel", "--remove", name], capture_output=True)
            assert not _exists(name, pwd), f"could not remove the test user {name}"
        print((folder / "hub.log").read_text()[-6000:])
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def hub():
    with running_hub(STUDENTS) as started:
        yield started


def _exists(name, pwd) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def _wait_for(url: str, server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"the hub exited ({server.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"the hub did not answer at {url}:\n{log.read_text()[-3000:]}")


def _log_in_run_save_submit(browser, url: str, name: str, password: str, language: str):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    # the hub starts the server (the student's copies written first), then JupyterLab opens
    listing = page.locator(".jp-DirListing-content")
    item = listing.locator(".jp-DirListing-item", has_text=NOTEBOOK)
    item.wait_for(timeout=240_000)
    assert f"/user/{name}/lab" in page.url, page.url
    crumbs = page.locator(".jp-BreadCrumbs").inner_text()
    assert "student" in crumbs and (("zh-Hans" in crumbs) == (language == "zh-CN")), crumbs
    item.dblclick()
    panel = page.locator(".jp-NotebookPanel:visible")
    panel.wait_for(timeout=60_000)
    sync_api.expect(page.locator(".jp-StatusBar-Widget")).to_contain_text(
        re.compile(r"course sandbox\) \| Idle"), timeout=120_000)
    first = panel.locator(".jp-Notebook .jp-CodeCell").first
    first.click()
    page.keyboard.press("Escape")
    page.keyboard.press("Shift+Enter")
    sync_api.expect(first.locator(".jp-InputPrompt")).to_have_text("[1]:", timeout=180_000)
    output = first.locator(".jp-OutputArea").inner_text()
    assert "device: cpu" in output and "Error" not in output, output
    page.keyboard.press("Control+s")
    sync_api.expect(page.locator(".lm-TabBar-tab.jp-mod-current")).not_to_have_class(
        re.compile("jp-mod-dirty"), timeout=30_000)
    page.goto(f"{url}/services/course-submit/")
    page.check(f"input[value='{NOTEBOOK[:-6]}']")  # one assignment: notebook 01
    page.click("#submit")  # review, then confirm
    page.click("#confirm")
    sync_api.expect(page.locator("#message")).to_have_text(  # in the student's language
        re.compile(rf"^(submitted|已提交).*{NOTEBOOK}$"), timeout=60_000)
    return context, page


def test_two_students_log_in_run_submit_and_cannot_reach_each_other(browser, hub, tmp_path):
    import pwd

    url, hub_dir, passwords = hub
    (alice, alice_language), (bob, bob_language) = STUDENTS.items()
    contexts = {}
    for name, language in STUDENTS.items():
        contexts[name] = _log_in_run_save_submit(browser, url, name, passwords[name], language)

    # collected: each student's saved notebook, with the cell they ran
    out = tmp_path / "submitted"
    subprocess.run([sys.executable, "-m", "course_tools", "hub", "collect", str(hub_dir),
                    str(out)], check=True, capture_output=True)
    for name, language in STUDENTS.items():
        assert sorted(p.name for p in (out / name).glob("*.ipynb"))[0] == NOTEBOOK
        nb = nbformat.read(out / name / NOTEBOOK, as_version=4)
        first = next(c for c in nb.cells if c.cell_type == "code")
        assert first.execution_count == 1, f"{name}: the submission is not the saved run"
        home = Path(pwd.getpwnam(name).pw_dir)
        assert (home / "course" / FOLDERS[language] / NOTEBOOK).stat().st_uid == pwd.getpwnam(
            name).pw_uid, "the student's copies belong to the student"

    # through the hub: alice's login cannot write, list or read bob's files
    _, page = contexts[alice]
    # a write with her own session's xsrf token, which her own server accepts
    context = contexts[alice][0]
    (xsrf,) = [c["value"] for c in context.cookies(f"{url}/user/{alice}/") if c["name"] == "_xsrf"]
    context.add_cookies([{"name": "_xsrf", "value": xsrf, "url": f"{url}/user/{bob}/"}])
    body = json.dumps({"type": "file", "format": "text", "content": "x"})
    headers = {"Content-Type": "application/json", "X-XSRFToken": xsrf}
    mine = page.request.put(f"{url}/user/{alice}/api/contents/student/written.txt", data=body,
                            headers=headers)
    assert mine.status == 201, (mine.status, mine.text())
    written = page.request.put(f"{url}/user/{bob}/api/contents/student/zh-Hans/alice.txt",
                               data=body, headers=headers)
    # refused (403): with a token that her own server accepts, bob's server refuses the request
    # (its xsrf check comes before the authorization that refuses her reads below)
    assert written.status == 403, (written.status, written.text())
    assert not (Path(pwd.getpwnam(bob).pw_dir) / "course/student/zh-Hans/alice.txt").exists()
    for path in (f"/user/{bob}/api/contents/student/zh-Hans",
                 f"/user/{bob}/files/student/zh-Hans/{NOTEBOOK}"):
        response = page.request.get(f"{url}{path}")
        assert response.status == 403, (path, response.status)
        assert NOTEBOOK not in response.text()
    own = page.request.get(f"{url}/user/{alice}/api/contents/student")
    assert own.status == 200 and NOTEBOOK in own.text(), "her own files are hers to read"

    # as Unix users: neither reads or changes the other's home, nor the exchange
    for me, other in ((alice, bob), (bob, alice)):
        theirs = Path(pwd.getpwnam(other).pw_dir) / "course" / FOLDERS[STUDENTS[other]] / NOTEBOOK
        before = theirs.read_bytes()
        assert _as(me, "cat", str(theirs)).returncode != 0
        assert _as(me, "ls", str(theirs.parent)).returncode != 0
        assert _as(me, "touch", str(theirs.parent.parent / "intruder")).returncode != 0
        assert _as(me, "sh", "-c", f"echo x >> {theirs}").returncode != 0
        assert _as(me, "ls", str(hub_dir / "exchange")).returncode != 0
        assert _as(me, "cat", str(hub_dir / "passwords.csv")).returncode != 0
        assert theirs.read_bytes() == before
        assert not (theirs.parent.parent / "intruder").exists()
    for context, _ in contexts.values():
        context.close()
