"""What the class hub's system tests share (tests/test_hub_*.py, test_assignment_term.py,
test_class_e2e.py): free ports, waiting for the hub to answer, the test's Unix users, a Python
the students' accounts can execute, and :func:`running_hub`, a real hub for a class of real Unix
users (created by the hub's ``--create-users``, removed afterwards)."""

from __future__ import annotations

import contextlib
import csv
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import types
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def require_hub(*, browser: bool = True):
    """At the top of a hub test module: skip it, naming what is missing (under CI: fail, as
    :func:`~tests.conftest.require_system_package` does), without the hub's system packages, or
    where a hub or its sandbox cannot run here. ``browser``: Chromium and Playwright too, and
    returns Playwright's ``sync_api`` (else None)."""
    from course_tools.classroom.hub import hub_problem
    from course_tools.grading.sandbox import sandbox_problem

    from .conftest import require_system_package

    packages = ("configurable-http-proxy", "bubblewrap", *(("chromium",) if browser else ()))
    for package in packages:
        require_system_package(package, module_level=True)
    problem = hub_problem(check_python=False) or sandbox_problem()
    if problem:
        pytest.skip(f"the hub test needs it: {problem}", allow_module_level=True)
    if not browser:
        return None
    from .browser_helpers import require_playwright

    return require_playwright()


def exists(name: str) -> bool:
    """Whether the Unix user ``name`` exists."""
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def run_as(user: str, *command: str) -> subprocess.CompletedProcess:
    """``command`` run as the Unix user ``user`` (its output captured)."""
    return subprocess.run(["runuser", "-u", user, "--", *command], capture_output=True, text=True)


def free_ports(count: int = 4) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1 (the hub uses four), from a
    start that differs between test processes."""
    for base in range(20000 + os.getpid() % 5000 * 4, 60000, 4):
        try:
            for port in range(base, base + count):
                with socket.socket() as probe:
                    probe.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
    raise RuntimeError(f"no {count} free ports")


def stop_group(process: subprocess.Popen, timeout: float = 30) -> None:
    """Stop ``process`` and its process group (a hub stops its proxy, services and servers;
    a Dask scheduler its children): SIGTERM, then SIGKILL after ``timeout`` seconds."""
    with contextlib.suppress(ProcessLookupError):  # one that failed has ended already
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)


def wait_for(url: str, server: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Wait until ``url`` answers 200; fails with the end of ``log`` when ``server`` exits or
    ``timeout`` seconds pass first."""
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


def class_python(folder: Path) -> Path:
    """A Python the students can execute: this one, or (when it lies in a private folder such as
    /root/.pyenv) a virtual environment of the system's Python of the same version, with this
    environment's packages and the clone on a .pth line, its Jupyter folders linked."""
    if run_as("nobody", sys.executable, "-c", "pass").returncode == 0:
        return Path(sys.executable)
    base = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not base.exists() or run_as("nobody", str(base), "-c", "pass").returncode != 0:
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


def remove_users(names, *, check: bool = True) -> None:
    """Remove the test's Unix users ``names`` with their homes (their processes killed first:
    userdel refuses while one is still ending); ``check``: fail naming one that stays."""
    for name in names:
        for _ in range(10):
            if not exists(name):
                break
            subprocess.run(["pkill", "-KILL", "-u", name], capture_output=True)
            time.sleep(1)
            subprocess.run(["userdel", "--remove", name], capture_output=True)
        assert not check or not exists(name), f"could not remove the test user {name}"


@contextlib.contextmanager
def running_hub(students: dict[str, str], *options: str, subdomains: bool = False):
    """A hub for ``students`` ({user: language}, created as Unix users, removed afterwards),
    started as ``python -m course_tools hub CLASS --create-users *options``. Yields a namespace:
    ``url``, ``hub_dir``, ``passwords`` ({user: password}), ``python`` (one the students can
    run), ``server`` (the hub's process; a test may stop it) and ``log`` (the hub's log, the
    students' servers' too). ``subdomains``: each student and service on a subdomain of
    ``localhost`` (``--subdomain-host``; Chromium resolves ``*.localhost`` itself)."""
    existing = [name for name in students if exists(name)]
    assert not existing, f"test users already exist: {existing}"
    folder = Path(tempfile.mkdtemp(prefix="course-hub-", dir="/tmp"))
    os.chmod(folder, 0o711)  # the students' servers read the hub's kernel spec below it
    class_list = folder / "class.csv"
    with class_list.open("w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["username", "language"])
        writer.writerows(students.items())
    python = class_python(folder)
    problem = subprocess.run([str(python), "-c", "from course_tools.classroom.hub import "
                              "hub_problem; print(hub_problem() or '')"], capture_output=True,
                             text=True, check=True).stdout.strip()
    if problem:
        shutil.rmtree(folder)
        pytest.skip(f"the hub test needs it: {problem}")
    port = free_ports()
    url = f"http://{'localhost' if subdomains else '127.0.0.1'}:{port}"
    log = (folder / "hub.log").open("w")
    server = subprocess.Popen(
        [str(python), "-m", "course_tools", "hub", str(class_list), "--dir",
         str(folder / "hub"), "--port", str(port), "--create-users", *options,
         *(["--subdomain-host", url] if subdomains else [])],
        cwd=folder, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(f"{url}/hub/login", server, folder / "hub.log")
        with (folder / "hub" / "passwords.csv").open() as file:
            passwords = {row["username"]: row["password"] for row in csv.DictReader(file)}
        yield types.SimpleNamespace(url=url, hub_dir=folder / "hub", passwords=passwords,
                                    python=python, server=server, log=folder / "hub.log")
    finally:
        stop_group(server)
        log.close()
        print((folder / "hub.log").read_text()[-6000:])
        try:
            remove_users(students)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
