"""The ``course-submit`` hub service: a student's notebooks copied into the exchange.

Student code reaches it (the notebooks are the student's files), so it holds to the grader's own
pattern: the files are read by a process running as the student, each notebook at most the
grader's size cap, parsed in a forked process under a memory and a time limit, off the service's
event loop, with a per-student quota of submissions and bytes (issue 38, cause 4). Started by the
hub as ``python -m course_tools hub serve-submit HUBDIR`` (:func:`.hub.configure`).

A page of another origin must not submit for the student (issue 38, cause 6): every response
refuses to be framed (CSP ``frame-ancestors 'none'``, ``X-Frame-Options: DENY``); a submission
takes two forms of the page itself, the second carrying a one-time token the service keeps
(:class:`Confirmations`); a POST that the browser marks as from a frame, a script or another
origin is refused (:func:`own_request_problem`); the login cookies are ``SameSite``. With the
hub's ``--subdomain-host`` the service has an origin of its own, so a page of a student's server
can neither read its forms nor script it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlparse

from course_tools.classroom.roster import STUDENT_FOLDERS, SUBMIT_LIMIT, _class

# Runs as the student (subprocess user=): their notebooks as JSON on stdout, nothing else.
READER = r"""
import json, os, re, sys
folder, limit, each, found, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), {}, 0
stems = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None  # an assignment's notebooks
for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    kept = re.fullmatch(r"(.+?)(\.v\d+)?\.ipynb", name)  # NAME.ipynb, a correction NAME.vN.ipynb
    if stems is not None and not (kept and kept.group(1) in stems):
        continue
    if name.endswith(".ipynb") and os.path.isfile(path) and not os.path.islink(path):
        with open(path, encoding="utf-8") as file:
            found[name] = file.read(each + 1)
        size += len(found[name])
        if len(found[name]) > each:
            sys.exit(f"{name} is larger than {each} bytes, the most a notebook may be")
        if size > limit:
            sys.exit("the submission is larger than the limit")
missing = sorted(set(stems or ()) - {re.sub(r"(\.v\d+)?\.ipynb$", "", n) for n in found})
if missing:
    sys.exit(f"{missing[0]}.ipynb is not in your folder {folder}")
json.dump(found, sys.stdout)
"""

NOTEBOOK_NAME = r"[\w.-]+\.ipynb"  # what a submitted file may be called
NOTEBOOK_STEM = r"\w[\w-]*"  # an assignment's notebook, named without .ipynb
PARSE_MEMORY = 512 * 2**20  # bytes the process that parses one submission may add
PARSE_SECONDS = 60.0  # and how long it may take
SUBMISSIONS_PER_STUDENT = 100  # a student's submissions kept in the exchange, at most
BYTES_PER_STUDENT = 256 * 2**20  # and their bytes


def _quota_left(runs_folder: Path, size: int, submissions: int, max_bytes: int) -> str:
    """"" when one more submission of ``size`` bytes fits the student's quota, else why not."""
    runs = sorted(runs_folder.glob("*T*")) if runs_folder.is_dir() else []
    held = sum(f.stat().st_size for run in runs for f in run.iterdir() if f.is_file())
    if len(runs) >= submissions:
        return f"you have submitted {len(runs)} times, the most this class allows"
    if held + size > max_bytes:
        return (f"your submissions would hold {(held + size) / 2**20:.1f} MiB, more than this "
                f"class allows ({max_bytes / 2**20:.0f} MiB)")
    return ""


def _parse_and_write(notebooks: dict, target: Path) -> None:
    """Parse each notebook (an error for one that is not) and write it into ``target``: in a
    forked process under the grader's memory cap and a time limit (the pattern of
    :func:`course_tools.grading._batch._fork_and_grade`), so a crafted notebook that takes
    hundreds of times its size to parse costs this process nothing."""
    import signal

    import nbformat  # noqa: F401  (imported before the fork: no thread holds its import lock)

    from course_tools.grading._process import _die_with, _limit_memory, _read_line

    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the parsing process of this submission
        status = b"failed\n"
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            _die_with(parent)
            _limit_memory(PARSE_MEMORY)
            parsed = {name: nbformat.reads(text, as_version=4)
                      for name, text in notebooks.items()}
            target.mkdir(parents=True, exist_ok=False)
            for name, nb in parsed.items():
                nbformat.write(nb, target / name)
            status = b"ok\n"
        except MemoryError:
            status = b"memory\n"
        except Exception as error:  # not a notebook: its reason, on one line
            status = f"error {type(error).__name__}: {error}".replace("\n", " ")[:300].encode() \
                + b"\n"
        finally:
            os.write(write_fd, status)
            os._exit(0)
    os.close(write_fd)
    try:
        line = _read_line(read_fd, time.monotonic() + PARSE_SECONDS, limit=4096)
    finally:
        os.close(read_fd)
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        os.waitpid(pid, 0)
    if line == b"ok":
        return
    shutil.rmtree(target, ignore_errors=True)
    if line is None:
        raise RuntimeError(f"reading the notebooks took longer than {PARSE_SECONDS:g} s")
    if line == b"memory":
        raise RuntimeError(f"reading the notebooks needs more than {PARSE_MEMORY // 2**20} MiB")
    raise RuntimeError(f"not a notebook: {line.decode(errors='replace')[6:]}"
                       if line.startswith(b"error ") else "the notebooks could not be read")


def submit(hub_dir: Path, username: str, *, submissions: int = SUBMISSIONS_PER_STUDENT,
           max_bytes: int = BYTES_PER_STUDENT, notebooks: tuple[str, ...] | None = None
           ) -> list[str]:
    """Copy ``username``'s notebooks (read as that user) into the exchange; returns the names.
    ``notebooks``: one assignment's notebooks by stem (``01_self_attention``): each
    ``STEM.ipynb`` and its corrected copies ``STEM.vN.ipynb`` (a re-release puts them beside an
    edited notebook; ``hub collect`` picks the one to grade), each stem's file required; else
    every notebook of the folder. Each notebook at most the grader's size (``MAX_SUBMISSION_BYTES``),
    parsed in a process of its own under a memory and a time limit; at most ``submissions``
    submissions and ``max_bytes`` bytes per student."""
    import pwd

    from course_tools.grading._process import MAX_SUBMISSION_BYTES

    language = _class(hub_dir)[username]
    home = Path(pwd.getpwnam(username).pw_dir)
    folder = home / "course" / STUDENT_FOLDERS[language]
    wanted = []
    if notebooks is not None:
        if not notebooks or not all(isinstance(n, str) and re.fullmatch(NOTEBOOK_STEM, n)
                                    for n in notebooks):
            raise ValueError(f"notebooks must be notebooks' names without .ipynb, got "
                             f"{notebooks!r:.200}")
        wanted = [json.dumps(sorted(set(notebooks)))]
    result = subprocess.run([sys.executable, "-I", "-c", READER, str(folder), str(SUBMIT_LIMIT),
                             str(MAX_SUBMISSION_BYTES), *wanted],
                            user=username, group=username, cwd="/", env={}, capture_output=True,
                            text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"reading {folder} as {username} failed: {result.stderr[-500:]}")
    notebooks = json.loads(result.stdout)  # plain data: names and texts, each parsed below
    if not isinstance(notebooks, dict) or not notebooks:
        raise RuntimeError(f"no notebooks to submit in {folder}")
    for name, text in notebooks.items():
        if not (isinstance(name, str) and isinstance(text, str) and re.fullmatch(
                NOTEBOOK_NAME, name)):
            raise RuntimeError(f"refusing the file name {name!r:.80}")
    runs = Path(hub_dir) / "exchange" / username
    refused = _quota_left(runs, sum(len(t.encode()) for t in notebooks.values()), submissions,
                          max_bytes)
    if refused:
        raise RuntimeError(refused)
    # sorted by name = by time; the suffix keeps two submissions in one second apart
    stamp = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
    _parse_and_write(notebooks, runs / stamp)
    return sorted(notebooks)


CONFIRM_SECONDS = 600  # how long a reviewed submission may wait for its confirmation


class Confirmations:
    """The service's one-time confirmation tokens: one per student (a new review replaces it),
    for one assignment, for ``CONFIRM_SECONDS``. Kept here, never in a cookie, so a page that
    can set or read the student's cookies still cannot confirm for them."""

    def __init__(self, seconds: float = CONFIRM_SECONDS):
        self.seconds, self._tokens = seconds, {}

    def issue(self, student: str, assignment: str) -> str:
        token = secrets.token_urlsafe(32)
        self._tokens[student] = (token, assignment, time.monotonic() + self.seconds)
        return token

    def redeem(self, student: str, token: str) -> str | None:
        """The assignment ``token`` confirms for ``student`` (once), else None."""
        held = self._tokens.get(student)
        if held is None or not isinstance(token, str) or not secrets.compare_digest(
                held[0].encode(), token.encode()):
            return None
        del self._tokens[student]
        return held[1] if time.monotonic() < held[2] else None


def own_request_problem(method: str, headers, host: str) -> str:
    """"" when a request may change something: a form of the service's own page, in a top-level
    window (the browser's Sec-Fetch-* and Origin headers; a client that sends none is not a
    browser, so no page is acting through it); else why not."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return ""
    dest = headers.get("Sec-Fetch-Dest")
    if dest not in (None, "document"):
        return f"a request from a {dest}, not from the submit page itself"
    site = headers.get("Sec-Fetch-Site")
    if site not in (None, "same-origin"):
        return f"a {site} request, not from the submit page itself"
    origin = headers.get("Origin")
    if origin is not None and urlparse(origin).netloc != host:
        return f"a request from {origin!r:.100}, not from the submit page itself"
    return ""


def serve_submit(hub_dir: Path, submissions: int = SUBMISSIONS_PER_STUDENT,
                 max_bytes: int = BYTES_PER_STUDENT) -> None:
    """The ``course-submit`` hub service: the student picks one assignment, reviews it and
    confirms (:mod:`.submit_page`), in the student's language; never framed, every change a POST
    of the page's own form with a one-time token the service keeps."""
    quota = {"submissions": submissions, "max_bytes": max_bytes}
    # the login cookies: not sent with another site's requests (frames, forms, scripts)
    os.environ.setdefault("JUPYTERHUB_COOKIE_OPTIONS", json.dumps({"samesite": "Lax"}))
    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web

    from course_tools.classroom import submit_page

    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]
    confirmations = Confirmations()

    class Guarded(web.RequestHandler):
        def set_default_headers(self):
            for header, value in submit_page.SECURITY_HEADERS.items():
                self.set_header(header, value)

        def prepare(self):
            refused = own_request_problem(self.request.method, self.request.headers,
                                          self.request.host)
            if refused:
                raise web.HTTPError(403, refused)
            return super().prepare()

    class Page(HubOAuthenticated, Guarded):
        def student(self) -> tuple[str, str]:
            name = self.get_current_user()["name"]
            return name, _class(hub_dir).get(name, "en")

        def assignments(self) -> list:
            return submit_page.open_assignments(hub_dir)

        def show(self, message: str = "") -> None:
            name, language = self.student()
            self.write(submit_page.choose_page(
                language, name, self.assignments(),
                submit_page.earlier_submissions(hub_dir, name), self.xsrf_form_html(), message))

    class Choose(Page):
        @web.authenticated
        def get(self):
            self.show()

    class Review(Page):
        @web.authenticated
        def post(self):
            name, language = self.student()
            wanted = self.get_body_argument("assignment", "")
            found = [a for a in self.assignments() if a.name == wanted]
            if not found:
                text = submit_page.TEXT[language]
                self.show(text["not_submitted"].format(error=text["unknown"]))
                return
            token = confirmations.issue(name, found[0].name)
            self.write(submit_page.confirm_page(language, name, found[0], token,
                                                self.xsrf_form_html()))

    class Confirm(Page):
        @web.authenticated
        async def post(self):
            import asyncio

            name, language = self.student()
            text = submit_page.TEXT[language]
            wanted = confirmations.redeem(name, self.get_body_argument("token", ""))
            found = [a for a in self.assignments() if a.name == wanted]
            if not found:
                self.show(text["not_submitted"].format(error=text["expired"]))
                return
            try:  # in a thread: reading and parsing never hold up the other students' pages
                names = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: submit(hub_dir, name, notebooks=found[0].notebooks, **quota))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                self.show(text["not_submitted"].format(error=error))
                return
            self.show(text["submitted"].format(assignment=found[0].name, names=", ".join(names)))

    class Callback(HubOAuthCallbackHandler, Guarded):
        pass

    class NotFound(Guarded):  # any other address: 404, with the headers of every response
        def prepare(self):
            raise web.HTTPError(404)

    app = web.Application([
        (prefix, Choose),
        (url_path_join(prefix, "review"), Review),
        (url_path_join(prefix, "confirm"), Confirm),
        (url_path_join(prefix, "oauth_callback"), Callback),
    ], default_handler_class=NotFound, cookie_secret=secrets.token_bytes(32), xsrf_cookies=True,
        xsrf_cookie_kwargs={"samesite": "Strict", "httponly": True})
    url = os.environ["JUPYTERHUB_SERVICE_URL"].rsplit(":", 1)
    app.listen(int(url[1].strip("/")), address="127.0.0.1")
    ioloop.IOLoop.current().start()
