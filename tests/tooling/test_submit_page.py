"""The submit page's parts without a hub (issues 38 cause 6 and 41): its languages, the one-time
confirmation, the refusal of requests that are not its own page's, the students' Course menu.
The hub and a real browser: tests/test_hub_submit.py."""

from __future__ import annotations

import json
import re
import stat
from datetime import datetime

import pytest

from course_tools.classroom import student_lab, submit_page
from course_tools.classroom.submit import Confirmations, own_request_problem, submit
from course_tools.classroom.submit_page import Assignment


def test_every_language_has_every_text_and_the_page_speaks_it():
    assert set(submit_page.TEXT) == set(student_lab.MENU) == {"en", "zh-Hans", "zh-Hant"}
    keys = set(submit_page.TEXT["en"])
    for language, text in submit_page.TEXT.items():
        assert set(text) == keys, language
        for key, value in text.items():  # the same placeholders in every language
            english = submit_page.TEXT["en"][key]
            assert sorted(re.findall(r"{\w+}", value)) == sorted(re.findall(r"{\w+}", english)), \
                (language, key)
    one = [Assignment("01_self_attention", ("01_self_attention.ipynb",),
                      datetime(2026, 12, 12, 23, 59))]
    runs = [("2026-12-05 01:37:02", ["01_self_attention.ipynb"])]
    for language, html_lang in submit_page.HTML_LANG.items():
        page = submit_page.choose_page(language, "bob", one, runs, "<input name=_xsrf>", "")
        assert f"lang='{html_lang}'" in page and submit_page.TEXT[language]["title"] in page
        assert submit_page.TEXT[language]["save"] in page  # save first: disk, not the editor
        assert "2026-12-05 01:37:02" in page and "2026-12-12 23:59" in page
    assert "还没有提交" in submit_page.choose_page("zh-Hans", "bob", one, [], "", "")


def test_the_page_escapes_what_it_shows():
    evil = "<script>alert(1)</script>"
    page = submit_page.choose_page("en", evil, [Assignment(evil, (evil,))], [(evil, [evil])],
                                   "", evil)
    assert evil not in page and "&lt;script&gt;" in page
    confirm = submit_page.confirm_page("en", evil, Assignment(evil, (evil,)), "t'><x", "")
    assert evil not in confirm and "t'><x" not in confirm


def test_every_response_refuses_framing():
    headers = submit_page.SECURITY_HEADERS
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    assert headers["X-Frame-Options"] == "DENY"


def test_a_confirmation_is_the_students_own_used_once_and_expires(monkeypatch):
    confirmations = Confirmations(seconds=60)
    token = confirmations.issue("alice", "01_self_attention")
    assert confirmations.redeem("bob", token) is None  # another student's session
    assert confirmations.redeem("alice", token + "x") is None
    assert confirmations.redeem("alice", token) == "01_self_attention"
    assert confirmations.redeem("alice", token) is None  # used once
    first = confirmations.issue("alice", "a")
    second = confirmations.issue("alice", "b")  # a new review replaces the old one
    assert confirmations.redeem("alice", first) is None
    assert confirmations.redeem("alice", second) == "b"
    expired = Confirmations(seconds=-1)
    assert expired.redeem("alice", expired.issue("alice", "a")) is None


@pytest.mark.parametrize(("method", "headers", "refused"), [
    ("GET", {"Sec-Fetch-Dest": "iframe"}, False),  # a page is shown; the headers refuse a frame
    ("POST", {"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "same-origin",
              "Origin": "http://course-submit--service.localhost:8000"}, False),
    ("POST", {}, False),  # not a browser: no page acts through it
    ("POST", {"Sec-Fetch-Dest": "iframe", "Sec-Fetch-Site": "same-origin"}, True),
    ("POST", {"Sec-Fetch-Dest": "empty", "Sec-Fetch-Site": "same-origin"}, True),  # fetch()
    ("POST", {"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "same-site"}, True),
    ("POST", {"Sec-Fetch-Dest": "document", "Sec-Fetch-Site": "cross-site"}, True),
    ("POST", {"Origin": "http://bob.localhost:8000"}, True),
    ("POST", {"Origin": "null"}, True),
])
def test_only_the_pages_own_forms_may_post(method, headers, refused):
    problem = own_request_problem(method, headers, "course-submit--service.localhost:8000")
    assert bool(problem) == refused, problem


def test_submit_refuses_notebook_names_that_are_not_plain_names(tmp_path):
    for notebooks in ((), ("../other/01",), ("01.py",), ("01_self_attention.ipynb",), (1,)):
        with pytest.raises(ValueError, match="notebooks must be notebooks' names without"):
            _submit_names(tmp_path, notebooks)


def _submit_names(hub_dir, notebooks):
    (hub_dir / "class.json").write_text(json.dumps([{"username": "root", "language": "en"}]))
    return submit(hub_dir, "root", notebooks=notebooks)


def test_the_course_menu_is_written_per_language_readable_and_not_writable(tmp_path):
    url = student_lab.submit_url("course-submit", "http://localhost:8000")
    assert url == "http://course-submit--service.localhost:8000/services/course-submit/"
    assert student_lab.submit_url("course-submit") == "/services/course-submit/"
    folders = student_lab.write_lab_settings(tmp_path / "jupyter", url)
    for language, (menu, item) in student_lab.MENU.items():
        folder = folders[language]
        assert student_lab.lab_arguments(folder) == [f"--LabApp.app_settings_dir={folder}"]
        settings = json.loads((folder / "overrides.json").read_text(encoding="utf-8"))
        (course,) = settings["@jupyterlab/mainmenu-extension:plugin"]["menus"]
        assert course["label"] == menu
        commands = [i.get("command") for i in course["items"]]
        assert commands.index("docmanager:save-all") < commands.index("help:open")
        (opener,) = [i for i in course["items"] if i.get("command") == "help:open"]
        assert opener["args"] == {"url": url, "text": item, "newBrowserTab": True}
        page_config = json.loads((folder / "page_config.json").read_text())
        assert page_config["disabledExtensions"] == {"@jupyter/nbgrader": True}
        for path in (folder, *folder.iterdir()):
            mode = path.stat().st_mode
            assert mode & stat.S_IROTH and not mode & (stat.S_IWGRP | stat.S_IWOTH), path


def _read(folder, *stems) -> tuple[int, dict | str]:
    """The reader the service runs as the student, run here on ``folder``."""
    import subprocess
    import sys

    from course_tools.classroom.submit import READER

    result = subprocess.run([sys.executable, "-I", "-c", READER, str(folder), str(2**20),
                             str(2**16), *([json.dumps(list(stems))] if stems else [])],
                            capture_output=True, text=True)
    return result.returncode, json.loads(result.stdout) if result.returncode == 0 \
        else result.stderr


def test_one_assignment_sends_its_notebooks_and_their_corrections_only(tmp_path):
    for name in ("01_self_attention.ipynb", "01_self_attention.v2.ipynb",
                 "02_multi_head_attention.ipynb", "01_self_attention-Copy1.ipynb", "notes.txt"):
        (tmp_path / name).write_text("{}")
    code, found = _read(tmp_path, "01_self_attention")
    assert code == 0 and sorted(found) == ["01_self_attention.ipynb",
                                           "01_self_attention.v2.ipynb"], found
    code, found = _read(tmp_path)  # no assignment: every notebook, as before
    assert code == 0 and len(found) == 4, found
    code, error = _read(tmp_path, "01_self_attention", "03_positional_encoding")
    assert code != 0 and "03_positional_encoding.ipynb is not in your folder" in error


def test_the_page_offers_the_released_assignments_else_each_notebook(tmp_path):
    from datetime import timezone

    from course_tools.classroom import assignments

    fallback = submit_page.open_assignments(tmp_path)
    assert [a.notebooks for a in fallback][:1] == [("01_self_attention",)], fallback
    deadline = datetime(2026, 12, 12, 23, 59, tzinfo=timezone.utc)
    assignments.save(tmp_path, assignments.Assignment(
        "ps1", ("01_self_attention", "02_multi_head_attention"), deadline))
    (ps1,) = submit_page.open_assignments(tmp_path)
    assert ps1 == Assignment("ps1", ("01_self_attention", "02_multi_head_attention"), deadline)
    page = submit_page.choose_page("zh-Hant", "chen", [ps1], [], "", "")
    assert "ps1" in page and "截止" in page and "02_multi_head_attention" in page


def test_the_hub_refuses_a_subdomain_host_that_is_not_a_url(capsys):
    from course_tools.classroom.hub import main

    with pytest.raises(SystemExit):
        main(["class.csv", "--subdomain-host", "hub.example.edu"])
    assert "--subdomain-host must be http(s)://HOST[:PORT], got 'hub.example.edu'" in \
        capsys.readouterr().err


def test_the_confirmation_says_when_a_submission_will_be_late():
    from datetime import timedelta, timezone

    deadline = datetime(2026, 12, 12, 23, 59, tzinfo=timezone.utc)
    ps1 = Assignment("ps1", ("01_self_attention",), deadline)
    for language in submit_page.TEXT:
        before = submit_page.confirm_page(language, "a", ps1, "t", "", now=deadline)
        after = submit_page.confirm_page(language, "a", ps1, "t", "",
                                         now=deadline + timedelta(minutes=1))
        assert "id='late'" not in before and "id='late'" in after, language
        assert submit_page._when(deadline) in after
    no_deadline = Assignment("01_self_attention", ("01_self_attention",))
    assert "id='late'" not in submit_page.confirm_page("en", "a", no_deadline, "t", "")
