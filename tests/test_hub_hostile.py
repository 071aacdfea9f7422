"""The class hub against a hostile student (issue 38): real Unix users, a real hub, Chromium.

``python -m lectures_lib hub`` starts JupyterHub on 127.0.0.1 for a class of real Unix users
(created here, removed afterwards), as ``tests/test_hub_browser.py`` does; each test is one
attack a student made, through their own login, and what must refuse it. Skips as
``test_hub_browser.py`` does, naming what is missing.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .test_hub_browser import _class_python, _exists, _free_ports, _wait_for

pytestmark = [pytest.mark.system, pytest.mark.slow]  # tests/conftest.py: the system tier

STUDENTS = {f"hubx{os.getpid() % 10000}a": "en", f"hubx{os.getpid() % 10000}b": "zh-CN"}
SERVER_TIMEOUT_MS = 240_000


@pytest.fixture(scope="module")
def hub():
    import pwd

    existing = [name for name in STUDENTS if _exists(name, pwd)]
    assert not existing, f"test users already exist: {existing}"
    folder = Path(tempfile.mkdtemp(prefix="course-hubx-", dir="/tmp"))
    os.chmod(folder, 0o711)
    class_list = folder / "class.csv"
    with class_list.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["username", "language"])
        writer.writerows(STUDENTS.items())
    python = _class_python(folder)
    problem = subprocess.run([str(python), "-c", "from lectures_lib.tooling.hub import "
                              "hub_problem; print(hub_problem() or '')"], capture_output=True,
                             text=True, check=True).stdout.strip()
    if problem:
        shutil.rmtree(folder)
        pytest.skip(f"the hub test needs it: {problem}")
    port = _free_ports()
    log = (folder / "hub.log").open("w")
    server = subprocess.Popen(
        [str(python), "-m", "lectures_lib", "hub", str(class_list), "--dir",
         str(folder / "hub"), "--port", str(port), "--create-users"],
        cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_for(f"{url}/hub/login", server, folder / "hub.log")
        with (folder / "hub" / "passwords.csv").open() as file:
            passwords = {row["username"]: row["password"] for row in csv.DictReader(file)}
        yield url, folder / "hub", passwords
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
        for name in STUDENTS:
            for _ in range(10):  # userdel refuses while a process of the user is still ending
                if not _exists(name, pwd):
                    break
                subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
                time.sleep(1)
                subprocess.run(["userdel", "--remove", name], capture_output=True)
            assert not _exists(name, pwd), f"could not remove the test user {name}"
        print((folder / "hub.log").read_text()[-6000:])
        shutil.rmtree(folder, ignore_errors=True)


def _log_in(browser, url: str, name: str, password: str):
    """A browser context logged in as ``name`` whose server is running (the lab left)."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(f"/user/{name}/lab"), timeout=SERVER_TIMEOUT_MS)
    page.goto("about:blank")  # the lab's scripts would only take CPU from here on
    return context, page


def _xsrf(context, url: str, name: str) -> dict:
    (token,) = [c["value"] for c in context.cookies(f"{url}/user/{name}/")
                if c["name"] == "_xsrf"]
    return {"Content-Type": "application/json", "X-XSRFToken": token}


# nbgrader's server extensions' pages (formgrader, course_list, assignment_list,
# validate_assignment): none may exist in a student's server
NBGRADER_PAGES = ("formgrader", "formgraders", "assignments", "assignments/validate",
                  "assignments/fetch", "create_assignment")


def test_a_students_server_runs_no_grading_extension_and_none_of_their_config(browser, hub):
    """Cause 1: the student saves configuration files in ~/course (nbgrader's, Jupyter's) whose
    code would run as the student outside the sandbox, then opens nbgrader's pages: none exists,
    no file ran; the lab, the contents API and the one sandboxed kernel still serve."""
    url, _, passwords = hub
    name = next(iter(STUDENTS))
    context, page = _log_in(browser, url, name, passwords[name])
    marker = Path(f"/tmp/hubx-config-ran-{os.getpid()}")
    marker.unlink(missing_ok=True)
    code = f"open({str(marker)!r}, 'a').write(__file__ + '\\n')\n"
    headers = _xsrf(context, url, name)
    for config in ("nbgrader_config.py", "jupyter_config.py", "jupyter_server_config.py",
                   "jupyter_notebook_config.py", "ipython_config.py"):
        body = json.dumps({"type": "file", "format": "text", "content": code})
        saved = page.request.put(f"{url}/user/{name}/api/contents/{config}", data=body,
                                 headers=headers)
        assert saved.status in (200, 201), (config, saved.status, saved.text())
    try:
        for path in NBGRADER_PAGES:
            response = page.request.get(f"{url}/user/{name}/{path}")
            assert response.status == 404, (path, response.status, response.text()[:300])
        specs = page.request.get(f"{url}/user/{name}/api/kernelspecs")
        assert specs.status == 200 and set(specs.json()["kernelspecs"]) == {"python3"}, \
            specs.text()[:500]
        assert "course sandbox" in specs.json()["kernelspecs"]["python3"]["spec"]["display_name"]
        assert page.request.get(f"{url}/user/{name}/lab").status == 200
        assert not marker.exists(), f"a student's config file ran: {marker.read_text()}"
    finally:
        marker.unlink(missing_ok=True)
        context.close()

