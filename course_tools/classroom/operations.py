"""Running a class's hub through a term (issue 41): what :mod:`.hub` starts, kept apart from it.

* **one install**: :func:`missing_parts` names every server the hub starts that this Python lacks
  (the students' single-user server, JupyterLab, the idle culler, the proxy); ``hub`` refuses to
  start while any is missing, rather than letting a student's login hang at "50 %";
* **idle culling** (``--idle-timeout SECONDS``, ``0``: off): ``jupyterhub-idle-culler`` stops
  a server idle that long, jupyter_server a kernel (``MappingKernelManager.cull_idle_timeout``);
* **an instructor's account** (``--admin NAME``): a hub-only login (no Unix user, no server)
  that lands on JupyterHub's admin page (who is online; start or stop a student's server); its
  password in ``HUBDIR/admin-passwords.csv`` (``0600``);
* **students' servers without popups**: JupyterLab's news feed and update check off;
* ``hub collect HUBDIR OUT``: :mod:`.collect` (each student's latest submission; it also
  reads the exchange for ``hub status`` and the submit page);
* ``hub status HUBDIR``: who is online (the hub's state), who submitted what, when (exchange);
* ``hub remove-class HUBDIR``: at the end of term, the Unix users the hub created (recorded in
  ``HUBDIR/created-users.json`` by ``--create-users``; never one it did not create), their home
  folders only with ``--remove-homes``, and the hub's state.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from course_tools.classroom.commands import HubCommand
from course_tools.classroom.kernels import RUNTIME_BASE, public_dir
from course_tools.classroom.roster import _write_private

OPERATIONS = "operations.json"  # HUBDIR/operations.json: the culler's timeout, the admins
CREATED = "created-users.json"  # the Unix users `hub --create-users` made (remove-class's list)
ADMIN_PASSWORDS = "admin-passwords.csv"
CULLER = "idle-culler"
DEFAULT_IDLE_TIMEOUT = 3600
# What the hub starts, by module, and the name a person knows it by.
SERVERS = (
    ("jupyterhub", "JupyterHub (the hub)"),
    ("jupyter_server", "jupyter_server (each student's single-user server)"),
    ("jupyterlab", "JupyterLab (the interface each student's server serves)"),
    ("jupyterhub_idle_culler", "jupyterhub-idle-culler (stops idle servers)"),
)
INSTALL = ("pip install '<the course's wheel>[class]' (e.g. pip install "
           "'lectures_lib-0.1.0-py3-none-any.whl[class]'; from a clone: pip install -e '.[class]')")
PROXY = "configurable-http-proxy"
# The students' servers: no news popup, no update check (added to the server's arguments).
QUIET_LAB = ["--LabApp.news_url=None",
             "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"]


def missing_parts(*, proxy: bool = True) -> list[str]:
    """The servers the hub starts that this Python (or PATH, for the proxy) lacks, by name."""
    missing = []
    for module, name in SERVERS:
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    if proxy and not shutil.which(PROXY):
        missing.append(f"{PROXY} (JupyterHub's proxy, from npm)")
    return missing


def servers_problem() -> str | None:
    """Why the hub would start servers that cannot run (None when every one is installed)."""
    missing = missing_parts(proxy=False)
    if not missing:
        return None
    return (f"the hub starts servers that are not installed in {sys.executable}: "
            f"{'; '.join(missing)}. Install them: {INSTALL}")


# ---- hub options: the culler, the instructor's account -----------------------------------------


def add_options(parser: argparse.ArgumentParser) -> None:
    """``hub``'s options for running a term."""
    parser.add_argument("--idle-timeout", type=int, default=DEFAULT_IDLE_TIMEOUT,
                        metavar="SECONDS",
                        help="stop a student's server, and shut down a kernel, idle this long "
                        f"(jupyterhub-idle-culler; {DEFAULT_IDLE_TIMEOUT}; 0: never)")
    parser.add_argument("--admin", action="append", default=[], metavar="NAME",
                        help="an instructor's hub account (admin page, no server); repeatable; "
                        f"its password in HUBDIR/{ADMIN_PASSWORDS}")
    parser.epilog = ("Through the term: `hub release HUBDIR NAME NOTEBOOK --deadline T`, `hub "
                     "collect HUBDIR OUT --assignment NAME`, `hub gradebook`, `hub feedback`, `hub "
                     "status HUBDIR`, `hub remove-class HUBDIR` (each: --help).")


def accounts_absent(class_list: Path) -> list[str]:
    """The class list's students without a Unix account (before ``--create-users`` runs)."""
    import pwd

    from course_tools.classroom.roster import read_class_list

    absent = []
    for student in read_class_list(class_list):
        try:
            pwd.getpwnam(student.username)
        except KeyError:
            absent.append(student.username)
    return absent


def record_created_users(hub_dir: Path, names: list[str]) -> None:
    """Add ``names`` (accounts ``--create-users`` just made) to ``HUBDIR/created-users.json``."""
    import pwd

    path = Path(hub_dir) / CREATED
    created = json.loads(path.read_text()) if path.exists() else {}
    for name in names:
        try:
            created[name] = {"uid": pwd.getpwnam(name).pw_uid,
                             "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        except KeyError:
            continue  # not made after all (prepare stopped first)
    _write_private(path, json.dumps(created, indent=1))


def set_up(hub_dir: Path, *, idle_timeout: int, admins: list[str]) -> dict[str, str]:
    """Write ``HUBDIR/operations.json`` (read by :func:`configure_operations`) and each new
    admin's password (hashed beside the students'); returns the new admins' passwords."""
    from course_tools.classroom.roster import USERNAME, _class, _hash

    if isinstance(idle_timeout, bool) or not isinstance(idle_timeout, int) or idle_timeout < 0:
        raise ValueError(f"idle_timeout must be an int >= 0 (seconds; 0: never), "
                         f"got {idle_timeout!r}")
    students = _class(hub_dir)
    for name in admins:
        if not isinstance(name, str) or not USERNAME.fullmatch(name):
            raise ValueError(f"admin must be a user name (lower-case letters, digits, _ or -), "
                             f"got {name!r}")
        if name in students:
            raise ValueError(f"admin {name!r} is a student in the class list: give the "
                             "instructor's account another name")
    hub_dir = Path(hub_dir)
    hashes_path = hub_dir / "passwords.json"
    hashes = json.loads(hashes_path.read_text()) if hashes_path.exists() else {}
    new = {}
    for name in admins:
        if name not in hashes:
            new[name] = secrets.token_urlsafe(12)
            salt = secrets.token_bytes(16)
            hashes[name] = {"salt": salt.hex(), "hash": _hash(new[name], salt)}
    _write_private(hashes_path, json.dumps(hashes, indent=1))
    if new:
        path = hub_dir / ADMIN_PASSWORDS
        old = path.read_text().splitlines()[1:] if path.exists() else []
        _write_private(path, "username,password\n" + "".join(f"{line}\n" for line in old)
                       + "".join(f"{name},{password}\n" for name, password in new.items()))
    (hub_dir / OPERATIONS).write_text(json.dumps(
        {"idle_timeout": idle_timeout, "admins": sorted(set(admins))}, indent=1))
    return new


def configure_operations(c, hub_dir: Path, *, port: int) -> None:
    """The term's part of JupyterHub's config (after :func:`~.hub.configure` filled the rest):
    the culler service and its role, kernel culling and a quiet JupyterLab in each student's
    server, the admins."""
    path = Path(hub_dir) / OPERATIONS
    settings = json.loads(path.read_text()) if path.exists() else {}
    timeout = int(settings.get("idle_timeout", DEFAULT_IDLE_TIMEOUT))
    admins = set(settings.get("admins", []))
    args = [*c.Spawner.args, *QUIET_LAB]
    if timeout:
        c.JupyterHub.services = [*c.JupyterHub.services, {
            "name": CULLER,
            "command": [sys.executable, "-m", "jupyterhub_idle_culler", f"--timeout={timeout}",
                        f"--cull-every={max(10, min(300, timeout // 4))}"],
        }]
        c.JupyterHub.load_roles = [*c.JupyterHub.load_roles, {
            "name": CULLER, "services": [CULLER],
            "scopes": ["list:users", "read:users:activity", "read:servers", "delete:servers"],
        }]
        args += [f"--MappingKernelManager.cull_idle_timeout={timeout}",
                 f"--MappingKernelManager.cull_interval={max(10, min(300, timeout // 4))}",
                 "--MappingKernelManager.cull_connected=True"]
    c.Spawner.args = args
    if admins:
        c.Authenticator.admin_users = admins
        c.Authenticator.allowed_users = set(c.Authenticator.allowed_users) | admins
        release = c.Spawner.pre_spawn_hook

        def no_server_for_admins(spawner):
            if spawner.user.name in admins:
                raise ValueError(f"{spawner.user.name} is the instructor's account: it has no "
                                 "server (the admin page is /hub/admin)")
            return release(spawner)

        c.Spawner.pre_spawn_hook = no_server_for_admins

        def landing(handler):
            user = handler.current_user
            return "/hub/admin" if user is not None and user.name in admins else None

        c.JupyterHub.default_url = landing


# ---- hub status ----------------------------------------------------------------------------------


def online(hub_dir: Path) -> dict[str, str | None]:
    """From the hub's database: each user with a running server -> its last activity (or None).
    Empty when the hub has never run."""
    path = Path(hub_dir) / "jupyterhub.sqlite"
    if not path.exists():
        return {}
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        rows = connection.execute(
            "SELECT users.name, spawners.last_activity FROM spawners JOIN users "
            "ON spawners.user_id = users.id WHERE spawners.server_id IS NOT NULL").fetchall()
    finally:
        connection.close()
    return {name: activity for name, activity in rows}


def status(hub_dir: Path) -> list[dict]:
    """One row per student: language, online (with the last activity), submissions, the latest."""
    from course_tools.classroom.collect import notebook_names, submissions
    from course_tools.classroom.roster import _class

    running = online(hub_dir)
    rows = []
    for student, language in sorted(_class(hub_dir).items()):
        runs = submissions(hub_dir, student)
        rows.append({
            "student": student, "language": language, "online": student in running,
            "last_activity": running.get(student),
            "submissions": len(runs),
            "latest": runs[-1][0].replace(tzinfo=None).isoformat(sep=" ") if runs else None,
            "notebooks": notebook_names(runs[-1][1]) if runs else [],
        })
    return rows


def _status_main(argv: list[str]) -> int:
    parser = HubCommand("status", "Who is online and who submitted what, when.")
    parser.add_argument("--json", action="store_true", help="one JSON object per student")
    args = parser.parse_hub(argv)
    rows = status(args.hub_dir)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(f"{'student':<20} {'lang':<8} {'online':<7} {'subm.':>5}  latest submission    notebooks")
    for row in rows:
        print(f"{row['student']:<20} {row['language']:<8} {'yes' if row['online'] else 'no':<7} "
              f"{row['submissions']:>5}  {row['latest'] or '-':<20} "
              f"{', '.join(row['notebooks']) or '-'}")
    missing = [row["student"] for row in rows if not row["submissions"]]
    print(f"{sum(r['online'] for r in rows)} online; {len(rows) - len(missing)} of {len(rows)} "
          f"submitted; no submission: {', '.join(missing) or 'none'}")
    return 0


# ---- hub remove-class ------------------------------------------------------------------------------


STATE = ("jupyterhub.sqlite", "jupyterhub_cookie_secret", "jupyterhub.pid", "proxy.pid",
         "passwords.json", "passwords.csv", ADMIN_PASSWORDS, OPERATIONS, "jupyterhub_config.py",
         "class.json", CREATED)


def remove_class(hub_dir: Path, *, remove_homes: bool = False, keep_state: bool = False
                 ) -> dict[str, list[str]]:
    """Remove the Unix users the hub created (their homes only with ``remove_homes``) and the hub's
    state. A user the hub did not create, or whose uid changed since, is never touched. Refuses
    while the hub runs."""
    import pwd

    hub_dir = Path(hub_dir)
    pid_file = hub_dir / "jupyterhub.pid"
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text().strip()), 0)
        except (ValueError, ProcessLookupError):
            pass
        else:
            raise RuntimeError(f"the hub still runs (pid file {pid_file}): stop it first")
    path = hub_dir / CREATED
    created = json.loads(path.read_text()) if path.exists() else {}
    done: dict[str, list[str]] = {"removed": [], "kept": [], "state": []}
    from course_tools.classroom.roster import _class

    students = _class(hub_dir) if (hub_dir / "class.json").exists() else {}
    for name in sorted(set(students) | set(created)):
        record = created.get(name)
        try:
            uid = pwd.getpwnam(name).pw_uid
        except KeyError:
            continue  # already gone
        if record is None or record.get("uid") != uid:
            done["kept"].append(name)  # not the hub's: never touched
            continue
        command = ["userdel", *(["--remove"] if remove_homes else []), name]
        subprocess.run(command, check=True, capture_output=True)
        subprocess.run(["groupdel", name], capture_output=True)  # its own group, if left
        shutil.rmtree(RUNTIME_BASE / str(uid), ignore_errors=True)  # its kernels' sockets
        done["removed"].append(name)
    if not keep_state:
        for name in STATE:
            if (hub_dir / name).exists():
                (hub_dir / name).unlink()
                done["state"].append(name)
        for folder in (hub_dir / "jupyter", hub_dir / "kernel-slots", public_dir(hub_dir)):
            if folder.is_dir():  # (HUBDIR/jupyter, kernel-slots: where earlier hubs kept them)
                shutil.rmtree(folder)
                done["state"].append(folder.name + "/")
    return done


def _remove_main(argv: list[str]) -> int:
    parser = HubCommand(
        "remove-class", "End of term: remove the Unix users this hub created (never others) and "
        "the hub's state. The exchange (students' submissions) stays: collect and archive it "
        "first.", root="removing Unix users needs root", class_list=False)
    parser.add_argument("--remove-homes", action="store_true",
                        help="also delete those users' home folders (their work)")
    parser.add_argument("--keep-state", action="store_true",
                        help="keep the hub's database, passwords and config")
    args = parser.parse_hub(argv)
    try:
        done = remove_class(args.hub_dir, remove_homes=args.remove_homes,
                            keep_state=args.keep_state)
    except RuntimeError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"removed users: {', '.join(done['removed']) or 'none'}"
          f"{' (and their homes)' if args.remove_homes and done['removed'] else ''}")
    if done["kept"]:
        print(f"kept (not created by this hub): {', '.join(done['kept'])}")
    print(f"removed hub state: {', '.join(done['state']) or 'none'}")
    return 0


def _collect_main(argv: list[str]) -> int:
    from course_tools.classroom.collect import main as collect_main

    return collect_main(argv)


COMMANDS = {"status": _status_main, "remove-class": _remove_main, "collect": _collect_main}


def main(argv: list[str]) -> int:
    """``hub collect ...`` / ``hub status ...`` / ``hub remove-class ...``."""
    return COMMANDS[argv[0]](argv[1:])
