"""Running a class through a term (issue 41), without a hub: the start-up check that names what is
missing, the hub's culler / admin / quiet-JupyterLab configuration, `hub status` read from a real
JupyterHub database and the exchange, the installed course as every command's default, and a
Dask worker that needs the course's version, not the client's path."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(sysconfig.get_paths()["purelib"])
pytest.importorskip("jupyterhub")


def _python_without(tmp_path: Path, *hidden: str) -> Path:
    """A fresh Python (venv) that sees this environment's packages, less ``hidden`` (and the
    course from the clone): an honest stand-in for an install that lacks them."""
    links = tmp_path / "links"
    links.mkdir()
    for entry in SITE.iterdir():
        name = entry.name.lower().replace("-", "_")
        if entry.suffix == ".pth" or name.startswith(("lectures_lib", "__editable__",
                                                       "_lectures_lib")):
            continue
        if any(name == h or name.startswith(h + "-") or name.startswith(h + ".")
               for h in hidden):
            continue
        (links / entry.name).symlink_to(entry)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()"
                              "['purelib'])"], capture_output=True, text=True, check=True)
    Path(purelib.stdout.strip(), "deps.pth").write_text(f"{links}\n{ROOT}\n")
    return python


@pytest.mark.slow
def test_the_hub_refuses_to_start_naming_a_missing_single_user_server(tmp_path):
    python = _python_without(tmp_path, "jupyter_server")
    code = ("import importlib.util as u; assert u.find_spec('jupyterhub'); "
            "assert u.find_spec('jupyter_server') is None; "
            "from course_tools.classroom.hub import hub_problem; print(hub_problem())")
    result = subprocess.run([str(python), "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, env={"PATH": os.environ["PATH"], "HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    message = result.stdout
    assert "jupyter_server (each student's single-user server)" in message, message
    assert "[class]" in message and ".whl" in message, message  # the wheel's install line
    assert "jupyterhub-idle-culler" not in message  # only what is missing is named


def test_every_server_the_hub_starts_is_installed_by_the_class_extra():
    """This environment has the class extra (make's install): nothing is missing; and the extra
    names every module the check looks for."""
    import tomllib

    from course_tools.classroom.operations import SERVERS, missing_parts

    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]["class"]
    names = {requirement.split(">")[0].split("=")[0].strip().replace("-", "_").lower()
             for requirement in extra}
    assert {module for module, _ in SERVERS} <= names, (extra, SERVERS)
    assert missing_parts(proxy=False) == []


def test_the_missing_proxy_is_named(monkeypatch, tmp_path):
    from course_tools.classroom.operations import missing_parts

    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no configurable-http-proxy
    assert missing_parts() == ["configurable-http-proxy (JupyterHub's proxy, from npm)"]


def _hub_dir(tmp_path: Path, students=(("alice", "en"), ("bob", "zh-Hans"))) -> Path:
    hub_dir = tmp_path / "hub"
    (hub_dir / "exchange").mkdir(parents=True)
    (hub_dir / "class.json").write_text(json.dumps(
        [{"username": name, "language": lang} for name, lang in students]))
    return hub_dir


def _configured(hub_dir: Path):
    from traitlets.config import Config

    from course_tools.classroom.hub import configure

    c = Config()
    configure(c, str(hub_dir), port=8000)
    return c


class _User:
    def __init__(self, name):
        self.name = name


class _Handler:
    def __init__(self, name):
        self.current_user = _User(name)


class _Spawner:
    def __init__(self, name):
        self.user = _User(name)


def test_the_hub_runs_the_idle_culler_as_a_service_and_culls_kernels(tmp_path):
    from course_tools.classroom.operations import CULLER, set_up

    hub_dir = _hub_dir(tmp_path)
    set_up(hub_dir, idle_timeout=900, admins=[])
    c = _configured(hub_dir)
    (culler,) = [s for s in c.JupyterHub.services if s["name"] == CULLER]
    assert culler["command"][1:3] == ["-m", "jupyterhub_idle_culler"]
    assert "--timeout=900" in culler["command"]
    (role,) = [r for r in c.JupyterHub.load_roles if r["name"] == CULLER]
    assert role["services"] == [CULLER] and "delete:servers" in role["scopes"]
    assert "--MappingKernelManager.cull_idle_timeout=900" in c.Spawner.args
    # the culler's own command line accepts those options (the installed culler, not a guess)
    result = subprocess.run([*culler["command"][:3], "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "--timeout" in result.stdout + result.stderr
    assert "--cull-every" in result.stdout + result.stderr
    # the course-submit service and the students' role are still there
    assert "course-submit" in [s["name"] for s in c.JupyterHub.services]
    assert "user" in [r["name"] for r in c.JupyterHub.load_roles]


def test_idle_timeout_zero_turns_culling_off_and_bad_values_are_refused(tmp_path):
    from course_tools.classroom.operations import CULLER, set_up

    hub_dir = _hub_dir(tmp_path)
    set_up(hub_dir, idle_timeout=0, admins=[])
    c = _configured(hub_dir)
    assert CULLER not in [s["name"] for s in c.JupyterHub.services]
    assert not any("cull_idle_timeout" in arg for arg in c.Spawner.args)
    for bad in (-1, 1.5, True, "60"):
        with pytest.raises(ValueError, match="idle_timeout must be an int >= 0"):
            set_up(hub_dir, idle_timeout=bad, admins=[])


def test_students_servers_open_without_the_news_popup_or_update_check(tmp_path):
    from course_tools.classroom.operations import set_up

    hub_dir = _hub_dir(tmp_path)
    set_up(hub_dir, idle_timeout=0, admins=[])
    args = _configured(hub_dir).Spawner.args
    assert "--LabApp.news_url=None" in args
    assert "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate" in args


def test_an_instructor_account_is_an_admin_without_a_server(tmp_path):
    from course_tools.classroom.operations import ADMIN_PASSWORDS, set_up

    hub_dir = _hub_dir(tmp_path)
    new = set_up(hub_dir, idle_timeout=0, admins=["teacher"])
    assert list(new) == ["teacher"]
    assert oct((hub_dir / ADMIN_PASSWORDS).stat().st_mode & 0o777) == "0o600"
    assert (hub_dir / ADMIN_PASSWORDS).read_text().splitlines()[1] == f"teacher,{new['teacher']}"
    assert set_up(hub_dir, idle_timeout=0, admins=["teacher"]) == {}  # kept, not shown again
    c = _configured(hub_dir)
    assert c.Authenticator.admin_users == {"teacher"}
    assert c.Authenticator.allowed_users == {"alice", "bob", "teacher"}
    assert c.JupyterHub.default_url(_Handler("teacher")) == "/hub/admin"
    assert not c.JupyterHub.default_url(_Handler("alice"))  # a student: their own server
    with pytest.raises(ValueError, match="instructor's account: it has no server"):
        c.Spawner.pre_spawn_hook(_Spawner("teacher"))
    # the admin logs in with that password through the hub's authenticator
    import asyncio

    authenticator = c.JupyterHub.authenticator_class(config=c)
    ok = asyncio.run(authenticator.authenticate(None, {"username": "teacher",
                                                       "password": new["teacher"]}))
    bad = asyncio.run(authenticator.authenticate(None, {"username": "teacher", "password": "x"}))
    assert (ok, bad) == ("teacher", None)


@pytest.mark.parametrize("name, message", [("alice", "is a student"), ("Root!", "user name")])
def test_an_admin_name_is_checked(tmp_path, name, message):
    from course_tools.classroom.operations import set_up

    with pytest.raises(ValueError, match=message):
        set_up(_hub_dir(tmp_path), idle_timeout=0, admins=[name])


def _submit(hub_dir: Path, student: str, stamp: str, names=("01_self_attention.ipynb",)) -> None:
    folder = hub_dir / "exchange" / student / stamp
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("{}")


def test_status_reads_who_is_online_from_the_hubs_database_and_submissions_from_the_exchange(
        tmp_path):
    from jupyterhub import orm

    from course_tools.classroom.operations import status

    hub_dir = _hub_dir(tmp_path, (("alice", "en"), ("bob", "zh-Hans"), ("chen", "zh-Hant")))
    session = orm.new_session_factory(f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}")()
    for name in ("alice", "bob", "chen"):
        user = orm.User(name=name)
        session.add(user)
        session.commit()
        spawner = orm.Spawner(name="", user=user)
        if name == "bob":  # bob's server runs
            spawner.server = orm.Server(ip="127.0.0.1", port=9000)
        session.add(spawner)
        session.commit()
    session.close()
    _submit(hub_dir, "alice", "20261205T013702-a1b2c3")
    _submit(hub_dir, "alice", "20261206T090000-d4e5f6",
            ("01_self_attention.ipynb", "02_multi_head_attention.ipynb"))
    _submit(hub_dir, "bob", "20261205T120000-aaaaaa")
    rows = {row["student"]: row for row in status(hub_dir)}
    assert [rows[n]["online"] for n in ("alice", "bob", "chen")] == [False, True, False]
    assert rows["alice"]["submissions"] == 2 and rows["alice"]["latest"] == "2026-12-06 09:00:00"
    assert rows["alice"]["notebooks"] == ["01_self_attention.ipynb",
                                          "02_multi_head_attention.ipynb"]
    assert rows["chen"]["submissions"] == 0 and rows["chen"]["latest"] is None
    assert rows["bob"]["language"] == "zh-Hans"


def test_status_command_prints_the_table_and_names_who_has_not_submitted(tmp_path, capsys):
    from course_tools.classroom.hub import main

    hub_dir = _hub_dir(tmp_path)
    _submit(hub_dir, "alice", "20261205T013702-a1b2c3")
    assert main(["status", str(hub_dir)]) == 0
    out = capsys.readouterr().out
    assert "0 online; 1 of 2 submitted; no submission: bob" in out
    assert "2026-12-05 01:37:02" in out
    assert main(["status", str(hub_dir), "--json"]) == 0
    assert [row["student"] for row in json.loads(capsys.readouterr().out)] == ["alice", "bob"]
    with pytest.raises(SystemExit):
        main(["status", str(tmp_path / "nowhere")])
    assert "hub_dir must be a hub's folder" in capsys.readouterr().err


# each hub command's arguments after HUBDIR (what it needs to get past argparse itself)
HUB_COMMANDS = {
    "status": [], "collect": ["OUT"], "assignments": [],
    "release": ["ps1", "01_self_attention", "--deadline", "2099-01-01T00:00"],
    "gradebook": ["ps1", "--reports", "grades.jsonl"],
    "feedback": ["ps1", "--reports", "grades.jsonl"], "remove-class": [],
}
AS_ROOT = {"release": "run it as root", "feedback": "run it as root",
           "remove-class": "needs root"}


@pytest.mark.parametrize("command", sorted(HUB_COMMANDS))
def test_every_hub_command_refuses_what_is_not_a_hub_and_a_user_where_it_needs_root(
        tmp_path, capsys, monkeypatch, command):
    """One parser for the hub's commands (classroom/commands.py): each refuses a missing
    folder naming hub_dir, and those that write as the students refuse to run without root,
    before doing anything."""
    from course_tools.classroom.hub import main

    rest = [str(tmp_path / a) if a in ("OUT", "grades.jsonl") else a for a in HUB_COMMANDS[command]]
    with pytest.raises(SystemExit) as refused:
        main([command, str(tmp_path / "nowhere"), *rest])
    assert refused.value.code == 2
    assert "hub_dir must be a hub's folder" in capsys.readouterr().err
    hub_dir = _hub_dir(tmp_path)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    if command in AS_ROOT:
        with pytest.raises(SystemExit):
            main([command, str(hub_dir), *rest])
        assert AS_ROOT[command] in capsys.readouterr().err
        assert not (tmp_path / "OUT").exists() and sorted(p.name for p in hub_dir.iterdir()) \
            == ["class.json", "exchange"]  # nothing done


def test_remove_class_refuses_while_the_hub_runs(tmp_path):
    from course_tools.classroom.operations import remove_class

    hub_dir = _hub_dir(tmp_path)
    (hub_dir / "jupyterhub.pid").write_text(str(os.getpid()))  # a live process
    with pytest.raises(RuntimeError, match="the hub still runs"):
        remove_class(hub_dir)


def test_remove_class_never_touches_an_account_the_hub_did_not_create(tmp_path, monkeypatch):
    """``root`` stands in the class list, ``nobody`` in a forged record with another uid: both
    kept (no command is run at all: subprocess.run is replaced by a recorder here)."""
    from course_tools.classroom import operations
    from course_tools.classroom.operations import CREATED, remove_class

    calls = []
    monkeypatch.setattr(operations.subprocess, "run", lambda *a, **k: calls.append(a))
    hub_dir = _hub_dir(tmp_path, (("root", "en"), ("nobody", "en")))
    (hub_dir / CREATED).write_text(json.dumps({"nobody": {"uid": 12345678}}))
    (hub_dir / "passwords.json").write_text("{}")
    done = remove_class(hub_dir)
    assert done["removed"] == [] and done["kept"] == ["nobody", "root"] and calls == []
    assert "passwords.json" in done["state"] and not (hub_dir / "passwords.json").exists()
    assert (hub_dir / "exchange").is_dir()  # the submissions stay


# ---- the course from the package --------------------------------------------------------------


def test_grade_release_and_source_default_to_the_installed_course():
    from course_tools.grading._collect import COURSE_NOTEBOOKS
    from course_tools.publish.exercises import course_source
    from lectures_lib.course import course_files

    assert COURSE_NOTEBOOKS == course_files() / "notebooks"
    assert course_source(Path("course")) == COURSE_NOTEBOOKS
    assert course_source(Path("01_self_attention")) == COURSE_NOTEBOOKS / "01_self_attention.ipynb"
    assert course_source(Path("zh-Hans/02_multi_head_attention.ipynb")) == (
        COURSE_NOTEBOOKS / "zh-Hans" / "02_multi_head_attention.ipynb")
    assert course_source(Path("no_such_notebook")) == Path("no_such_notebook")


def test_a_dask_worker_needs_the_courses_version_not_the_clients_path(tmp_path, monkeypatch):
    from course_tools.grading._cluster import (
        WORKER_AS_ROOT_ENV,
        WorkerRefused,
        _check_worker,
        _worker_course,
        course_fingerprint,
    )
    from course_tools.grading._collect import COURSE_NOTEBOOKS
    from lectures_lib.checks._base import secret_fingerprint

    expected = {"course": course_fingerprint(COURSE_NOTEBOOKS), "secret": secret_fingerprint()}
    options = {"sandbox": False, "allow_root_without_cgroup": False}
    if os.geteuid() == 0:  # the test machine runs as root; a real worker refuses root (issue 38)
        monkeypatch.setenv(WORKER_AS_ROOT_ENV, "unsafe")
    # the client's course lies at a path this worker does not have: its own installed course
    elsewhere = str(tmp_path / "instructors-laptop" / "attention" / "notebooks")
    assert _check_worker(expected, elsewhere, options) == COURSE_NOTEBOOKS
    # a copy of the same version anywhere is the same course
    copy = tmp_path / "copy"
    shutil.copytree(COURSE_NOTEBOOKS, copy)
    assert _worker_course("w", copy, expected["course"]) == copy
    # another version at the client's path: the worker falls back to its own, which matches
    other = tmp_path / "other"
    shutil.copytree(COURSE_NOTEBOOKS, other)
    (other / "01_self_attention.ipynb").write_text("{}")
    assert course_fingerprint(other) != expected["course"]
    assert _worker_course("w", other, expected["course"]) == COURSE_NOTEBOOKS
    # no copy of the batch's version at all: refused, naming what it has
    with pytest.raises(WorkerRefused, match="another version of the course"):
        _worker_course("w", other, "0" * 16 + "-" + "0" * 16)


# ---- hub collect -------------------------------------------------------------------------------


def test_collect_writes_nbgraders_layout_with_times_and_names_the_missing_and_the_late(
        tmp_path, capsys):
    from datetime import datetime

    from nbgrader.utils import parse_utc

    from course_tools.classroom.hub import main
    from course_tools.grading._student_ids import ids_from_folders

    hub_dir = _hub_dir(tmp_path, (("alice", "en"), ("bob", "zh-Hans"), ("chen", "zh-Hant")))
    _submit(hub_dir, "alice", "20261205T013702-a1b2c3",
            ("01_self_attention.ipynb", "02_multi_head_attention.ipynb"))
    _submit(hub_dir, "alice", "20261206T090000-d4e5f6", ("02_multi_head_attention.ipynb",))
    _submit(hub_dir, "bob", "20261206T120000-aaaaaa", ("01_self_attention.ipynb",))
    out = tmp_path / "submitted"
    assert main(["collect", str(hub_dir), str(out), "--assignment", "ps1", "--notebook",
                 "01_self_attention", "--deadline", "2026-12-06T00:00"]) == 0
    printed = capsys.readouterr().out
    assert "chen: no submission" in printed
    assert "2 of 3 collected; no submission: chen; late: bob" in printed
    # alice: her latest submission that holds 01 (the later one has only 02); only 01 copied
    assert sorted(p.name for p in (out / "alice" / "ps1").iterdir()) == [
        "01_self_attention.ipynb", "language.txt", "timestamp.txt"]
    stamp = (out / "alice" / "ps1" / "timestamp.txt").read_text()
    local = datetime(2026, 12, 5, 1, 37, 2).astimezone()
    assert datetime.fromisoformat(stamp) == local
    assert parse_utc(stamp) == parse_utc(local.isoformat())  # nbgrader reads the same time
    assert "LATE by 12:00:00" in printed.splitlines()[1], printed
    assert not (out / "chen").exists()
    notebooks = sorted(out.glob("*/ps1/*.ipynb"))
    assert ids_from_folders(notebooks) == ["alice", "bob"]  # grade --student-ids-from-folders


def test_collect_without_options_keeps_the_flat_layout_and_every_notebook(tmp_path, capsys):
    from course_tools.classroom.hub import main

    hub_dir = _hub_dir(tmp_path)
    _submit(hub_dir, "alice", "20261205T013702-a1b2c3",
            ("01_self_attention.ipynb", "02_multi_head_attention.ipynb"))
    out = tmp_path / "out"
    assert main(["collect", str(hub_dir), str(out)]) == 0
    assert sorted(p.name for p in (out / "alice").iterdir()) == [
        "01_self_attention.ipynb", "02_multi_head_attention.ipynb", "language.txt",
        "timestamp.txt"]
    assert "1 of 2 collected; no submission: bob" in capsys.readouterr().out
    for bad in (["--assignment", "../up"], ["--deadline", "tomorrow"]):
        with pytest.raises(SystemExit):
            main(["collect", str(hub_dir), str(out), *bad])
    assert "--deadline must be an ISO time" in capsys.readouterr().err


def test_the_nbgrader_csv_carries_the_collected_submission_time(tmp_path):
    import csv
    import io
    from datetime import datetime

    from course_tools.classroom.collect import collect
    from course_tools.grading._report import _failed_report, format_nbgrader_csv
    from course_tools.grading._student_ids import ids_from_folders

    hub_dir = _hub_dir(tmp_path)
    _submit(hub_dir, "alice", "20261205T013702-a1b2c3")
    _submit(hub_dir, "bob", "20261206T120000-aaaaaa")
    collect(hub_dir, tmp_path / "submitted", assignment="ps1")
    paths = sorted((tmp_path / "submitted").glob("*/ps1/*.ipynb"))
    reports = [_failed_report(path, "not graded in this test") for path in paths]
    (tmp_path / "submitted" / "bob" / "ps1" / "timestamp.txt").write_text("=HYPERLINK(1)")
    rows = list(csv.DictReader(io.StringIO(format_nbgrader_csv(reports, ids_from_folders(paths)))))
    assert [row["student_id"] for row in rows] == ["alice", "bob"]
    assert datetime.fromisoformat(rows[0]["timestamp"]) == datetime(2026, 12, 5, 1, 37,
                                                                     2).astimezone()
    assert rows[1]["timestamp"] == ""  # not a time: left out, never a formula
