"""The ``course-submit`` hub service: a student's notebooks copied into the exchange.

Student code reaches it (the notebooks are the student's files), so it holds to the grader's own
pattern: the files are read by a process running as the student, each notebook at most the
grader's size cap, parsed in a forked process under a memory and a time limit, off the service's
event loop, with a per-student quota of submissions and bytes (issue 38, cause 4). Started by the
hub as ``python -m course_tools hub serve-submit HUBDIR`` (:func:`.hub.configure`).
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

from course_tools.classroom.roster import STUDENT_FOLDERS, SUBMIT_LIMIT, _class

# Runs as the student (subprocess user=): their notebooks as JSON on stdout, nothing else.
READER = r"""
import json, os, sys
folder, limit, each, found, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), {}, 0
for name in sorted(os.listdir(folder)):
    path = os.path.join(folder, name)
    if name.endswith(".ipynb") and os.path.isfile(path) and not os.path.islink(path):
        with open(path, encoding="utf-8") as file:
            found[name] = file.read(each + 1)
        size += len(found[name])
        if len(found[name]) > each:
            sys.exit(f"{name} is larger than {each} bytes, the most a notebook may be")
        if size > limit:
            sys.exit("the submission is larger than the limit")
json.dump(found, sys.stdout)
"""


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

    from course_tools.grading._batch import _die_with, _limit_memory, _read_line

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
           max_bytes: int = BYTES_PER_STUDENT) -> list[str]:
    """Copy ``username``'s notebooks (read as that user) into the exchange; returns the names.
    Each notebook at most the grader's size (``MAX_SUBMISSION_BYTES``), parsed in a process of
    its own under a memory and a time limit; at most ``submissions`` submissions and
    ``max_bytes`` bytes per student."""
    import pwd

    from course_tools.grading._collect import MAX_SUBMISSION_BYTES

    language = _class(hub_dir)[username]
    home = Path(pwd.getpwnam(username).pw_dir)
    folder = home / "course" / STUDENT_FOLDERS[language]
    result = subprocess.run([sys.executable, "-I", "-c", READER, str(folder), str(SUBMIT_LIMIT),
                             str(MAX_SUBMISSION_BYTES)],
                            user=username, group=username, cwd="/", env={}, capture_output=True,
                            text=True, timeout=60)
    if result.returncode != 0:
        raise RuntimeError(f"reading {folder} as {username} failed: {result.stderr[-500:]}")
    notebooks = json.loads(result.stdout)  # plain data: names and texts, each parsed below
    if not isinstance(notebooks, dict) or not notebooks:
        raise RuntimeError(f"no notebooks to submit in {folder}")
    for name, text in notebooks.items():
        if not (isinstance(name, str) and isinstance(text, str) and re.fullmatch(
                r"[\w.-]+\.ipynb", name)):
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


def serve_submit(hub_dir: Path, submissions: int = SUBMISSIONS_PER_STUDENT,
                 max_bytes: int = BYTES_PER_STUDENT) -> None:
    """The ``course-submit`` hub service: a page with the student's notebooks and a button."""
    quota = {"submissions": submissions, "max_bytes": max_bytes}
    from html import escape

    from jupyterhub.services.auth import HubOAuthCallbackHandler, HubOAuthenticated
    from jupyterhub.utils import url_path_join
    from tornado import ioloop, web

    prefix = os.environ["JUPYTERHUB_SERVICE_PREFIX"]

    class Submit(HubOAuthenticated, web.RequestHandler):
        def _page(self, message: str) -> None:
            name = self.get_current_user()["name"]
            runs = sorted((Path(hub_dir) / "exchange" / name).glob("*T*"))
            self.write(f"<html><body><h1>Submit: {escape(name)}</h1><p id='message'>"
                       f"{escape(message)}</p><p id='count'>{len(runs)} submission(s)</p>"
                       f"<form method='post'>{self.xsrf_form_html()}<button id='submit' "
                       "type='submit'>Submit my notebooks</button></form></body></html>")

        @web.authenticated
        def get(self):
            self._page("")

        @web.authenticated
        async def post(self):
            import asyncio

            name = self.get_current_user()["name"]
            try:  # in a thread: reading and parsing never hold up the other students' pages
                names = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: submit(hub_dir, name, **quota))
            except (RuntimeError, subprocess.TimeoutExpired) as error:
                self._page(f"not submitted: {error}")
                return
            self._page(f"submitted {len(names)} notebook(s): {', '.join(names)}")

    app = web.Application([
        (prefix, Submit),
        (url_path_join(prefix, "oauth_callback"), HubOAuthCallbackHandler),
    ], cookie_secret=secrets.token_bytes(32), xsrf_cookies=True)
    url = os.environ["JUPYTERHUB_SERVICE_URL"].rsplit(":", 1)
    app.listen(int(url[1].strip("/")), address="127.0.0.1")
    ioloop.IOLoop.current().start()
