"""A JupyterHub for a class: ``python -m course_tools hub CLASS.csv --dir HUBDIR``.

JupyterHub does the multi-user work (logins, one server per student, the proxy); this module only
configures it for the course:

* **accounts** from a class list (CSV, header ``username,language``; language en, zh-CN or
  zh-TW): each student is a Unix user of that name (``--create-users`` runs ``useradd``; the home
  folder is made ``0700``), served by JupyterHub's ``LocalProcessSpawner`` as that user, so the
  operating system keeps students out of each other's files;
* **login**: :class:`ClassListAuthenticator`, one random password per student (hashed in
  ``HUBDIR/passwords.json``; the clear list for the instructor in ``HUBDIR/passwords.csv``, both
  ``0600``). A real class swaps in its own login (``jupyterhub_config.py`` names the keys:
  OAuthenticator, LDAP), the rest unchanged;
* **release**: before a student's server starts, ``python -m course_tools copy ~/course
  --student --lang L`` runs *as the student* (their files stay theirs; an existing copy is never
  overwritten), and the server opens on ``~/course/student/[zh-Hans|zh-Hant]``;
* **kernels in the course's sandbox**: the only kernel, ``python3``, is the bubblewrap kernel of
  :mod:`course_tools.grading.sandbox.kernel` (no network, read-only notebook folder, limits);
  terminals are off and the file browser is rooted at ``~/course``;
* **the student's server runs student code**: everything its process loads is the student's to
  choose, outside the sandbox, so it reads no configuration file (``JUPYTER_NO_CONFIG``, nothing
  from ``~/.jupyter``; e.g. nbgrader's server extensions would execute the student's
  ``~/course/nbgrader_config.py``), loads exactly the server extensions of
  :data:`SERVER_EXTENSIONS`, lists only the sandboxed kernel and runs Python with ``-I``;
* **submit and collect**: the hub service ``course-submit`` (``/services/course-submit/``,
  logged in through the hub; opened from the *Course* menu of the student's JupyterLab,
  :mod:`.student_lab`; its page in the student's language, :mod:`.submit_page`) copies one
  assignment's notebooks, read by a process running *as the student*, into ``HUBDIR/exchange/<student>/<time>/`` (root only); ``python -m course_tools hub
  collect HUBDIR OUT`` (:mod:`.operations`) writes each student's latest submission to
  ``OUT/<student>/`` (``--assignment ps1``: nbgrader's ``OUT/<student>/ps1/``) with its time, the
  layout ``python -m course_tools grade OUT`` reads, and names who did not submit or was late.

The hub runs as root (it starts servers as other users) and binds 127.0.0.1 unless told
otherwise; ``--subdomain-host URL`` puts each student's server and the submit service on an
origin of their own (JupyterHub's ``subdomain_host``, its advice for untrusted users); it needs the ``class`` extra (``pip install '<the course's wheel>[class]'``: JupyterHub,
JupyterLab, the idle culler) and ``configurable-http-proxy`` (``npm install -g
configurable-http-proxy``). The term's operations (the idle culler, an instructor's account,
``hub status``, ``hub remove-class``) are :mod:`.operations`.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from course_tools.classroom.roster import (  # noqa: F401  (re-exported: the hub's own names)
    STUDENT_FOLDERS,
    SUBMIT_LIMIT,
    USERNAME,
    Student,
    _class,
    _hash,
    _write_private,
    read_class_list,
)
from course_tools.classroom.student_lab import lab_arguments, submit_url, write_lab_settings
from course_tools.classroom.submit import (  # noqa: F401  (re-exported: the service's names)
    BYTES_PER_STUDENT,
    SUBMISSIONS_PER_STUDENT,
    serve_submit,
    submit,
)

SERVICE = "course-submit"
CONFIG = '''\
# JupyterHub for the course, written by `python -m course_tools hub` (course_tools/classroom/hub.py).
# Run: jupyterhub -f {config}   (as root; the same as `python -m course_tools hub`)
from course_tools.classroom.hub import configure

configure(c, {hub_dir!r}, ip={ip!r}, port={port}, limits={limits!r},
          subdomain_host={subdomain_host!r})

# A real class's login, instead of the per-student passwords (the rest stays as it is):
#   GitHub / Google / any OpenID provider (pip install oauthenticator):
#     c.JupyterHub.authenticator_class = "github"          # or "google", "generic-oauth"
#     c.OAuthenticator.client_id = "..."; c.OAuthenticator.client_secret = "..."
#     c.OAuthenticator.oauth_callback_url = "https://HOST/hub/oauth_callback"
#     c.Authenticator.allowed_users = set(...)              # configure() sets the class list
#   the university's directory (pip install jupyterhub-ldapauthenticator):
#     c.JupyterHub.authenticator_class = "ldapauthenticator.LDAPAuthenticator"
#     c.LDAPAuthenticator.server_address = "ldap.example.edu"
#     c.LDAPAuthenticator.bind_dn_template = ["uid={{username}},ou=people,dc=example,dc=edu"]
'''


def prepare(class_list: Path, hub_dir: Path, *, create_users: bool = False) -> dict[str, str]:
    """Write HUBDIR (class, passwords, kernel, config); returns the new passwords (kept ones
    are not shown again). ``create_users``: ``useradd`` each student who has no Unix account."""
    import pwd

    from course_tools.grading.sandbox.kernel import kernel_spec

    students = read_class_list(class_list)
    hub_dir = Path(hub_dir).resolve()
    hub_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(hub_dir, 0o711)  # students' servers read the kernel below; nothing else
    (hub_dir / "class.json").write_text(json.dumps(
        [{"username": s.username, "language": s.language} for s in students], indent=1))
    for student in students:
        try:
            pwd.getpwnam(student.username)
        except KeyError:
            if not create_users:
                raise ValueError(f"student {student.username!r} has no Unix account: create it "
                                 "or pass --create-users") from None
            subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash",
                            student.username], check=True)
        os.chmod(pwd.getpwnam(student.username).pw_dir, 0o700)
    hashes_path = hub_dir / "passwords.json"
    hashes = json.loads(hashes_path.read_text()) if hashes_path.exists() else {}
    new = {}
    for student in students:
        if student.username not in hashes:
            new[student.username] = secrets.token_urlsafe(12)
            salt = secrets.token_bytes(16)
            hashes[student.username] = {"salt": salt.hex(),
                                        "hash": _hash(new[student.username], salt)}
    _write_private(hashes_path, json.dumps(hashes, indent=1))
    if new:
        _write_private(hub_dir / "passwords.csv", "username,password\n"
                       + "".join(f"{name},{password}\n" for name, password in new.items()))
    kernel = hub_dir / "jupyter" / "kernels" / "python3"  # the one kernel students get
    kernel.mkdir(parents=True, exist_ok=True)
    spec = kernel_spec() | {"display_name": "Python 3 (course sandbox)"}
    (kernel / "kernel.json").write_text(json.dumps(spec, indent=1))
    for folder in (hub_dir / "jupyter", hub_dir / "jupyter" / "kernels", kernel):
        os.chmod(folder, 0o755)
    exchange = hub_dir / "exchange"
    exchange.mkdir(exist_ok=True)
    os.chmod(exchange, 0o700)
    return new


def write_config(hub_dir: Path, *, ip: str = "127.0.0.1", port: int = 8000,
                 limits: StudentLimits | None = None, subdomain_host: str = "") -> Path:
    hub_dir = Path(hub_dir).resolve()
    config = hub_dir / "jupyterhub_config.py"
    limits = (limits or StudentLimits()).as_dict()
    config.write_text(CONFIG.format(config=config, hub_dir=str(hub_dir), ip=ip, port=port,
                                    limits=limits, subdomain_host=subdomain_host))
    return config


@dataclass(frozen=True)
class StudentLimits:
    """What one student's server and everything it starts (kernels, their sandboxes) may take
    together: a cgroup that root makes per student (memory, processes, CPU), and a cap on the
    student's running kernels."""

    memory_bytes: int = 4 * 2**30
    processes: int = 512
    cpus: float = 1.0
    kernels: int = 3
    submissions: int = 100  # kept in the exchange per student (the submit service's quota)
    submitted_bytes: int = 256 * 2**20

    def __post_init__(self):
        for name, low in (("memory_bytes", 2**28), ("processes", 32), ("kernels", 1),
                          ("submissions", 1), ("submitted_bytes", 2**20)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if isinstance(self.cpus, bool) or not isinstance(self.cpus, (int, float)) or not (
                0.01 <= self.cpus <= 1024):
            raise ValueError(f"cpus must be a number of cores in [0.01, 1024], got {self.cpus!r}")

    def as_dict(self) -> dict:
        return {"memory_bytes": self.memory_bytes, "processes": self.processes,
                "cpus": float(self.cpus), "kernels": self.kernels,
                "submissions": self.submissions, "submitted_bytes": self.submitted_bytes}


def student_group(username: str, limits: StudentLimits):
    """The student's cgroup (made, or its limits set again, by root in the hub)."""
    from course_tools.grading.sandbox._cgroups import Group

    return Group.for_student(username, processes=limits.processes,
                             memory_bytes=limits.memory_bytes, cpus=limits.cpus)


def kernel_slots(hub_dir: Path, username: str, kernels: int) -> Path:
    """The student's ``kernels`` slot files (the student's, 0600, in a folder of root's that
    they cannot add to): each running kernel's launcher holds one locked
    (:func:`~course_tools.grading.sandbox.kernel.take_slot`), so no more run at once."""
    import pwd

    record = pwd.getpwnam(username)
    base = Path(hub_dir) / "kernel-slots"
    base.mkdir(mode=0o711, exist_ok=True)
    os.chmod(base, 0o711)
    folder = base / username
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    for number in range(kernels):
        slot = folder / f"slot-{number}"
        slot.touch(mode=0o600)
        os.chown(slot, record.pw_uid, record.pw_gid)
    return folder


def _spawner_class(limits: StudentLimits):
    from jupyterhub.spawner import LocalProcessSpawner

    class CourseSpawner(LocalProcessSpawner):
        """LocalProcessSpawner whose server starts in the student's cgroup (joined as root,
        before the switch to the student's user): it and every process it starts."""

        def make_preexec_fn(self, name):
            become_student = super().make_preexec_fn(name)
            group = student_group(name, limits)

            def preexec():
                group.join()
                become_student()

            return preexec

    return CourseSpawner


def _authenticator_class():
    from jupyterhub.auth import Authenticator
    from traitlets import Unicode

    class ClassListAuthenticator(Authenticator):
        """Each student's own password (hashed in ``password_file``); for a class without a
        university login. Real logins: OAuthenticator, LDAPAuthenticator (jupyterhub_config.py)."""

        password_file = Unicode(config=True, help="passwords.json written by prepare()")

        async def authenticate(self, handler, data):
            name = self.normalize_username(data.get("username", ""))
            record = json.loads(Path(self.password_file).read_text()).get(name)
            if record is None:
                return None
            given = _hash(data.get("password", ""), bytes.fromhex(record["salt"]))
            return name if hmac.compare_digest(given, record["hash"]) else None

    return ClassListAuthenticator


# Everything a student's Jupyter server loads is the student's code, run outside the sandbox, so
# it loads no configuration file at all (JUPYTER_NO_CONFIG: none of the environment's, e.g.
# nbgrader's server extensions, which execute ~/course/nbgrader_config.py; none of the student's)
# and exactly these server extensions (jupyterhub.singleuser adds its own).
SERVER_EXTENSIONS = ("jupyterlab",)
SERVER_ENVIRONMENT = {"JUPYTER_NO_CONFIG": "1", "PYTHONNOUSERSITE": "1"}


def server_args() -> list[str]:
    """The students' servers' command-line options: the allowlist of server extensions, the one
    kernel, no terminal, no extension manager."""
    return ["--ServerApp.jpserver_extensions",
            *[f"{name}=True" for name in SERVER_EXTENSIONS],
            "--ServerApp.terminals_enabled=False",
            "--KernelSpecManager.ensure_native_kernel=False",
            "--KernelSpecManager.allowed_kernelspecs", "python3",
            "--LabApp.extension_manager=readonly"]


def configure(c, hub_dir: str, *, ip: str = "127.0.0.1", port: int = 8000,
              limits: dict | None = None, subdomain_host: str = "") -> None:
    """Fill JupyterHub's config object ``c`` for the class in ``hub_dir`` (see the module doc);
    ``limits``: :class:`StudentLimits`'s fields; ``subdomain_host``: each student's server and
    the submit service on a subdomain of their own (:func:`.student_lab.submit_url`)."""
    hub_dir = Path(hub_dir)
    limits = StudentLimits(**(limits or {}))
    languages = _class(hub_dir)
    bin_dir = Path(sys.executable).parent
    c.JupyterHub.ip, c.JupyterHub.port, c.JupyterHub.hub_ip = ip, port, "127.0.0.1"
    c.JupyterHub.hub_port = port + 1
    c.JupyterHub.db_url = f"sqlite:///{hub_dir / 'jupyterhub.sqlite'}"
    c.JupyterHub.cookie_secret_file = str(hub_dir / "jupyterhub_cookie_secret")
    c.JupyterHub.pid_file = str(hub_dir / "jupyterhub.pid")
    c.ConfigurableHTTPProxy.pid_file = str(hub_dir / "proxy.pid")
    c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{port + 2}"
    c.JupyterHub.authenticator_class = _authenticator_class()
    c.ClassListAuthenticator.password_file = str(hub_dir / "passwords.json")
    c.Authenticator.allowed_users = set(languages)
    # each server as the student's Unix user, in the student's cgroup
    c.JupyterHub.spawner_class = _spawner_class(limits)
    # -I: no PYTHON* variable, no user site-packages, no working folder on sys.path
    c.Spawner.cmd = [sys.executable, "-I", "-m", "jupyterhub.singleuser"]
    c.Spawner.notebook_dir = "~/course"
    c.Spawner.start_timeout = c.Spawner.http_timeout = 180
    c.Spawner.disable_user_config = True  # nothing from ~/.jupyter
    c.Spawner.args = server_args()
    if subdomain_host:  # one origin per student and service: no page of one reaches another
        c.JupyterHub.subdomain_host = subdomain_host
    lab_settings = write_lab_settings(hub_dir / "jupyter", submit_url(SERVICE, subdomain_host))

    def release(spawner):
        """The student's copies, written as the student, and their server's language."""
        import pwd

        name = spawner.user.name
        language = languages[name]
        home = Path(pwd.getpwnam(name).pw_dir)
        subprocess.run([sys.executable, "-m", "course_tools", "copy", str(home / "course"),
                        "--student", "--lang", language], user=name, group=name, cwd=home,
                       env={"HOME": str(home), "PATH": os.environ.get("PATH", "")}, check=True,
                       capture_output=True)
        spawner.default_url = f"/lab/tree/{STUDENT_FOLDERS[language]}"
        spawner.args = [*(a for a in spawner.args if not a.startswith("--LabApp.app_settings_dir")),
                        *lab_arguments(lab_settings[language])]  # the Course menu, no nbgrader
        spawner.environment.update({
            "LECTURES_LANG": language,  # the checkers' messages in the student's language
            "JUPYTER_PATH": str(hub_dir / "jupyter"),  # the sandboxed kernel is `python3`
            **SERVER_ENVIRONMENT,
            "LECTURES_KERNEL_SLOTS": str(kernel_slots(hub_dir, name, limits.kernels)),
            "PATH": f"{bin_dir}:/usr/bin:/bin",
        })

    c.Spawner.pre_spawn_hook = release
    c.JupyterHub.services = [{
        "name": SERVICE, "url": f"http://127.0.0.1:{port + 3}", "oauth_no_confirm": True,
        "command": [sys.executable, "-m", "course_tools.classroom.hub", "serve-submit",
                    str(hub_dir), str(limits.submissions), str(limits.submitted_bytes)],
    }]
    c.JupyterHub.load_roles = [
        {"name": "user", "scopes": ["self", f"access:services!service={SERVICE}"]},
    ]
    from course_tools.classroom.operations import configure_operations

    configure_operations(c, hub_dir, port=port)  # the culler, the admins, a quiet JupyterLab


def hub_problem(*, check_python: bool = True) -> str | None:
    """Why the hub cannot start here (None when it can)."""
    try:
        import jupyterhub  # noqa: F401
    except ImportError:
        return "jupyterhub is not installed: pip install '<the course's wheel>[class]'"
    from course_tools.classroom.operations import servers_problem

    if missing := servers_problem():  # a student's login would hang at "50 %"
        return missing
    if not shutil.which("configurable-http-proxy"):
        return ("configurable-http-proxy is not installed (JupyterHub's proxy, from npm): "
                "npm install -g configurable-http-proxy")
    if os.geteuid() != 0:
        return "the hub starts each student's server as that student: run it as root"
    from course_tools.grading.sandbox._cgroups import group_problem

    problem = group_problem(cpus=1.0)
    if problem:
        return ("the hub bounds each student's memory, processes and CPU with a cgroup that "
                f"root makes, and none can be made here ({problem}): give the hub cgroup v1 "
                "(pids, memory, cpu) or a cgroup v2 that delegates them (systemd: Delegate=yes)")
    python = Path(sys.executable).resolve()
    if not check_python:
        return None
    closed = [str(p) for p in python.parents if not os.stat(p).st_mode & 0o001]
    if closed or not os.stat(python).st_mode & 0o001:
        return (f"the students' servers run this Python ({python}), which other users cannot "
                f"execute ({', '.join(closed) or python} closed to them): install the course in "
                "a Python outside a private home folder (e.g. /usr/bin/python3 -m venv /opt/course)")
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from course_tools.classroom import handout, operations

    if argv[:1] and argv[0] in handout.COMMANDS:  # hub release / hub assignments
        return handout.main(argv)
    if argv[:1] and argv[0] in operations.COMMANDS:  # hub status / hub remove-class
        return operations.main(argv)
    if argv[:1] == ["serve-submit"]:
        serve_submit(Path(argv[1]), *map(int, argv[2:4]))
        return 0
    parser = argparse.ArgumentParser(prog="python -m course_tools hub",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("class_list", type=Path, help="CSV with the header username,language")
    parser.add_argument("--dir", type=Path, default=Path("hub"), dest="hub_dir",
                        help="the hub's folder (state, passwords, exchange); default ./hub")
    parser.add_argument("--ip", default="127.0.0.1", help="address to serve on (127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000,
                        help="the hub's port (it also uses the next three)")
    parser.add_argument("--create-users", action="store_true",
                        help="useradd each student without a Unix account")
    parser.add_argument("--memory-per-student", type=float, default=4.0, metavar="GIB",
                        help="memory of one student's server and kernels together (GiB; 4)")
    parser.add_argument("--processes-per-student", type=int, default=512,
                        help="processes of one student's server and kernels together (512)")
    parser.add_argument("--cpus-per-student", type=float, default=1.0,
                        help="CPU cores one student may use at once (1)")
    parser.add_argument("--kernels-per-student", type=int, default=3,
                        help="kernels one student may run at once (3)")
    parser.add_argument("--submissions-per-student", type=int, default=100,
                        help="submissions kept per student; more are refused (100)")
    parser.add_argument("--subdomain-host", default="", metavar="URL",
                        help="serve each student and the submit page on a subdomain of URL, e.g. "
                             "https://hub.example.edu (needs wildcard DNS and certificate) or "
                             "http://localhost:8000; JupyterHub's advice for untrusted users")
    parser.add_argument("--config-only", action="store_true",
                        help="write HUBDIR/jupyterhub_config.py and stop")
    operations.add_options(parser)  # --idle-timeout, --admin
    args = parser.parse_args(argv)
    if args.subdomain_host and not re.fullmatch(r"https?://[a-z0-9.-]+(:\d+)?", args.subdomain_host):
        parser.error(f"--subdomain-host must be http(s)://HOST[:PORT], got {args.subdomain_host!r}")
    absent = operations.accounts_absent(args.class_list) if args.create_users else []
    try:
        limits = StudentLimits(memory_bytes=int(args.memory_per_student * 2**30),
                               processes=args.processes_per_student,
                               cpus=args.cpus_per_student, kernels=args.kernels_per_student,
                               submissions=args.submissions_per_student)
        new = prepare(args.class_list, args.hub_dir, create_users=args.create_users)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    config = write_config(args.hub_dir, ip=args.ip, port=args.port, limits=limits,
                          subdomain_host=args.subdomain_host)
    if new:
        print(f"new passwords for {len(new)} student(s) in {args.hub_dir / 'passwords.csv'}")
    print(f"config: {config}")
    operations.record_created_users(args.hub_dir, absent)
    try:
        admins = operations.set_up(args.hub_dir, idle_timeout=args.idle_timeout,
                                   admins=args.admin)
    except ValueError as error:
        parser.error(str(error))
    if admins:
        print(f"new instructor password(s) in {args.hub_dir / operations.ADMIN_PASSWORDS}")
    if args.config_only:
        return 0
    problem = hub_problem()
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    os.chdir(args.hub_dir)
    os.execv(sys.executable, [sys.executable, "-m", "jupyterhub", "-f", str(config)])


if __name__ == "__main__":
    raise SystemExit(main())
