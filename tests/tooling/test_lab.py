"""`make lab` works: JupyterLab starts the way the Makefile starts it, rooted at the repository.

Rooted at the repository (opening on notebooks/), the README and every relative link between the
notebooks resolve. `make lab-student` works on the learner's own copies in student/.
(tests/test_browser.py drives the same lab in a real browser.)
"""

import json
import secrets
import socket
import subprocess
import time
import urllib.error
import urllib.request

import nbformat
import pytest

from course_tools.classroom.lab import NOTEBOOKS, ROOT, ensure_student_copies, lab_command

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get_json(url: str):
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


def test_makefile_lab_targets_use_the_launcher():
    makefile = (ROOT / "Makefile").read_text()
    assert "\nlab: $(LAB_STAMP)\n\t$(BIN)/python -m course_tools lab" in makefile
    assert "\nlab-student: $(LAB_STAMP)\n\t$(BIN)/python -m course_tools lab --student" in makefile


def test_lab_is_rooted_at_the_repository_and_opens_on_notebooks():
    command = lab_command(port=1234, open_browser=False)
    assert f"--ServerApp.root_dir={ROOT}" in command
    assert "--LabApp.default_url=/lab/tree/notebooks" in command
    student = lab_command(open_on="student")
    assert "--LabApp.default_url=/lab/tree/student" in student


def test_jupyterlab_serves_the_course_notebooks(tmp_path):
    port, token = _free_port(), secrets.token_hex(16)
    command = lab_command(port=port, open_browser=False, token=token)
    log = open(tmp_path / "lab.log", "w+")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/api/contents/notebooks?token={token}"
        deadline, listing = time.monotonic() + 90, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                listing = _get_json(url)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        log.seek(0)
        assert listing is not None, f"JupyterLab did not answer on port {port}:\n{log.read()[-3000:]}"
        served = {item["name"] for item in listing["content"] if item["type"] == "notebook"}
        expected = {p.name for p in NOTEBOOKS.glob("*.ipynb")}
        assert expected, "notebooks/ holds no notebook"
        assert expected <= served, f"not served: {sorted(expected - served)}"
        # The root is the repository: the README (01's "Previous: README" link) is served too.
        root = _get_json(f"http://127.0.0.1:{port}/api/contents?token={token}")
        names = {item["name"] for item in root["content"]}
        assert {"README.md", "notebooks"} <= names, f"the root is not the repository: {names}"
        readme = _get_json(f"http://127.0.0.1:{port}/api/contents/README.md?token={token}")
        assert readme["content"].startswith("# "), "README.md is not readable from the lab"
        # The landing page is the lab on notebooks/.
        request = urllib.request.Request(f"http://127.0.0.1:{port}/?token={token}")
        with urllib.request.urlopen(request, timeout=5) as page:
            assert page.url.split("?")[0].endswith("/lab/tree/notebooks"), page.url
        # Unauthenticated requests are refused: the token protects the server.
        try:
            _get_json(f"http://127.0.0.1:{port}/api/contents")
            raise AssertionError("the server answered without a token")
        except urllib.error.HTTPError as error:
            assert error.code == 403
        # The lab front end itself is served.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}", timeout=5) as page:
            assert page.status == 200
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


def _tiny_notebook(path, solution: str, output: str) -> None:
    cells = [
        nbformat.v4.new_code_cell("print('lesson')"),
        nbformat.v4.new_code_cell(f"x = 0\n### BEGIN SOLUTION\nx = {solution}\n### END SOLUTION"),
    ]
    cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def test_student_copies_are_made_once_and_never_overwritten(tmp_path):
    source, student = tmp_path / "notebooks", tmp_path / "student"
    source.mkdir()
    _tiny_notebook(source / "01_a.ipynb", "41 + 1", "lesson\n")
    _tiny_notebook(source / "02_b.ipynb", "7", "lesson\n")
    written = ensure_student_copies(source, student)
    assert sorted(p.name for p in written) == ["01_a.ipynb", "02_b.ipynb"]
    copy = nbformat.read(student / "01_a.ipynb", as_version=4)
    assert "41 + 1" not in copy.cells[1].source, "the solution must be stripped"
    assert copy.cells[0].outputs[0]["text"] == "lesson\n", "teaching outputs are kept"

    copy.cells[1].source = "x = 'my own answer'"  # the learner works on the copy
    nbformat.write(copy, student / "01_a.ipynb")
    (student / "02_b.ipynb").unlink()  # ... and asks for a fresh copy of 02
    assert [p.name for p in ensure_student_copies(source, student)] == ["02_b.ipynb"]
    kept = nbformat.read(student / "01_a.ipynb", as_version=4)
    assert kept.cells[1].source == "x = 'my own answer'", "a learner's work was overwritten"


def test_the_lab_and_the_student_copies_in_chinese(tmp_path, monkeypatch):
    """`make lab-student LANG=zh-CN`: the Chinese student copies, from the Chinese notebooks."""
    from course_tools.classroom import lab

    makefile = (ROOT / "Makefile").read_text()
    assert "COURSE_LANG ?= $(if $(filter command line,$(origin LANG)),$(LANG))" in makefile
    assert "lab --student$(LANG_OPTION)" in makefile
    assert lab.language_folders("zh-Hans") == (NOTEBOOKS / "zh-Hans", ROOT / "student" / "zh-Hans")
    source = NOTEBOOKS / "zh-Hans"
    translated = sorted(p.name for p in source.glob("*.ipynb"))
    assert translated, "no Chinese notebook: python -m course_tools.translation.translate generate"
    student = tmp_path / "student" / "zh-Hans"
    written = ensure_student_copies(source, student)
    assert sorted(p.name for p in written) == translated
    copy = nbformat.read(student / translated[0], as_version=4)
    assert copy.metadata["translation"]["language"] == "zh-Hans"
    assert any("练习" in cell.source for cell in copy.cells if cell.cell_type == "markdown")
    assert not any("### BEGIN SOLUTION" in cell.source for cell in copy.cells), "solutions stripped"

    started = {}

    class _Server:  # stands in for JupyterLab: what would the lab start, and with what language?
        def __init__(self, command, env):
            started.update(command=command, env=env)

        def wait(self):
            return 0

    made = []
    monkeypatch.setattr(lab, "ensure_student_copies", lambda *folders: made.append(folders) or [])
    monkeypatch.setattr(lab.subprocess, "Popen", _Server)
    monkeypatch.setattr(lab.signal, "signal", lambda *args: None)
    assert lab.main(["--student", "--lang", "zh-CN", "--no-browser"]) == 0
    assert "--LabApp.default_url=/lab/tree/student/zh-Hans" in started["command"]
    assert started["env"]["LECTURES_LANG"] == "zh-Hans"
    assert made == [(NOTEBOOKS / "zh-Hans", ROOT / "student" / "zh-Hans")]
    assert lab.main(["--lang", "zh-TW", "--no-browser"]) == 0
    assert "--LabApp.default_url=/lab/tree/notebooks/zh-Hant" in started["command"]
