"""Submitting from JupyterLab, and the submit page against a classmate's page (issues 41 and 38).

A hub as a hostile class runs it (``--subdomain-host``: each student's server and the submit
service on an origin of their own; Chromium resolves ``*.localhost`` itself), two students as
real Unix users (tests/test_hub_browser.py's hub), Debian's Chromium:

* issue 38, cause 6: a page of one student's server's origin frames the submit page in a
  classmate's browser and clicks through it, and reads and posts its forms by script; nothing is
  submitted for the classmate (the page refuses to be framed; another origin reads no form and
  its posts are refused), while the classmate's own visit submits;
* issue 41: a zh-CN student's JupyterLab has a *课程* menu (no nbgrader menus): *Save All*, then
  *提交作业…* opens the submit page in Chinese, which offers the released assignment with its
  deadline, submits it (its notebook as saved, not the other six) after a confirmation, and
  lists the submission with its time; a zh-TW student's the same in Traditional characters
  (*課程*, *提交作業…*; no Simplified character on the page).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

from course_tools.classroom.kernels import public_dir

from .hub_helpers import require_hub, running_hub

pytestmark = [pytest.mark.system, pytest.mark.slow]  # tests/conftest.py: the system tier
sync_api = require_hub()  # skips naming what is missing; fails under CI
NOTEBOOK = "01_self_attention.ipynb"

STUDENTS = {f"hubs{os.getpid() % 10000}a": "en", f"hubs{os.getpid() % 10000}b": "zh-CN",
            f"hubs{os.getpid() % 10000}c": "zh-TW"}
# What each Chinese student reads (typed here, not taken from the page's tables): the menu, its
# item, the settings folder, the page's language, title, save warning, empty history, the
# confirmation; and characters that only Simplified Chinese writes (none on a zh-TW page).
WORDS = {
    "zh-CN": {"menu": "课程", "item": "提交作业…", "folder": "zh-Hans", "title": "提交作业",
              "save": "请先保存", "none": "还没有提交。", "submitted": f"已提交“ps1”：{NOTEBOOK}"},
    "zh-TW": {"menu": "課程", "item": "提交作業…", "folder": "zh-Hant", "title": "提交作業",
              "save": "請先儲存", "none": "還沒有提交。", "submitted": f"已提交「ps1」：{NOTEBOOK}"},
}
SIMPLIFIED_ONLY = set("业请还储时间笔记过检确认盘开")
ASSIGNMENT = NOTEBOOK[:-len(".ipynb")]


@pytest.fixture(scope="module")
def hub():
    with running_hub(STUDENTS, subdomains=True) as running:
        yield running.url, running.hub_dir, running.passwords


def _log_in(browser, url: str, name: str, password: str):
    context = browser.new_context(viewport={"width": 1300, "height": 900})
    page = context.new_page()
    page.goto(f"{url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", password)
    page.click("#login_submit")
    page.locator(".jp-DirListing-item", has_text=NOTEBOOK).wait_for(timeout=240_000)
    return context, page


def _submit_url(hub_dir: Path, url: str, language: str) -> str:
    """The submit page's address, as the student's Course menu gives it."""
    settings = public_dir(hub_dir) / "jupyter" / "lab-settings" / language / "overrides.json"
    (menu,) = json.loads(settings.read_text())["@jupyterlab/mainmenu-extension:plugin"]["menus"]
    (item,) = [i for i in menu["items"] if i.get("command") == "help:open"]
    return urljoin(url + "/", item["args"]["url"])


def _runs(hub_dir: Path, name: str) -> list[Path]:
    return sorted((hub_dir / "exchange" / name).glob("*T*"))


# The classmate's page: it frames the submit page and clicks its buttons (a framing page can, on
# one origin), and fetches the page and posts its forms back (one origin can read them).
ATTACK = """<!DOCTYPE html><html><body><h1>Win a prize!</h1>
<iframe id="f" src="SUBMIT" width="900" height="600"></iframe><pre id="log"></pre><script>
const log = m => { document.getElementById('log').textContent += m + '\\n'; };
let loads = 0;
document.getElementById('f').addEventListener('load', () => {
  loads += 1;
  try {
    const d = document.getElementById('f').contentDocument;
    const button = d.querySelector('#confirm') || (loads === 1 && d.querySelector('#submit'));
    if (button) { button.click(); log('framed: clicked ' + button.id); }
  } catch (e) { log('framed: ' + e); }
});
(async () => {
  let address = 'SUBMIT', html;
  try {
    html = await (await fetch(address, {credentials: 'include'})).text();
    for (let step = 0; step < 2; step++) {
      const form = new DOMParser().parseFromString(html, 'text/html').querySelector('form');
      if (!form) break;
      address = new URL(form.getAttribute('action') || '', address).href;
      const body = new URLSearchParams(new FormData(form));
      const response = await fetch(address, {method: 'POST', body, credentials: 'include'});
      html = await response.text();
      log('scripted: ' + response.status);
    }
  } catch (e) { log('scripted: ' + e); }
  log('done');
})();
</script></body></html>"""


def test_a_classmates_page_cannot_submit_for_a_student(browser, hub):
    """Issue 38, cause 6: bob's page, in alice's logged-in browser, neither frames and clicks
    the submit page nor posts its forms by script; alice's own visit submits."""
    url, hub_dir, passwords = hub
    (alice, language), (bob, _) = list(STUDENTS.items())[:2]
    victim, page = _log_in(browser, url, alice, passwords[alice])
    attacker, bob_page = _log_in(browser, url, bob, passwords[bob])
    try:
        submit = _submit_url(hub_dir, url, language)
        page.goto(submit)  # alice has used the page: her browser is logged in to the service
        sync_api.expect(page.locator("#student")).to_have_text(alice)
        assert _runs(hub_dir, alice) == []
        cookies = victim.cookies(submit)
        assert cookies and all(c["sameSite"] in ("Lax", "Strict") for c in cookies), cookies
        for address in (submit, submit + "no-such-page"):  # every response refuses framing
            headers = page.goto(address).headers  # (the browser resolves *.localhost)
            assert "frame-ancestors 'none'" in headers["content-security-policy"], headers
            assert headers["x-frame-options"] == "DENY", headers
        # a page of bob's server's origin (the browser's router stands in for his server,
        # which the hub serves to no classmate; any page of that origin has this power)
        origin = "{0.scheme}://{0.netloc}".format(urlsplit(bob_page.url))
        lure = f"{origin}/user/{bob}/files/prize.html"
        page.route(lure, lambda route: route.fulfill(
            status=200, content_type="text/html", body=ATTACK.replace("SUBMIT", submit)))
        page.goto(lure)
        sync_api.expect(page.locator("#log")).to_contain_text("done", timeout=60_000)
        time.sleep(5)  # a submission it started would be in the exchange by now
        framed = [frame.url for frame in page.frames[1:]
                  if frame.locator("#submit, #confirm").count()]
        log = page.locator("#log").inner_text()
        assert _runs(hub_dir, alice) == [], f"bob's page submitted for alice: {log}"
        assert framed == [], f"the submit page was framed by bob's page: {framed}; {log}"

        # the victim's own visit still submits: the refusal above is not a broken service
        page.goto(submit)
        page.click("#submit")
        page.click("#confirm")
        sync_api.expect(page.locator("#message")).to_have_text(
            re.compile(rf"^submitted “{ASSIGNMENT}”: {NOTEBOOK}$"), timeout=60_000)
        assert len(_runs(hub_dir, alice)) == 1
    finally:
        victim.close()
        attacker.close()


def _no_simplified(page, language: str) -> None:
    if language == "zh-TW":
        text = page.locator("body").inner_text()
        assert not SIMPLIFIED_ONLY & set(text), (sorted(SIMPLIFIED_ONLY & set(text)), text)


@pytest.mark.parametrize("language", ["zh-CN", "zh-TW"])
def test_a_student_submits_one_assignment_from_jupyterlab_in_their_language(browser, hub,
                                                                            language):
    """Issue 41: the Course menu (Chinese), Save All, the submit page (Chinese) in a new tab,
    one assignment reviewed and confirmed, the submission listed with its time."""
    url, hub_dir, passwords = hub
    (name,) = [student for student, spoken in STUDENTS.items() if spoken == language]
    words = WORDS[language]
    context, page = _log_in(browser, url, name, passwords[name])
    # the instructor releases assignment ps1 (notebook 01) with a deadline (tests/tooling/
    # test_assignments.py tests the release itself); the hub's Python, which students can run
    python = hub_dir.parent / "python" / "bin" / "python"  # hub_helpers.class_python's
    released = subprocess.run(
        [str(python if python.exists() else sys.executable), "-m", "course_tools", "hub",
         "release", str(hub_dir), "ps1", ASSIGNMENT, "--deadline", "2099-01-01T12:00+00:00",
         "--student", name], capture_output=True, text=True)
    assert released.returncode == 0, released.stdout + released.stderr
    try:
        menus = page.locator(".lm-MenuBar-itemLabel").all_inner_texts()
        assert words["menu"] in menus, menus
        assert not [m for m in menus if "nbgrader" in m.lower()], menus
        config = page.evaluate(
            "JSON.parse(document.getElementById('jupyter-config-data').textContent)")
        assert "@jupyter/nbgrader" in config["disabledExtensions"], config["disabledExtensions"]
        page.locator(".jp-DirListing-item", has_text=NOTEBOOK).dblclick()
        panel = page.locator(".jp-NotebookPanel:visible")
        panel.wait_for(timeout=60_000)
        cell = panel.locator(".jp-CodeCell").first  # an unsaved edit
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\n# saved-before-submit")
        sync_api.expect(cell).to_contain_text("# saved-before-submit")
        page.keyboard.press("Escape")
        sync_api.expect(page.locator(".lm-TabBar-tab.jp-mod-current")).to_have_class(
            re.compile("jp-mod-dirty"), timeout=10_000)
        page.locator(".lm-MenuBar-itemLabel", has_text=words["menu"]).click()
        page.locator(".lm-Menu-itemLabel", has_text="Save All").click()
        sync_api.expect(page.locator(".lm-TabBar-tab.jp-mod-current")).not_to_have_class(
            re.compile("jp-mod-dirty"), timeout=30_000)
        page.locator(".lm-MenuBar-itemLabel", has_text=words["menu"]).click()
        with context.expect_page() as opened:
            page.locator(".lm-Menu-itemLabel", has_text=words["item"]).click()
        submit = opened.value
        submit.wait_for_load_state()
        assert submit.url == _submit_url(hub_dir, url, words["folder"]), submit.url
        assert submit.locator("html").get_attribute("lang") == language
        sync_api.expect(submit.locator("h1")).to_have_text(words["title"])
        sync_api.expect(submit.locator("#save")).to_contain_text(words["save"])
        sync_api.expect(submit.locator("#earlier")).to_have_text(words["none"])
        _no_simplified(submit, language)
        offered = submit.locator("input[name=assignment]")
        assert [offered.nth(i).get_attribute("value") for i in range(offered.count())] == ["ps1"]
        sync_api.expect(submit.locator("fieldset")).to_contain_text("截止 2099-01-01")
        submit.check("input[value='ps1']")
        submit.click("#submit")
        sync_api.expect(submit.locator("#notebooks")).to_have_text(NOTEBOOK)
        _no_simplified(submit, language)  # the confirmation
        submit.click("#confirm")
        sync_api.expect(submit.locator("#message")).to_have_text(
            words["submitted"], timeout=60_000)
        _no_simplified(submit, language)
        (run,) = _runs(hub_dir, name)
        assert [p.name for p in run.iterdir()] == [NOTEBOOK], "one assignment, not every notebook"
        assert "saved-before-submit" in (run / NOTEBOOK).read_text(), "the saved edit"
        rows = submit.locator("#earlier tr").all_inner_texts()
        assert len(rows) == 2 and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+" + NOTEBOOK,
                                            rows[1]), rows
    finally:
        context.close()
