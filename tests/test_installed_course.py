"""The installed package is the course (issue 30): from a wheel, in a folder that is not a clone.

The wheel is built from the sdist (so both are checked: the sdist must carry what setup.py copies
into the wheel) and installed, ``--no-deps``, into a fresh virtual environment in a temporary
folder. That environment is created *without* system site-packages; the course's dependencies
(torch, Jupyter, ...) are made visible by one ``.pth`` line naming a folder of links to this
environment's site-packages, less the course's own entries (its editable finder and metadata). Why this way:
nothing is downloaded or reinstalled (torch alone is 1 GB), so the test needs no network and
takes seconds to set up, while ``lectures_lib`` (code and metadata) can come only from the wheel
(the test checks this); pip, too, comes from that line (``venv --without-pip``).

What runs: ``python -m course_tools copy`` in each language and ``--student``; the seven English
notebooks, top to bottom, in the copied folder, and one notebook per Chinese script (zh-Hans 07,
which reads the stored runs and picture from one folder deeper; zh-Hant 02). All 21:
``COURSE_ALL_LANGUAGES=1``. And each notebook's first cell, in an environment where
``lectures_lib`` cannot be imported: it prints the install line and installs the package (here
from the built wheel, through pip's ``PIP_FIND_LINKS``), then the cell goes on and its imports work.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest

from course_tools.publish.exercises import release_notebook
from lectures_lib.course import SHIPPED

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parent.parent
SITE = sysconfig.get_paths()["purelib"]
ENGLISH = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
HINT = "%pip install lectures-lib"
ALL = os.environ.get("COURSE_ALL_LANGUAGES") == "1"
RUNS = [("en", name) for name in ENGLISH] + (
    [(lang, name) for lang in ("zh-Hans", "zh-Hant") for name in ENGLISH] if ALL
    else [("zh-Hans", "07_efficient_attention.ipynb"), ("zh-Hant", "02_multi_head_attention.ipynb")])
LANG_OPTIONS = {"en": "en", "zh-Hans": "zh-CN", "zh-Hant": "zh-TW"}


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, **kwargs)
    assert result.returncode == 0, f"{command} failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def _clean_env(venv: Path, **extra) -> dict:
    """No trace of the clone: no PYTHONPATH, the fresh environment's bin/ first on PATH."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "JUPYTER_PATH")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env.pop("MPLBACKEND", None)  # the kernel picks its inline backend, as in JupyterLab
    return env | extra


def _is_the_course(name: str) -> bool:
    return name.lower().replace("-", "_").lstrip("_").startswith(("lectures_lib", "course_tools", "editable"))


@pytest.fixture(scope="module")
def dependencies(tmp_path_factory) -> Path:
    """This environment's packages without the course: a folder of links to each of them."""
    folder = tmp_path_factory.mktemp("dependencies")
    for entry in Path(SITE).iterdir():
        if not _is_the_course(entry.name) and entry.suffix != ".pth":
            (folder / entry.name).symlink_to(entry)
    return folder


def _fresh_venv(folder: Path, dependencies: Path) -> Path:
    """A virtual environment without the course, the dependencies on a .pth line (pip too)."""
    _run([sys.executable, "-m", "venv", "--without-pip", str(folder)])
    python = folder / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                   cwd=folder).stdout.strip()
    Path(purelib, "course_dependencies.pth").write_text(f"{dependencies}\n")
    return python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The sdist, then the wheel built from it (as pip builds an sdist it downloads)."""
    dist = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-c", "import sys; from setuptools import build_meta; "
          "build_meta.build_sdist(sys.argv[1])", str(dist)], cwd=ROOT)
    (sdist,) = dist.glob("*.tar.gz")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--wheel-dir", str(dist), str(sdist)], cwd=dist)
    (built,) = dist.glob("*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, dependencies, tmp_path_factory) -> Path:
    venv = tmp_path_factory.mktemp("venv")
    python = _fresh_venv(venv, dependencies)
    _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
         cwd=venv, env=_clean_env(venv))
    return python


@pytest.fixture(scope="module")
def copied(installed, tmp_path_factory) -> Path:
    """`copy` of every language into one learner's folder (not a clone: no .git, no tests/)."""
    folder = tmp_path_factory.mktemp("learner")
    venv = installed.parent.parent
    for lang in ("en", "zh-CN", "zh-TW"):
        _run([str(installed), "-m", "course_tools", "copy", str(folder), "--lang", lang],
             cwd=folder, env=_clean_env(venv))
    return folder


def test_the_wheel_holds_every_shipped_file_of_the_clone(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"lectures_lib/_course/{p.relative_to(ROOT).as_posix()}"
                for pattern in SHIPPED for p in ROOT.glob(pattern)}
    assert len(expected) > 30, expected
    assert expected <= names, f"missing from the wheel: {sorted(expected - names)}"
    for language in ("", "zh-Hans/", "zh-Hant/"):
        for name in ENGLISH:
            assert f"lectures_lib/_course/notebooks/{language}{name}" in names


def test_the_fresh_environment_imports_the_library_from_the_wheel_only(installed, tmp_path):
    venv = installed.parent.parent
    code = ("import lectures_lib, course_tools, torch; from lectures_lib.course import course_files; "
            "print(lectures_lib.__file__); print(course_files()); print(course_tools.__file__)")
    library, files, tools = _run([str(installed), "-c", code], cwd=tmp_path,
                                 env=_clean_env(venv)).stdout.split()
    assert Path(library).is_relative_to(venv) and Path(files).is_relative_to(venv), (library, files)
    assert Path(tools).is_relative_to(venv), tools  # the wheel holds both packages
    assert not Path(library).is_relative_to(ROOT) and not Path(tools).is_relative_to(ROOT)


def test_copy_writes_each_language_and_never_overwrites_without_force(installed, copied):
    venv = installed.parent.parent
    for folder in ("notebooks", "notebooks/zh-Hans", "notebooks/zh-Hant"):
        assert sorted(p.name for p in (copied / folder).glob("*.ipynb")) == ENGLISH, folder
    for name in ("long_range.json", "long_range.png", "long_range_sweep.json", "README.md"):
        assert (copied / "benchmarks" / name).is_file(), name
    for readme in ("README.md", "README.zh-CN.md", "README.zh-TW.md"):
        assert (copied / readme).is_file(), readme
    assert not (copied / ".git").exists() and not (copied / "tests").exists()
    # a learner's edit is kept, and the command says so; --force replaces it
    mine = copied / "notebooks" / ENGLISH[0]
    mine.write_text("my work")
    again = _run([str(installed), "-m", "course_tools", "copy", str(copied)], cwd=copied,
                 env=_clean_env(venv))
    assert mine.read_text() == "my work"
    assert f"notebooks/{ENGLISH[0]}" in again.stdout and "--force" in again.stdout, again.stdout
    _run([str(installed), "-m", "course_tools", "copy", str(copied), "--force"], cwd=copied,
         env=_clean_env(venv))
    assert mine.read_bytes() == (ROOT / "notebooks" / ENGLISH[0]).read_bytes()


@pytest.mark.parametrize("lang", ["en", "zh-Hant"])
def test_copy_student_writes_the_release(installed, tmp_path, lang):
    venv = installed.parent.parent
    _run([str(installed), "-m", "course_tools", "copy", str(tmp_path), "--student",
          "--lang", LANG_OPTIONS[lang]], cwd=tmp_path, env=_clean_env(venv))
    sub = "" if lang == "en" else lang
    for name in ENGLISH:
        path = ROOT / "notebooks" / sub / name
        expected = release_notebook(nbformat.read(path, as_version=4), name=path.stem)
        written = nbformat.read(tmp_path / "student" / sub / name, as_version=4)
        assert written == expected, f"{sub}/{name}: not the student release of the notebook"
    assert not (tmp_path / "notebooks").exists(), "--student writes only the student copies"


def test_copy_rejects_a_bad_language(installed, tmp_path):
    venv = installed.parent.parent
    result = subprocess.run([str(installed), "-m", "course_tools", "copy", str(tmp_path),
                             "--lang", "fr"], capture_output=True, text=True, cwd=tmp_path,
                            env=_clean_env(venv))
    assert result.returncode == 2 and "'fr'" in result.stderr and "zh-CN" in result.stderr


RUNNER = """
import sys
import nbclient, nbformat
from jupyter_client.kernelspec import KernelSpecManager
spec = KernelSpecManager().get_kernel_spec("python3")
assert spec.argv[0] in (sys.executable, "python"), spec.argv  # this environment's Python
path = sys.argv[1]
nb = nbformat.read(path, as_version=4)
nbclient.NotebookClient(nb, timeout=900, kernel_name="python3").execute()
nbformat.write(nb, sys.argv[2])
"""


@pytest.mark.parametrize(("lang", "name"), RUNS, ids=[f"{lang}-{name[:2]}" for lang, name in RUNS])
def test_every_notebook_runs_in_the_copied_folder(installed, copied, lang, name, tmp_path):
    venv = installed.parent.parent
    folder = copied / "notebooks" / ("" if lang == "en" else lang)
    out = tmp_path / name
    _run([str(installed), "-c", RUNNER, name, str(out)], cwd=folder,
         env=_clean_env(venv, OMP_NUM_THREADS="1"), timeout=1800)
    executed = nbformat.read(out, as_version=4)
    code = [cell for cell in executed.cells if cell.cell_type == "code"]
    first = json.dumps(code[0].outputs)
    assert HINT not in first, "the library is installed: the first cell installs nothing"
    if name.startswith("07"):  # the stored picture, read from the installed package
        (cell,) = [c for c in code if 'stored_benchmark("long_range.png")' in c.source]
        assert any("image/png" in o.get("data", {}) for o in cell.outputs), cell.outputs


def test_every_first_cell_starts_with_the_install_hint():
    for name in ENGLISH:
        for sub in ("", "zh-Hans/", "zh-Hant/"):
            nb = nbformat.read(ROOT / "notebooks" / f"{sub}{name}", as_version=4)
            first = next(c for c in nb.cells if c.cell_type == "code").source
            assert first.startswith("import importlib.util\n"), (sub, name)
            assert f'print("The course\'s library is missing; installing it:  {HINT}")' in first
            assert f"\n    {HINT}\n    importlib.invalidate_caches()" in first, (sub, name)


@pytest.mark.parametrize("name", [ENGLISH[0], ENGLISH[-1]])
def test_first_cell_on_a_hosted_service_installs_the_library_and_goes_on(wheel, dependencies,
                                                                        tmp_path, name):
    """An interpreter without lectures_lib (a fresh Colab): the first cell prints the one install
    line, runs it (pip finds the package: here the built wheel), then its imports succeed."""
    venv = tmp_path / "hosted"
    python = _fresh_venv(venv, dependencies)
    env = _clean_env(venv, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(wheel.parent))
    missing = subprocess.run([str(python), "-c", "import lectures_lib"], capture_output=True,
                             text=True, cwd=tmp_path, env=env)
    assert missing.returncode != 0 and "No module named 'lectures_lib'" in missing.stderr
    source = nbformat.read(ROOT / "notebooks" / name, as_version=4)
    first = next(c for c in source.cells if c.cell_type == "code")
    probe = nbformat.v4.new_code_cell("import lectures_lib\nprint(lectures_lib.__file__)")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(first.source), probe])
    nbformat.write(nb, tmp_path / "first.ipynb")
    _run([str(python), "-c", RUNNER, "first.ipynb", str(tmp_path / "out.ipynb")], cwd=tmp_path,
         env=env, timeout=900)
    executed = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    text = "".join(o.get("text", "") for o in executed.cells[0].outputs)
    assert f"The course's library is missing; installing it:  {HINT}" in text, text
    assert "Successfully installed lectures-lib" in text, text
    location = "".join(o.get("text", "") for o in executed.cells[1].outputs).strip()
    assert Path(location).is_relative_to(venv), location


def test_lab_from_the_installed_package_serves_a_copied_course(installed, tmp_path):
    """`python -m course_tools lab` outside a clone: the course is copied into ./lectures-course
    (the learner's folder, from the wheel) and JupyterLab is rooted there, on the student copies."""
    import secrets
    import socket
    import time
    import urllib.error
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token, venv = secrets.token_hex(16), installed.parent.parent
    log = open(tmp_path / "lab.log", "w+")
    server = subprocess.Popen(
        [str(installed), "-m", "course_tools", "lab", "--student", "--no-browser",
         "--port", str(port), "--token", token, "--lang", "zh-TW"],
        cwd=tmp_path, env=_clean_env(venv), stdout=log, stderr=subprocess.STDOUT)
    try:
        url = f"http://127.0.0.1:{port}/api/contents/student/zh-Hant?token={token}"
        deadline, listing = time.monotonic() + 120, None
        while time.monotonic() < deadline and server.poll() is None:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    listing = json.load(response)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.5)
        log.seek(0)
        assert listing is not None, f"the lab did not answer:\n{log.read()[-3000:]}"
        served = {item["name"] for item in listing["content"] if item["type"] == "notebook"}
        assert served == set(ENGLISH), served
        course = tmp_path / "lectures-course"
        assert (course / "benchmarks" / "long_range.json").is_file()  # 07's stored run
        assert (course / "README.zh-TW.md").is_file()
        assert not (course / "notebooks").exists(), "the student route copies no solutions"
    finally:
        server.terminate()
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
