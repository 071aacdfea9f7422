"""A term's operations on the real system (issue 41): grading from the built wheel outside any
clone with no --course, the end-of-term removal of the Unix users the hub created, no fontconfig
error in the sandbox, JupyterLab's news off for students, and ``make system-deps`` waiting for
apt's lock. The system tier: real users (root), the sandbox (bubblewrap), a built wheel, a
JupyterLab server, apt."""

from __future__ import annotations

import fcntl
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import sysconfig
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from .conftest import require_system_package
from .test_installed_course import _clean_env, _run, wheel  # noqa: F401 - the wheel fixture

pytestmark = [pytest.mark.system, pytest.mark.slow]
ROOT = Path(__file__).resolve().parent.parent
SITE = Path(sysconfig.get_paths()["purelib"])


def _root():
    if os.geteuid() != 0:
        pytest.skip("needs root (Unix users, apt)")


# ---- the course from the installed package -------------------------------------------------------


@pytest.fixture(scope="module")
def wheel_python(wheel, tmp_path_factory) -> Path:  # noqa: F811
    """A fresh environment with the course from the wheel only; its dependencies are this
    environment's site-packages, named on a .pth line (a real folder, so the sandbox binds it)."""
    venv = tmp_path_factory.mktemp("class-venv")
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                    "['purelib'])"], cwd=venv).stdout.strip()
    Path(purelib, "course_dependencies.pth").write_text(f"{SITE}\n")
    _run([str(python), "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", str(wheel)],
         cwd=venv, env=_clean_env(venv))
    return python


def test_grade_outside_a_clone_finds_the_course_the_wheel_ships(wheel_python, tmp_path):
    require_system_package("bubblewrap")
    venv = wheel_python.parent.parent
    env = _clean_env(venv)
    where = _run([str(wheel_python), "-c", "import lectures_lib; from course_tools.grading._collect"
                  " import COURSE_NOTEBOOKS as c; print(lectures_lib.__file__); print(c)"],
                 cwd=tmp_path, env=env).stdout.split()
    assert all(Path(p).is_relative_to(venv) for p in where), where
    # a submission: the course's own answers with nbgrader's ids, from the wheel by `source`
    # (the notebook named from the installed course, not a path)
    submitted = tmp_path / "submitted" / "s1"
    _run([str(wheel_python), "-m", "course_tools", "source", "01_self_attention",
          str(submitted)], cwd=tmp_path, env=env)
    result = subprocess.run([str(wheel_python), "-m", "course_tools", "grade",
                             str(submitted / "01_self_attention.ipynb"), "--format", "json",
                             "--quiet"], capture_output=True, text=True, cwd=tmp_path, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "not a folder" not in result.stderr
    (report,) = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert report["score"] == report["max_score"] > 0, report


def test_release_reads_the_installed_course(wheel_python, tmp_path):
    venv = wheel_python.parent.parent
    env = _clean_env(venv)
    _run([str(wheel_python), "-m", "course_tools", "release", "zh-Hant/01_self_attention",
          str(tmp_path / "release")], cwd=tmp_path, env=env)
    released = (tmp_path / "release" / "01_self_attention.ipynb").read_text()
    assert "NotImplementedError" in released and "BEGIN HIDDEN TESTS" not in released


# ---- the end of term -----------------------------------------------------------------------------


def test_remove_class_removes_only_the_users_the_hub_created(tmp_path):
    _root()
    pytest.importorskip("jupyterhub")
    tag = f"{os.getpid() % 10000}{secrets.token_hex(2)}"
    made, theirs = f"term{tag}a", f"term{tag}b"
    subprocess.run(["useradd", "--create-home", "--user-group", theirs], check=True)
    try:
        (tmp_path / "class.csv").write_text(f"username,language\n{made},en\n{theirs},zh-TW\n")
        hub_dir = tmp_path / "hub"
        _run([sys.executable, "-m", "course_tools", "hub", str(tmp_path / "class.csv"), "--dir",
              str(hub_dir), "--create-users", "--config-only", "--admin", "teacher"],
             cwd=tmp_path)
        home = Path(pwd.getpwnam(made).pw_dir)
        assert home.is_dir()
        assert set(json.loads((hub_dir / "created-users.json").read_text())) == {made}
        out = _run([sys.executable, "-m", "course_tools", "hub", "remove-class", str(hub_dir),
                    "--remove-homes"], cwd=tmp_path).stdout
        assert f"removed users: {made} (and their homes)" in out, out
        assert f"kept (not created by this hub): {theirs}" in out, out
        with pytest.raises(KeyError):
            pwd.getpwnam(made)
        assert not home.exists()
        assert pwd.getpwnam(theirs).pw_uid  # untouched
        assert not (hub_dir / "passwords.json").exists() and (hub_dir / "exchange").is_dir()
    finally:
        for name in (made, theirs):
            subprocess.run(["userdel", "--remove", name], capture_output=True)


# ---- what students see ---------------------------------------------------------------------------


def test_the_sandbox_has_fontconfigs_configuration():
    """The kernel's first plot asks fontconfig for fonts; with no /etc/fonts inside the sandbox
    it printed "Fontconfig error: Cannot load default config file" into the notebook."""
    require_system_package("bubblewrap")
    from course_tools.grading.sandbox import Limits, _base_command, seal

    if not shutil.which("fc-match"):
        pytest.skip("fontconfig's fc-match is not installed")
    result = subprocess.run([*_base_command(Limits()), "--setenv", "HOME", "/tmp", *seal(), "--",
                             "fc-match", "sans-serif"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "Fontconfig error" not in result.stderr, result.stderr
    assert re.search(r"\.(ttf|otf|ttc)", result.stdout), result.stdout


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_students_jupyterlab_turns_the_news_off(tmp_path):
    """JupyterLab started with the students' options tells its page the news are disabled
    (so no "Would you like to receive official Jupyter news?" popup); without them it does not."""
    pytest.importorskip("jupyterlab")
    from course_tools.classroom.operations import QUIET_LAB

    def page_news(extra: list[str]) -> dict:
        port, token = _free_port(), secrets.token_hex(8)
        server = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}",
             "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
             f"--ServerApp.root_dir={tmp_path}", "--allow-root", *extra],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path,
            env={**os.environ, "HOME": str(tmp_path), "JUPYTER_NO_CONFIG": "1"})
        try:
            for _ in range(120):
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab?token={token}",
                                                timeout=5) as response:
                        html = response.read().decode()
                    break
                except OSError:
                    time.sleep(0.5)
            else:
                raise AssertionError("JupyterLab did not answer")
        finally:
            server.terminate()
            server.wait(timeout=30)
        data = re.search(r'id="jupyter-config-data"[^>]*>\s*(\{.*?\})\s*</script>', html, re.S)
        return json.loads(data.group(1))["news"]

    assert page_news(QUIET_LAB) == {"disabled": True}
    assert page_news([]) == {"disabled": False}


# ---- make system-deps ----------------------------------------------------------------------------


def test_system_deps_apt_get_waits_for_apts_lock():
    _root()
    if not shutil.which("apt-get") or not Path("/var/lib/dpkg/lock-frontend").exists():
        pytest.skip("not a Debian system")
    apt_get = _run(["make", "-s", "--no-print-directory", "-f", str(ROOT / "Makefile"), "--eval",
                    "print-apt: ; @echo $(APT_GET)", "print-apt", "APT_LOCK_TIMEOUT=60"],
                   cwd=ROOT).stdout.split()
    assert "DPkg::Lock::Timeout=60" in apt_get, apt_get
    command = [*apt_get, "install", "-y", "-q", "--no-install-recommends", "bubblewrap"]
    lock = open("/var/lib/dpkg/lock-frontend", "r+")  # noqa: SIM115 - held across the thread
    try:
        fcntl.lockf(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.close()
        pytest.skip("apt's lock is held by another process right now")
    release = threading.Timer(4.0, lambda: (fcntl.lockf(lock, fcntl.LOCK_UN), lock.close()))
    start = time.monotonic()
    release.start()
    try:
        plain = subprocess.run(["apt-get", "install", "-y", "-q", "bubblewrap"],
                               capture_output=True, text=True)
        waited = subprocess.run(command, capture_output=True, text=True, timeout=120,
                                env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
    finally:
        release.join()
    assert plain.returncode != 0 and "lock" in plain.stderr  # what failed at once before
    assert waited.returncode == 0, waited.stderr
    assert time.monotonic() - start >= 3.5  # it waited for the lock, then went on


def test_a_plot_in_the_sandboxed_kernel_prints_no_fontconfig_error(tmp_path):
    """The student's kernel (the sandbox kernel the hub installs), driven as JupyterLab does:
    matplotlib's first font scan (which runs fc-list) and a drawn figure leave no fontconfig
    error in the cell's output."""
    require_system_package("bubblewrap")
    from jupyter_client import KernelManager
    from jupyter_client.kernelspec import KernelSpecManager

    from course_tools.grading.sandbox import kernel as sandbox_kernel

    kernels = tmp_path / "kernels"
    assert sandbox_kernel.main(["--install", "--prefix", str(kernels)]) == 0
    specs = KernelSpecManager(kernel_dirs=[str(kernels / "share" / "jupyter" / "kernels")])
    manager = KernelManager(kernel_name=sandbox_kernel.KERNEL_NAME, kernel_spec_manager=specs)
    (tmp_path / "notebook").mkdir()
    manager.start_kernel(cwd=str(tmp_path / "notebook"),
                         env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1"))
    client = manager.client()
    client.start_channels()
    outputs = []
    try:
        client.wait_for_ready(timeout=180)
        code = ("import matplotlib.font_manager as fm, matplotlib.pyplot as plt\n"
                "fm._load_fontmanager(try_read_cache=False)\n"
                "plt.plot([0, 1]); plt.title('注意力'); plt.gcf().canvas.draw()\n"
                "print('fonts:', len(fm.findSystemFonts()))")
        reply = client.execute_interactive(code, output_hook=outputs.append, timeout=240)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    assert reply["content"]["status"] == "ok", reply["content"]
    text = "".join(m["content"].get("text", "") for m in outputs if m["msg_type"] == "stream")
    assert "fonts:" in text and "fonts: 0" not in text, text
    assert "Fontconfig" not in text, text
