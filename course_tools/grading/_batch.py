"""A class: per job, one trusted process that imports the grader once (a *zygote*) and forks a
fresh grading process for each submission, each with its own sandbox and memory limit.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import os
import queue
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from course_tools.grading._collect import (
    COURSE_NOTEBOOKS,
    DEFAULT_TIMEOUT,
    _assignment,
    _check_options,
    read_submission,
)
from course_tools.grading._process import (
    _die_with,
    _limit_memory,
    _read_line,
)
from course_tools.grading._report import _check_report, _failed_report, to_json
from course_tools.grading._run import _STUDENT_CHECKS, _check_sandbox, _student_checks
from course_tools.grading._verdict import grade_submission
from course_tools.grading.sandbox._fair_clock import WALL_FACTOR
from lectures_lib.utils import check_path

# --------------------------------------------------------------------------------------------
# A class: per job, one trusted process that imports the grader once (a "zygote") and forks a
# fresh grading process for each submission; each submission keeps its own sandbox
# --------------------------------------------------------------------------------------------


def _find(paths) -> tuple[list[Path], bool]:
    found, any_folder = [], False
    for path in paths:
        if path.is_dir():
            any_folder = True
            found += sorted(p for p in path.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)
        else:
            found.append(path)
    return found, any_folder


_GRACE = 120.0  # seconds past the submission's limit before its grading process is killed


def _safe_python() -> list[str]:
    """How the grader starts itself: a Python whose ``sys.path`` holds neither its working
    directory nor a script's folder (``-P``; on Python < 3.11, ``-I``), so no file handed in
    beside the submissions (or in the folder it grades from) is ever imported by the grader. The folder that
    holds this ``course_tools`` (and, in a clone, ``lectures_lib``) is *appended* (after site-packages), for a clone run without
    an install."""
    flag = "-P" if sys.version_info >= (3, 11) else "-I"
    here = str(Path(__file__).resolve().parents[2])
    code = (f"import sys; sys.path.append({here!r}); "
            "from course_tools.grading import main; raise SystemExit(main(sys.argv[1:]))")
    return [sys.executable, flag, "-c", code]


def safe_sys_path() -> None:
    """Drop from this process's ``sys.path`` its working directory and ``''`` (what ``python -m``
    and ``-c`` put first): the grade command never imports from where it was started, which may
    be the folder the submissions and their handed-in files lie in."""
    cwd = os.getcwd()
    keep = []
    for entry in sys.path:
        try:
            unsafe = entry in ("", ".") or os.path.samefile(entry, cwd)
        except OSError:
            unsafe = False
        if not unsafe:
            keep.append(entry)
    sys.path[:] = keep


def _grader_env(timeout: float) -> dict:
    """The grading processes' environment: one thread each (``--jobs`` of them share the cores),
    the checkers' time limits derived from ``--timeout``."""
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                LECTURES_CHECK_TIMEOUT=str(max(1.0, min(10.0, timeout / 10))),
                LECTURES_TRAIN_TIMEOUT=str(max(1.0, timeout / 2)))


def _parse_report(data: bytes | None, path: Path, why: str) -> dict:
    try:
        report = json.loads((data or b"").decode(errors="replace").strip())
        _check_report(report)
        return report
    except (ValueError, TypeError):
        return _failed_report(path, why)


def _fork_and_grade(path: Path, args) -> dict:
    """Grade ``path`` in a forked copy of this process (the grader already imported): its state,
    whatever the submission's answers did to it, ends with it."""
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the grading process of this submission
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            _die_with(parent)
            _limit_memory(GRADER_MEMORY)
            report = _grade_one(path, args)
            data = memoryview(to_json(report).encode() + b"\n")
            while data:
                data = data[os.write(write_fd, data):]
        finally:
            os._exit(0)
    os.close(write_fd)
    _GRADING[0] = pid
    try:
        data = _read_line(read_fd, time.monotonic() + WALL_FACTOR * args.timeout + _GRACE)
        if data is None:
            os.killpg(pid, signal.SIGKILL)
    finally:
        os.close(read_fd)
    try:
        os.killpg(pid, signal.SIGKILL)  # anything it left (the sandboxes end with their parent)
    except (ProcessLookupError, PermissionError):
        pass
    _, status = os.waitpid(pid, 0)
    if data is None:
        return _failed_report(path, "grading ran past "
                              f"{WALL_FACTOR * args.timeout + _GRACE:g} s and was stopped")
    return _parse_report(data, path, f"the grading process failed (exit status "
                                     f"{os.waitstatus_to_exitcode(status)})")


def identify(found: list[Path], course: Path, notebook: str | None,
             seconds_each: float = 10.0) -> list[tuple[str | None, str] | None]:
    """Each submission's assignment, before anything is graded: ``(stem, "")`` for the course
    notebook its grading will name (as :func:`~._verdict.grade_submission` recognises it),
    ``(None, reason)`` for a file that names none, ``None`` where it could not be told in time.

    The files are read (with the grader's guards) in a forked process under a grading
    process's memory limit (:data:`GRADER_MEMORY`), killed past 30 s plus ``seconds_each`` per
    file: a crafted notebook costs this process nothing, and what was not told in time is
    simply graded as usual."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # reads the students' files: bounded, and ends here whatever happens
        try:
            os.close(read_fd)
            _limit_memory(GRADER_MEMORY)
            for path in found:
                try:
                    submission = read_submission(path)
                except Exception:  # unreadable: recognised by its name, as its grading does
                    submission = None
                course_path, reason = _assignment(path, submission, course, notebook)
                data = memoryview(json.dumps([course_path.stem if course_path else None,
                                              "" if course_path else reason]).encode() + b"\n")
                while data:
                    data = data[os.write(write_fd, data):]
        finally:
            os._exit(0)
    os.close(write_fd)
    chunks, size, limit = [], 0, 2**12 * (len(found) + 1)  # a line is a name and a reason
    deadline = time.monotonic() + 30 + seconds_each * len(found)
    try:
        while size <= limit:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([read_fd], [], [], left)[0]:
                break
            chunk = os.read(read_fd, 2**16)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(read_fd)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
    told: list = []
    for line in b"".join(chunks).split(b"\n")[:len(found)]:
        try:
            stem, reason = json.loads(line)
            told.append((stem if isinstance(stem, str) else None, str(reason)))
        except (ValueError, TypeError):  # the last line, cut off
            break
    return told + [None] * (len(found) - len(told))


GRADER_MEMORY = 4 * 2**30  # bytes a submission's grading process may add to the zygote's


def _grade_one(path: Path, args) -> dict:
    _use_submission_language(path)
    try:
        return grade_submission(path, timeout=args.timeout, course=args.course,
                                notebook=args.notebook, sandbox=not args.no_sandbox,
                                allow_root_without_cgroup=args.root_without_cgroup)
    except Exception as error:
        return _failed_report(path, f"{type(error).__name__}: {error}")


def _use_submission_language(path: Path) -> None:
    """The checkers' messages in the student's language: ``language.txt`` beside a submission
    (``hub collect`` writes it from the class list) sets ``LECTURES_LANG`` in this process, which
    grades that one submission (a forked grading process, or ``_one``)."""
    from lectures_lib.languages import ENV, submission_language

    language = submission_language(Path(path).parent)
    if language is not None:  # none, or not a language: the grader's own
        os.environ[ENV] = language


def _preload() -> None:
    """What every grading process needs, imported once per job instead of once per submission
    (PyTorch, nbformat and the checkers take seconds of CPU to import)."""
    import pkgutil

    import nbformat  # noqa: F401
    import torch

    from course_tools.grading.sandbox import _session, wire, worker  # noqa: F401
    from lectures_lib import checks, decoding, models, training  # noqa: F401

    torch.set_num_threads(1)
    for module in pkgutil.iter_modules(checks.__path__):
        importlib.import_module(f"{checks.__name__}.{module.name}")
    worker._python_source("%time x = 1")  # IPython's input transformer


_PARENT_ENV = "LECTURES_ZYGOTE_PARENT"  # the pid of the process that started the zygote
_GRADING = [0]  # the zygote's grading process now (its process group), 0 when none


def _orphan_watch(parent: int) -> None:
    """In the zygote: when the process that started it (a grade command, a Dask worker) dies,
    kill the grading process now running (its sandbox ends with it) and exit, so a lost worker
    leaves no grading behind. (A thread that polls: a worker's task thread may end while the
    worker lives, so PR_SET_PDEATHSIG, which follows the forking *thread*, cannot be used.)"""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        if _GRADING[0]:
            try:
                os.killpg(_GRADING[0], signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        os._exit(1)

    threading.Thread(target=watch, name="orphan-watch", daemon=True).start()


def _zygote_main(argv: list[str]) -> int:
    """Internal: grade the submissions named on stdin (a JSON line each), one forked grading
    process each; print each report as a JSON line."""
    args = _one_parser("_zygote").parse_args(argv)
    _orphan_watch(int(os.environ.get(_PARENT_ENV, os.getppid())))
    requests, reports = os.dup(0), os.dup(1)
    quiet = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # what the grading processes print goes nowhere
        os.dup2(quiet, fd)
    _preload()
    _student_checks()
    gc.freeze()  # the forked processes share the preloaded modules' memory
    try:
        with os.fdopen(requests, "rb") as lines:
            for line in lines:
                try:
                    path = Path(json.loads(line)["path"])
                except (ValueError, KeyError, TypeError):
                    continue
                data = memoryview(to_json(_fork_and_grade(path, args)).encode() + b"\n")
                while data:
                    data = data[os.write(reports, data):]
    finally:
        shutil.rmtree(_STUDENT_CHECKS["path"].parent, ignore_errors=True)
    return 0


class _Zygote:
    """The grader's handle on one job's zygote: started on first use, restarted if it breaks."""

    def __init__(self, timeout: float, course: Path, notebook: str | None, sandbox: bool,
                 allow_root_without_cgroup: bool = False):
        self.timeout = timeout
        self.command = [*_safe_python(), "_zygote", "--timeout", str(timeout),
                        "--course", str(Path(course).resolve())]
        self.command += ["--notebook", notebook] if notebook else []
        self.command += [] if sandbox else ["--no-sandbox"]
        self.command += ["--root-without-cgroup"] if allow_root_without_cgroup else []
        self.process: subprocess.Popen | None = None

    def grade(self, path: Path) -> dict:
        if self.process is None or self.process.poll() is not None:
            self.process = subprocess.Popen(self.command, stdin=subprocess.PIPE,
                                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                            env={**_grader_env(self.timeout),
                                                 _PARENT_ENV: str(os.getpid())})
        try:
            self.process.stdin.write(json.dumps({"path": str(path)}).encode() + b"\n")
            self.process.stdin.flush()
        except OSError:
            self.close()
            return _failed_report(path, "the grading process could not be started")
        # its own guard stops the submission's grading at WALL_FACTOR * timeout + _GRACE (the
        # sandbox's limits are on a fair clock, each also WALL_FACTOR times as long on the wall
        # clock); this one a zygote that broke (or is still importing under a heavy load)
        data = _read_line(self.process.stdout.fileno(),
                          time.monotonic() + WALL_FACTOR * self.timeout + 2 * _GRACE)
        if not data:
            self.close()
            return _failed_report(path, "the grading process failed")
        return _parse_report(data, path, "the grading process failed")

    def close(self) -> None:
        if self.process is None:
            return
        try:
            self.process.stdin.close()
            self.process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
            self.process.wait()
        self.process.stdout.close()
        self.process = None


def grade_paths(paths: list[Path], *, timeout: float = DEFAULT_TIMEOUT,
                course: Path = COURSE_NOTEBOOKS, notebook: str | None = None,
                sandbox: bool = True, jobs: int | None = None,
                progress: bool = False,
                allow_root_without_cgroup: bool = False) -> tuple[list[dict], bool]:
    """Grade every notebook given or found in a given folder, ``jobs`` at a time (default: the
    cores there are). Returns (reports in the order found, any_folder).

    Each job is one process that imports the grader once and forks a fresh grading process for
    each submission (each with its own sandbox): nothing of one submission's grading is left
    for the next."""
    if isinstance(paths, (str, os.PathLike)) or not isinstance(paths, (list, tuple)):
        raise TypeError(f"paths must be a list of paths, got {type(paths).__name__} ({paths!r:.60})")
    if not paths:
        raise ValueError("paths must name at least one notebook or folder, got an empty list")
    paths = [check_path(path, f"paths[{i}]") for i, path in enumerate(paths)]
    timeout, course = _check_options(timeout, course)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
    sandbox = _check_sandbox(sandbox, allow_root_without_cgroup)
    found, any_folder = _find(paths)
    reports: list[dict | None] = [None] * len(found)
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for index in range(len(found)):
        todo.put(index)
    bar, lock = None, threading.Lock()
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(found), desc="grading", unit="submission", file=sys.stderr)

    def job() -> None:
        zygote = _Zygote(timeout, course, notebook, sandbox, allow_root_without_cgroup)
        try:
            while True:
                try:
                    index = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    reports[index] = zygote.grade(found[index])
                except Exception as error:  # never lose the batch for one submission
                    zygote.close()
                    reports[index] = _failed_report(found[index],
                                                    f"{type(error).__name__}: {error}")
                if bar is not None:
                    with lock:
                        bar.update(1)
        finally:
            zygote.close()

    threads = [threading.Thread(target=job, daemon=True) for _ in range(min(jobs, len(found)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if bar is not None:
        bar.close()
    return [report or _failed_report(path, "not graded (its grading job ended)")
            for report, path in zip(reports, found)], any_folder


def _one_parser(command: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m course_tools.grading {command}")
    if command == "_one":
        parser.add_argument("submission", type=Path)
    parser.add_argument("--timeout", type=float, required=True)
    parser.add_argument("--course", type=Path, required=True)
    parser.add_argument("--notebook", default=None)
    parser.add_argument("--no-sandbox", action="store_true")
    parser.add_argument("--root-without-cgroup", action="store_true")
    return parser
