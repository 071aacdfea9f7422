"""The attention explorer is live in a learner's fresh copy, without re-running (issue 40).

A learner who has never run the notebook opens their copy (``python -m course_tools lab --dir
DIR --student``, what an installed course runs; ``make lab-student`` writes its copies the same
way) in JupyterLab, in a real browser (Debian's Chromium driven by Playwright). JupyterLab shows
a stored output's styles and script only in a notebook it trusts: the course signs the copies it
writes for the learner (Jupyter's notebook signature, in the learner's own Jupyter data folder,
a fresh one here), so the explorer of 04 is styled, its script has run and a click changes the
view. The same notebook unsigned (a byte-different copy in the same lab) stays a still picture
that says how to make it live: what the check would see without the signature.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from lectures_lib.explorer import LIVE_HINT, STATIC_HINT

from .browser_helpers import require_playwright
from .hub_helpers import stop_group

pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.system_package("chromium")]
sync_api = require_playwright()
NOTEBOOK = "04_transformer_encoder.ipynb"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def learners_lab(tmp_path: Path):
    """The lab an installed course opens for a learner: their copies written into a folder of
    theirs, with a Jupyter data folder of their own (nothing trusted in it before)."""
    settings = tmp_path / "lab-settings" / "@jupyterlab"
    for plugin, values in (("docmanager-extension", {"autosave": False}),
                           ("apputils-extension", {"fetchNews": "false", "checkForUpdates": False})):
        folder = settings / plugin
        folder.mkdir(parents=True)
        name = "plugin" if plugin.startswith("docmanager") else "notification"
        (folder / f"{name}.jupyterlab-settings").write_text(json.dumps(values))
    env = {**os.environ, "JUPYTER_DATA_DIR": str(tmp_path / "learner-jupyter-data"),
           "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces")}
    env.pop("MPLBACKEND", None)
    course = tmp_path / "course"
    port, token = _free_port(), secrets.token_hex(16)
    command = [sys.executable, "-m", "course_tools", "lab", "--dir", str(course), "--student",
               "--no-browser", f"--port={port}", f"--token={token}"]
    log = open(tmp_path / "lab.log", "w+")
    server = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log,
                              stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                log.seek(0)
                assert server.poll() is None and time.monotonic() < deadline, (
                    f"JupyterLab did not start on port {port}:\n{log.read()[-3000:]}")
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token, course
    finally:
        stop_group(server)
        log.close()


def _first_explorer(page, url: str, token: str, path: str):
    page.goto(f"{url}/lab/tree/{path}?token={token}")
    page.locator(".jp-NotebookPanel:visible").wait_for(timeout=90_000)
    root = page.locator(".jp-NotebookPanel:visible .ae-root").first
    root.wait_for(state="attached", timeout=90_000)
    root.scroll_into_view_if_needed(timeout=30_000)
    return root


def test_the_explorer_is_live_in_a_fresh_student_copy(browser, tmp_path):
    with learners_lab(tmp_path) as (url, token, course):
        copy = course / "student" / NOTEBOOK
        assert copy.is_file(), f"the lab wrote no copy {copy}"
        unsigned = copy.with_name("04_unsigned.ipynb")  # the same notebook, its metadata changed
        notebook = json.loads(copy.read_text(encoding="utf-8"))
        notebook["metadata"]["unsigned"] = True
        unsigned.write_text(json.dumps(notebook), encoding="utf-8")
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        try:
            root = _first_explorer(page, url, token, f"student/{NOTEBOOK}")
            sync_api.expect(root).to_have_attribute("data-state", "0,0,0,0", timeout=30_000)
            sync_api.expect(root.locator(".ae-how")).to_have_text(LIVE_HINT)
            assert root.locator(".ae-layers button").count() > 1, "the layer buttons are missing"
            assert root.evaluate("r => getComputedStyle(r.querySelector('.ae-tok')).paddingLeft") \
                == "4px", "the explorer has no styles: the copy is not trusted"
            root.locator(".ae-queries .ae-tok").nth(1).click()
            sync_api.expect(root).to_have_attribute("data-state", "0,0,0,1")

            page.goto("about:blank")
            still = _first_explorer(page, url, token, f"student/{unsigned.name}")
            sync_api.expect(still.locator(".ae-how")).to_have_text(STATIC_HINT)
            assert still.get_attribute("data-state") is None, "an unsigned notebook ran a script"
        except Exception:
            page.screenshot(path=str(tmp_path / "fresh-copy.png"))
            raise
        assert not errors, errors
