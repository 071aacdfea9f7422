"""A real browser on the course: the lab as `make lab` starts it, and the site of `make site`.

Headless Chromium (Debian's ``chromium`` package; ``.ci/run`` installs it when missing) driven by
Playwright for Python, which uses that system browser: no browser is downloaded. On a failure a
screenshot is written to a temporary folder named in the error.

* The lab: ``python -m course_tools lab`` (what ``make lab`` runs) opens on ``notebooks/``;
  notebook 01 opens, its first cells run in the real kernel and show their outputs, no error.
  Autosave is switched off for this test, and the test checks that the tracked notebook is
  unchanged afterwards.
* The site: a page of ``make site`` opened from the disk with every network request refused
  shows typeset math and a stored plot.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from course_tools.classroom.lab import NOTEBOOKS, ROOT

from .browser_helpers import only_local, require_playwright

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

NOTEBOOK = NOTEBOOKS / "01_self_attention.ipynb"
FIRST_CELLS = 6  # cells 0-5 of 01: three code cells (imports, one-hot words with a plot, frames)

sync_api = require_playwright()


@contextlib.contextmanager
def screenshot_on_failure(page, name: str):
    """Re-raise any failure with the path of a screenshot of the page at that moment."""
    try:
        yield
    except Exception as error:
        folder = Path(tempfile.mkdtemp(prefix="course-browser-test-"))
        path = folder / f"{name}.png"
        try:
            page.screenshot(path=str(path), full_page=False)
            where = f"screenshot: {path}"
        except Exception as shot_error:  # the page may be gone
            where = f"no screenshot ({shot_error})"
        raise AssertionError(f"{error}\n{where}") from error


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@contextlib.contextmanager
def running_lab(tmp_path: Path):
    """`python -m course_tools lab` (what `make lab` runs), headless, autosave off."""
    settings = tmp_path / "lab-settings" / "@jupyterlab" / "docmanager-extension"
    settings.mkdir(parents=True)
    (settings / "plugin.jupyterlab-settings").write_text(json.dumps({"autosave": False}))
    news = tmp_path / "lab-settings" / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(tmp_path / "lab-settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
    }
    env.pop("MPLBACKEND", None)  # conftest's Agg would keep the kernel from showing plots
    port, token = _free_port(), secrets.token_hex(16)
    command = [sys.executable, "-m", "course_tools", "lab", "--no-browser",
               f"--port={port}", f"--token={token}"]
    log = open(tmp_path / "lab.log", "w+")
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5
                ):
                    break
            except (urllib.error.URLError, ConnectionError, OSError):
                log.seek(0)
                assert server.poll() is None and time.monotonic() < deadline, (
                    f"JupyterLab did not start on port {port}:\n{log.read()[-3000:]}"
                )
                time.sleep(0.5)
        yield f"http://127.0.0.1:{port}", token
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the launcher and the server shut down kernels
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()


def test_lab_opens_on_notebooks_and_runs_the_first_cells_of_01(browser, tmp_path):
    before = _sha256(NOTEBOOK)
    with running_lab(tmp_path) as (url, token):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        with screenshot_on_failure(page, "lab"):
            page.goto(f"{url}/?token={token}")  # what the browser opened by `make lab` loads
            listing = page.locator(".jp-DirListing-content")
            item = listing.locator(".jp-DirListing-item", has_text=NOTEBOOK.name)
            item.wait_for(timeout=90_000)
            breadcrumbs = page.locator(".jp-BreadCrumbs").inner_text()
            assert "notebooks" in breadcrumbs, f"the lab must open on notebooks/: {breadcrumbs!r}"
            assert listing.locator(".jp-DirListing-item", has_text="02_multi_head").count() == 1

            item.dblclick()
            panel = page.locator(".jp-NotebookPanel:visible")
            panel.wait_for(timeout=60_000)
            assert NOTEBOOK.name in page.locator(".lm-TabBar-tab.jp-mod-current").inner_text()
            # The kernel is ready (the toolbar's indicator says "idle" before the kernel exists).
            sync_api.expect(page.locator(".jp-StatusBar-Widget")).to_contain_text(
                re.compile(r"\(ipykernel\) \| Idle"), timeout=90_000
            )
            cells = panel.locator(".jp-Notebook .jp-Cell")
            cells.nth(0).click()  # select the first cell ...
            page.keyboard.press("Escape")  # ... in command mode
            for _ in range(FIRST_CELLS):
                page.keyboard.press("Shift+Enter")  # run it and select the next one
            code_cells = [
                cells.nth(i) for i in range(FIRST_CELLS)
                if "jp-CodeCell" in (cells.nth(i).get_attribute("class") or "")
            ]
            assert len(code_cells) == 3, f"cells 0-{FIRST_CELLS - 1} of 01 should hold 3 code cells"
            for number, cell in enumerate(code_cells, start=1):
                prompt = cell.locator(".jp-InputPrompt")
                sync_api.expect(prompt).to_have_text(f"[{number}]:", timeout=120_000)
            for index, cell in enumerate(code_cells):
                outputs = cell.locator(".jp-OutputArea-output")
                assert outputs.count() > 0, f"code cell {index} of the first cells showed no output"
                text = cell.locator(".jp-OutputArea").inner_text()
                assert "Traceback" not in text and "Error" not in text, f"cell {index}: {text}"
            assert code_cells[1].locator(".jp-OutputArea-output img").count() >= 1, "no plot"
            errors = panel.locator(".jp-OutputArea-output[data-mime-type*='error']")
            assert errors.count() == 0, "an error output is shown"
        page.close()
    assert _sha256(NOTEBOOK) == before, f"running cells in the lab changed {NOTEBOOK}"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory):
    """The real course's site (`make site`), built once for the site tests."""
    from course_tools.publish.site import build_site

    out = tmp_path_factory.mktemp("built") / "site"
    build_site(out)
    return out


def _wait_for_math(page):
    page.wait_for_function(
        "window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
        "&& MathJax.Hub.queue.running === 0 && document.querySelector('.MathJax')",
        timeout=60_000,
    )


def test_site_page_shows_typeset_math_and_a_stored_plot(browser, built_site):
    tmp_path = built_site.parent
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    refused = []
    only_local(page, refused)
    with screenshot_on_failure(page, "site"):
        page.goto((tmp_path / "site" / "01_self_attention.html").as_uri())
        page.wait_for_function(
            "window.MathJax && MathJax.Hub && MathJax.Hub.queue.pending === 0 "
            "&& MathJax.Hub.queue.running === 0 && document.querySelector('.MathJax')",
            timeout=60_000,
        )
        typeset = page.locator(".MathJax")
        assert typeset.count() > 50, f"only {typeset.count()} formulas typeset"
        box = page.locator("h2 .MathJax, h1 .MathJax, h3 .MathJax").first.bounding_box()
        assert box and box["width"] > 5 and box["height"] > 5, f"a heading's formula: {box}"
        assert page.locator(".MathJax .merror, .MathJax_Error").count() == 0, "a TeX error"
        shown = page.locator("main").inner_text()
        assert "\\sqrt" not in shown and "\\frac" not in shown, "TeX left untypeset on the page"
        fonts = page.evaluate(
            "Array.from(document.fonts).filter(f => f.family.includes('STIX')"
            " && f.status === 'loaded').length"
        )
        assert fonts > 0, "MathJax's STIX web fonts did not load from _static/"
        plots = page.evaluate(
            "Array.from(document.querySelectorAll('.jp-OutputArea-output img'))"
            ".filter(img => img.complete && img.naturalWidth > 100).length"
        )
        assert plots >= 3, f"stored plots shown: {plots}"
        nav = page.locator("nav.course-nav a")
        assert nav.first.inner_text() == "Start here" and nav.count() >= 6
        assert page.locator("nav.course-nav a.current").inner_text().startswith("01")
    assert not refused, f"the page asked the network for {refused}"
    page.close()


def test_chinese_site_page_shows_chinese_text_and_typeset_math(browser, built_site):
    """make site: the Simplified Chinese page of 01, its math, fonts, and the language switch."""
    chinese = built_site / "zh-Hans" / "01_self_attention.html"
    assert chinese.is_file(), "make site wrote no zh-Hans/01_self_attention.html"
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    refused = []
    only_local(page, refused)
    with screenshot_on_failure(page, "site-zh"):
        page.goto(chinese.as_uri())
        _wait_for_math(page)
        assert page.evaluate("document.documentElement.lang") == "zh-Hans"
        shown = page.locator("main").inner_text()
        for text in ("自注意力", "查询", "键", "练习 1", "为什么要除以"):
            assert text in shown, f"{text!r} is not on the Chinese page"
        typeset = page.locator(".MathJax")
        assert typeset.count() > 50, f"only {typeset.count()} formulas typeset"
        assert page.locator(".MathJax .merror, .MathJax_Error").count() == 0, "a TeX error"
        assert "\\sqrt" not in shown and "\\frac" not in shown, "TeX left untypeset"
        family = page.evaluate("getComputedStyle(document.querySelector('.jp-RenderedHTMLCommon'))"
                               ".fontFamily")
        assert "Noto Sans CJK SC" in family and "PingFang SC" in family, family
        heading = page.locator("h1").first.bounding_box()
        assert heading and heading["width"] > 100, f"the Chinese title is not laid out: {heading}"
        switch = page.locator("nav.course-lang a")
        assert switch.count() == 2 and page.locator("nav.course-lang [aria-current]").inner_text() == "简体中文"
        nav = page.locator("nav.course-nav a")
        assert nav.first.inner_text() == "从这里开始"
        page.locator("nav.course-lang a", has_text="繁體中文").click()
        _wait_for_math(page)
        assert page.evaluate("document.documentElement.lang") == "zh-Hant"
        assert "查詢" in page.locator("main").inner_text()
        assert page.url.endswith("/zh-Hant/01_self_attention.html"), page.url
    assert not refused, f"the page asked the network for {refused}"
    page.close()
