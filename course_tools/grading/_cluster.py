"""Grading past one machine: ``grade SUBMISSIONS --scheduler tls://HOST:PORT --tls DIR`` on Dask.

Each submission becomes one task on the cluster's workers (started with ``dask worker
tls://HOST:PORT --tls-...`` on machines where this course is installed, the same version). A worker grades
it as the local command does: :func:`grade_task` hands it to one of the worker's zygotes
(:class:`~course_tools.grading._batch._Zygote`: a trusted process that forks a fresh
grading process per submission, with its memory limit, and each of those starts the
submission's own bubblewrap sandbox with its limits and cgroup).

What crosses the network. The client reads each submission with the grader's guards (a plain
file of at most :data:`~._collect.MAX_SUBMISSION_BYTES`) and sends its *bytes* (workers need no
shared folder); the worker writes them into a private folder (mode 0700, which no sandbox
mounts) under the submission's file name and grades that file. The report comes back as the
dict the local grader makes (plain data). A task is keyed by the submission's path and a SHA-256
of its content, so a submission is one task however often the scheduler reschedules it, and it
is pure: it writes nothing but its own temporary folder, so grading it again elsewhere gives the
same report.

The grading secret never crosses the network. Each worker machine holds the instructor's
secret file itself (mode 0600) and names it in ``LECTURES_GRADING_SECRET_FILE`` when the worker
starts (or sets ``LECTURES_GRADING_SECRET``, what ``--secret-file`` derives); the client sends
only the secret's fingerprint (12 hex digits of a SHA-256, not reversible), and a worker whose
fingerprint differs (no secret, another secret) refuses every task: the command stops with that
reason and writes no gradebook, instead of grading part of the class with other probes. On the
worker the secret lives in the worker's and its grading processes' environment only; the
sandbox gets an empty environment, runs as ``nobody`` in its own PID, user and network
namespaces and mounts neither the secret file nor ``/proc`` of the grader, so a submission
can read it in no way. The course's version is checked the same way (a fingerprint of the
library's files and of the course's notebooks): a worker with another version refuses.

What the cluster must be. A Dask scheduler runs whatever code a client sends it, so the cluster
speaks mutual TLS (:mod:`._tls`: ``python -m course_tools grading-tls DIR`` makes the authority
and the certificates): the scheduler and the workers accept only peers holding one, and the
client refuses a ``tcp://`` scheduler unless ``insecure_plain_tcp``. A worker refuses every task
when it reached its scheduler over plain tcp that the client did not allow, and when it runs as
root (unless ``LECTURES_GRADING_WORKER_AS_ROOT=unsafe``): graders run as an unprivileged user on
machines students cannot log in to, never the class hub. The sandbox has no network at all
(bubblewrap ``--unshare-all``), so a submission cannot reach the scheduler even on the machine
it runs on.

A worker that dies mid-batch loses nothing: the scheduler gives its tasks to the other workers
(their keys make each submission one task, so each gets exactly one report). A submission whose
grading kills every worker it runs on (as many as the scheduler's
``distributed.scheduler.allowed-failures``, 3 by default) gets a failed report saying so. The
gradebook (``--output``) is written once, when every report is in, by a replace
(:func:`~._report.write_atomic`).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path

import lectures_lib
from course_tools.grading._collect import (
    COURSE_NOTEBOOKS,
    _check_options,
    _course_notebooks,
    read_bytes,
    use_secret,
)
from course_tools.grading._report import _failed_report, clean_text
from course_tools.grading._tls import check_scheduler
from lectures_lib.languages import SUBMISSION_FILE, submission_language

SECRET_FILE_ENV = "LECTURES_GRADING_SECRET_FILE"
WORKER_AS_ROOT_ENV = "LECTURES_GRADING_WORKER_AS_ROOT"
RETRIES = 2  # a task that raised (a worker's disk full, ...) is tried again, elsewhere if it can
_PACKAGES = (Path(lectures_lib.__file__).resolve().parent, Path(__file__).resolve().parents[1])


class WorkerRefused(RuntimeError):
    """A worker cannot grade this batch as the client asked (another secret, another version of
    the course, no sandbox): the batch stops, with the worker's reason."""


def _fingerprint_files(paths: list[Path], base: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(base)).encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


_FINGERPRINTS: dict = {}


def course_fingerprint(course: Path) -> str:
    """A name of this course: its library's files and the course's notebooks (cached)."""
    course = Path(course).resolve()
    if course not in _FINGERPRINTS:
        base = _PACKAGES[0].parent
        library = sorted(p for package in _PACKAGES for p in package.rglob("*")
                         if p.is_file() and p.suffix != ".pyc"
                         and not any(part == "__pycache__" or part.startswith(".")
                                     for part in p.relative_to(package).parts))
        notebooks = list(_course_notebooks(course).values())
        _FINGERPRINTS[course] = (_fingerprint_files(library, base) + "-"
                                 + _fingerprint_files(notebooks, course))
    return _FINGERPRINTS[course]


def _worker_secret() -> str | None:
    """This worker's secret fingerprint; the secret read from ``LECTURES_GRADING_SECRET_FILE``
    on first use (into the worker's environment, which its grading processes inherit)."""
    with _LOCK:
        name = os.environ.get(SECRET_FILE_ENV)
        if name and not _STATE.get("secret_read"):
            use_secret(Path(name))
            _STATE["secret_read"] = True
    from lectures_lib.checks.grader import secret_fingerprint

    return secret_fingerprint()


_LOCK = threading.Lock()
_STATE: dict = {}
_ZYGOTES = threading.local()  # one zygote per worker thread, kept between tasks


def _probes(fingerprint: str | None) -> str:
    return "the public probes" if fingerprint is None else f"the secret {fingerprint}"


def _worker_course(where: str, folder: Path, fingerprint: str) -> Path:
    """The worker's copy of the batch's course: the folder the client named when this machine has
    one of that version, else the course installed with this worker's package. Only the version
    (the fingerprint) must match, never the path: a worker on another machine grades from its own
    installed course."""
    candidates = [path for path in dict.fromkeys((Path(folder), COURSE_NOTEBOOKS))
                  if path.is_dir()]
    if not candidates:
        raise WorkerRefused(f"{where} has no course notebooks (installed: {COURSE_NOTEBOOKS}): "
                            "install the course's wheel on every worker")
    found = {}
    for path in candidates:
        found[path] = course_fingerprint(path)
        if found[path] == fingerprint:
            return path
    seen = ", ".join(f"{path}: {own}" for path, own in found.items())
    raise WorkerRefused(f"{where} has another version of the course ({seen}; this batch "
                        f"{fingerprint}): install the same course on every worker")


def _check_worker(expected: dict, course: str, options: dict) -> Path:
    """The worker's course folder, once it is shown to grade as the client asked; else
    :class:`WorkerRefused`."""
    import socket

    where = f"worker {socket.gethostname()} (pid {os.getpid()})"
    _check_worker_host(where, options)
    folder = Path(course) if Path(course).is_dir() else COURSE_NOTEBOOKS
    folder = _worker_course(where, folder, expected["course"])
    try:
        secret = _worker_secret()
    except (OSError, ValueError) as error:
        raise WorkerRefused(f"{where} cannot read its grading secret ({error})") from None
    if secret != expected["secret"]:
        raise WorkerRefused(
            f"{where} grades with {_probes(secret)}, this batch with "
            f"{_probes(expected['secret'])}: start every worker with {SECRET_FILE_ENV}=PATH "
            "naming its copy of the instructor's secret file (and the client with "
            "--secret-file)")
    if options["sandbox"]:
        key = ("sandbox", options["allow_root_without_cgroup"])
        with _LOCK:
            if key not in _STATE:
                from course_tools.grading.sandbox import sandbox_problem

                _STATE[key] = sandbox_problem(options["allow_root_without_cgroup"])
        if _STATE[key]:
            raise WorkerRefused(f"{where} cannot make the sandbox: {_STATE[key]}")
    return folder


def _check_worker_host(where: str, options: dict) -> None:
    """A worker grades only over TLS (unless the client allowed plain tcp) and never as root
    (unless started with LECTURES_GRADING_WORKER_AS_ROOT=unsafe, for a throwaway machine)."""
    try:
        from distributed import get_worker

        address = get_worker().scheduler.address
    except (ImportError, ValueError, AttributeError):  # not on a Dask worker: a direct call
        address = None
    if address is not None and not address.startswith("tls://") and not options.get(
            "insecure_plain_tcp"):
        raise WorkerRefused(f"{where} reached its scheduler over {address.split('://')[0]}://, "
                            "which authenticates no one: start it with tls:// "
                            "(`python -m course_tools grading-tls`)")
    if os.geteuid() == 0 and os.environ.get(WORKER_AS_ROOT_ENV) != "unsafe":
        raise WorkerRefused(
            f"{where} runs as root: a worker runs what its scheduler sends, so run it as an "
            "unprivileged grading user with a delegated cgroup, on a machine students cannot "
            f"log in to (not the class hub); {WORKER_AS_ROOT_ENV}=unsafe allows root on a "
            "throwaway machine")


def _zygote(options: dict, course: Path):
    from course_tools.grading._batch import _Zygote

    key = (options["timeout"], str(course), options["notebook"], options["sandbox"],
           options["allow_root_without_cgroup"])
    zygotes = _ZYGOTES.__dict__.setdefault("by_key", {})
    if key not in zygotes:
        zygotes[key] = _Zygote(*key[:2], *key[2:])
    return zygotes[key]


def grade_task(path: str, data: bytes | None, unread: str, options: dict, course: str,
               expected: dict, language: str = "") -> dict:
    """One submission's report, on a worker (a Dask task: pure, it may run twice).

    ``data``: the submission's bytes, or None and ``unread`` the reason the client could not
    read them (the report says it, as the local grader's does); ``language``: the
    ``language.txt`` beside it (``hub collect``), the checkers' messages in it."""
    folder = _check_worker(expected, course, options)
    if data is None:
        from course_tools.grading._verdict import _verdict

        return _verdict(Path(path), None, unread, options["timeout"], folder,
                        options["notebook"], options["sandbox"])
    private = tempfile.mkdtemp(prefix="lectures-grade-")  # 0700: no sandbox mounts it
    try:
        copy = Path(private) / Path(path).name
        copy.write_bytes(data)
        if language:
            (Path(private) / SUBMISSION_FILE).write_text(language[:20], encoding="utf-8")
        report = _zygote(options, folder).grade(copy)
    finally:
        shutil.rmtree(private, ignore_errors=True)
    report["submission"] = clean_text(path)
    return report


def _task_key(path: Path, data: bytes | None, unread: str) -> str:
    digest = hashlib.sha256(str(path).encode() + b"\0" + (data if data is not None else
                                                           b"unread:" + unread.encode()))
    return f"grade-{Path(path).name[:40]}-{digest.hexdigest()}"


def grade_on_cluster(paths: list[Path], scheduler: str, *, timeout: float, course: Path,
                     notebook: str | None, sandbox: bool, progress: bool,
                     allow_root_without_cgroup: bool = False,
                     connect_timeout: float = 30.0, tls: Path | None = None,
                     insecure_plain_tcp: bool = False) -> tuple[list[dict], bool]:
    """Grade every notebook given or found in a given folder on the Dask cluster at
    ``scheduler``; returns (reports in the order found, any_folder), as
    :func:`~._batch.grade_paths`. Raises :class:`WorkerRefused` when a worker cannot grade as
    asked.

    ``scheduler`` is ``tls://HOST:PORT`` and ``tls`` the client's certificate folder
    (:mod:`._tls`); ``tcp://`` only with ``insecure_plain_tcp`` (ValueError otherwise)."""
    from course_tools.grading._batch import _find
    from course_tools.grading._verdict import unreadable
    from lectures_lib.checks.grader import secret_fingerprint

    try:
        from distributed import Client, as_completed
        from distributed.scheduler import KilledWorker
    except ImportError:
        raise ImportError("--scheduler needs Dask's distributed package: pip install "
                          "'lectures-lib[cluster]' (or pip install distributed)") from None
    security = check_scheduler(scheduler, tls, insecure_plain_tcp)
    timeout, course = _check_options(timeout, course)
    found, any_folder = _find(paths)
    options = {"timeout": timeout, "notebook": notebook, "sandbox": sandbox,
               "allow_root_without_cgroup": allow_root_without_cgroup,
               "insecure_plain_tcp": insecure_plain_tcp}
    expected = {"course": course_fingerprint(course), "secret": secret_fingerprint()}
    reports: list[dict | None] = [None] * len(found)
    with Client(scheduler, timeout=connect_timeout, security=security) as client:
        futures: dict = {}  # key -> (future, indices of found)
        for index, path in enumerate(found):
            try:
                data, unread = read_bytes(path), ""
            except Exception as problem:  # as the local grader says it
                data, unread = None, unreadable(problem)
            key = _task_key(path, data, unread)
            if key not in futures:
                language = submission_language(Path(path).parent) or ""  # hub collect's
                future = client.submit(grade_task, str(path), data, unread, options,
                                       str(course), expected, language, key=key, pure=False,
                                       retries=RETRIES)
                futures[key] = (future, [])
            futures[key][1].append(index)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(found), desc="grading", unit="submission", file=sys.stderr)
        try:
            by_future = {future.key: indices for future, indices in futures.values()}
            for future in as_completed([future for future, _ in futures.values()]):
                indices = by_future[future.key]
                report = _collect(future, found[indices[0]], KilledWorker)
                for index in indices:
                    reports[index] = dict(report, submission=clean_text(found[index]))
                if bar is not None:
                    bar.update(len(indices))
        except BaseException:
            client.cancel([future for future, _ in futures.values()])
            raise
        finally:
            if bar is not None:
                bar.close()
    return [report or _failed_report(path, "not graded (its task brought no report)")
            for report, path in zip(reports, found)], any_folder  # one per file, in order


def _collect(future, path: Path, killed_worker: type) -> dict:
    """The report a finished task brought back; :class:`WorkerRefused` re-raised."""
    if future.status == "finished":
        from course_tools.grading._report import _check_report

        report = future.result()
        _check_report(report)
        return report
    error = future.exception()
    if isinstance(error, WorkerRefused):
        raise WorkerRefused(str(error))
    if isinstance(error, killed_worker):
        return _failed_report(path, "every worker that graded it died while grading it, as "
                                    "many times as the scheduler allows "
                                    "(distributed.scheduler.allowed-failures): given up")
    return _failed_report(path, f"the worker failed to grade it ({type(error).__name__}: "
                                f"{error})")


__all__ = ["grade_on_cluster", "grade_task", "WorkerRefused", "course_fingerprint",
           "SECRET_FILE_ENV"]
