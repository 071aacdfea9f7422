"""``grade --scheduler``: a class graded on Dask distributed workers, one of them killed mid-batch.

A real scheduler and two real worker processes (``dask scheduler``/``dask worker``, bound to
127.0.0.1) grade a batch of submissions of ``01_self_attention`` (correct ones under several
students' names, a wrong one, the empty release, a file that is not a notebook, and the same
notebook handed in twice under one more name). While the batch runs, one worker and everything
it started (its zygote, grading processes and sandboxes) is killed with SIGKILL, as a machine
that dies: every submission still gets exactly one report, with the marks the local grader
gives the same folder. The gradebooks are written with ``--output`` (a replace: whole or not
at all), and the atomic write is tested on its own: a failed write leaves the old file, a
reader never sees part of a new one.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from course_tools.grading import write_atomic
from course_tools.grading._local_cluster import local_cluster

from ..conftest import require_system_package
from .test_grading import NAME, _submission

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

TIMEOUT = 60


def test_a_failed_write_leaves_the_old_gradebook_and_no_temporary_file(tmp_path, monkeypatch):
    book = tmp_path / "gradebook.csv"
    book.write_text("submission,score\nalice,4\n")

    def broken_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="No space"):
        write_atomic(book, "submission,score\n" + "bob,0\n" * 10_000)
    assert book.read_text() == "submission,score\nalice,4\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gradebook.csv"]


def test_a_reader_sees_the_old_or_the_new_gradebook_never_a_part(tmp_path):
    book = tmp_path / "gradebook.csv"
    versions = ["submission,score\n" + "".join(f"student{i},{v}\n" for i in range(20_000))
                for v in range(2)]
    write_atomic(book, versions[0])
    seen, stop = [], threading.Event()

    def read() -> None:
        while not stop.is_set():
            seen.append(book.read_text())

    reader = threading.Thread(target=read)
    reader.start()
    for k in range(30):
        write_atomic(book, versions[k % 2])
    stop.set()
    reader.join()
    assert seen and all(text in versions for text in seen), \
        sorted({len(text) for text in seen} - {len(v) for v in versions})[:5]
    assert book.stat().st_mode & 0o777 == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --------------------------------------------------------------------------------------------
# A scheduler and two workers on 127.0.0.1
# --------------------------------------------------------------------------------------------


def _batch(folder: Path) -> list[str]:
    names = []
    for kind, student in [("correct", "alice"), ("correct", "bob"), ("wrong", "carol"),
                          ("empty", "dan")]:
        path = folder / f"{student}_{NAME}.ipynb"
        nbformat.write(_submission(kind), path)
        names.append(path.name)
    twin = folder / f"grace_{NAME}.ipynb"  # the same bytes as alice's, another name
    twin.write_bytes((folder / f"alice_{NAME}.ipynb").read_bytes())
    (folder / f"garbage_{NAME}.ipynb").write_text("this is { not a notebook")
    return names + [twin.name, f"garbage_{NAME}.ipynb"]


def _name(process) -> str | None:
    """The process's name, or None once it has exited (a child listed a moment ago may be gone)."""
    import psutil

    try:
        return process.name()
    except psutil.NoSuchProcess:
        return None


def _sandboxes_of(process) -> list:
    import psutil

    try:
        children = process.children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    return [p for p in children if _name(p) == "bwrap"]


def _kill_machine(process) -> None:
    """SIGKILL a worker and everything it started, as when its machine dies."""
    for p in [process, *process.children(recursive=True)]:
        try:
            p.send_signal(signal.SIGKILL)
        except Exception:  # already gone
            pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    require_system_package("bubblewrap")
    pytest.importorskip("distributed", reason="distributed (pip install 'lectures-lib[cluster]')")
    psutil = pytest.importorskip("psutil")
    here = tmp_path_factory.mktemp("cluster")
    with local_cluster(2, here, timeout=180) as (address, processes):
        assert address.startswith("tls://127.0.0.1:"), address  # mutual TLS, as the README's
        yield address, [psutil.Process(w.pid) for w in processes[1:]], here


def _tls(cluster) -> list[str]:
    return ["--tls", str(cluster[2] / "tls" / "client")]


def _grade(args: list[str], output: Path, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "course_tools", "grade", *args, "--format",
                             "json", "--timeout", str(TIMEOUT), "--output", str(output)],
                            cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _reports(path: Path) -> dict:
    reports = [json.loads(line) for line in path.read_text().splitlines()]
    names = [Path(r["submission"]).name for r in reports]
    assert len(names) == len(set(names)), f"a submission got two reports: {sorted(names)}"
    return {name: r for name, r in zip(names, reports)}


def _marks(report: dict) -> tuple:
    return (report["notebook"], report["score"], report["max_score"],
            [(row["id"], row["points"], row["passed"]) for row in report["exercises"]])


def test_a_worker_killed_mid_batch_loses_nothing(cluster, tmp_path):
    address, workers, _ = cluster
    folder = tmp_path / "submissions"
    folder.mkdir()
    names = _batch(folder)
    run = _grade([str(folder), "--scheduler", address, *_tls(cluster)], tmp_path / "cluster.jsonl",
                 tmp_path)
    victim, killed_at = workers[0], None
    end = time.monotonic() + 600
    while run.poll() is None and time.monotonic() < end:
        if killed_at is None and _sandboxes_of(victim):  # it is grading a submission now
            _kill_machine(victim)
            killed_at = time.monotonic()
        time.sleep(0.1)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 0, err[-3000:]
    assert killed_at is not None, "the worker to kill never started a sandbox"
    assert not victim.is_running() or victim.status() == "zombie"
    cluster_reports = _reports(tmp_path / "cluster.jsonl")
    assert sorted(cluster_reports) == sorted(names)  # each submission, exactly one report

    local = _grade([str(folder), "--jobs", "2", "--quiet"], tmp_path / "local.jsonl", tmp_path)
    _, err = local.communicate(timeout=900)
    assert local.returncode == 0, err[-3000:]
    local_reports = _reports(tmp_path / "local.jsonl")
    assert {n: _marks(r) for n, r in cluster_reports.items()} == \
        {n: _marks(r) for n, r in local_reports.items()}
    full = {n for n, r in cluster_reports.items() if r["score"] == r["max_score"] > 0}
    assert full == {f"{s}_{NAME}.ipynb" for s in ("alice", "bob", "grace")}
    assert "cannot read the submission" in cluster_reports[f"garbage_{NAME}.ipynb"]["error"]
    assert cluster_reports[f"garbage_{NAME}.ipynb"]["error"] == \
        local_reports[f"garbage_{NAME}.ipynb"]["error"]
    assert all(Path(r["submission"]).parent == folder for r in cluster_reports.values())


def test_the_workers_speak_the_language_hub_collect_wrote_beside_a_submission(cluster, tmp_path):
    """``language.txt`` (``hub collect``'s, from the class list) travels with the submission: the
    worker's checkers explain the mistake in the student's language, as the local grader's do."""
    folder = tmp_path / "submitted" / "chen" / "ps1"
    folder.mkdir(parents=True)
    nbformat.write(_submission("empty"), folder / f"{NAME}.ipynb")
    (folder / "language.txt").write_text("zh-Hant")
    run = _grade([str(folder), "--scheduler", cluster[0], *_tls(cluster), "--quiet"],
                 tmp_path / "zh.jsonl", tmp_path)
    _, err = run.communicate(timeout=600)
    assert run.returncode == 0, err[-3000:]
    (report,) = _reports(tmp_path / "zh.jsonl").values()
    tested = [row for row in report["exercises"] if not row["manual"]]
    assert tested and all("未通過" in row["message"] for row in tested), tested


def test_a_worker_with_another_secret_stops_the_batch_before_any_gradebook(cluster, tmp_path):
    address, _, _ = cluster
    folder = tmp_path / "submissions"
    folder.mkdir()
    nbformat.write(_submission("empty"), folder / f"dan_{NAME}.ipynb")
    secret = tmp_path / "secret"
    secret.write_bytes(os.urandom(32))
    book = tmp_path / "book.jsonl"
    run = _grade([str(folder), "--scheduler", address, *_tls(cluster), "--secret-file",
                  str(secret), "--quiet"], book, tmp_path)
    _, err = run.communicate(timeout=300)
    assert run.returncode == 2, err[-2000:]
    assert "WorkerRefused" in err and "public probes" in err and "LECTURES_GRADING_SECRET_FILE" \
        in err, err[-2000:]
    assert not book.exists()


def test_without_distributed_installed_the_message_says_what_to_install(tmp_path):
    folder = tmp_path / "submissions"
    folder.mkdir()
    nbformat.write(_submission("empty"), folder / f"dan_{NAME}.ipynb")
    code = ("import sys; sys.modules['distributed'] = None; "
            "from course_tools.grading import main; "
            f"raise SystemExit(main([{str(folder)!r}, '--scheduler', 'tcp://127.0.0.1:9', "
            "'--insecure-plain-tcp-anyone-can-run-code']))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 2
    assert "lectures-lib[cluster]" in result.stderr, result.stderr[-1000:]


def test_a_scheduler_address_that_is_not_one_is_refused_by_name(tmp_path):
    pytest.importorskip("distributed", reason="distributed (pip install 'lectures-lib[cluster]')")
    folder = tmp_path / "submissions"
    folder.mkdir()
    result = subprocess.run([sys.executable, "-m", "course_tools", "grade", str(folder),
                             "--scheduler", "127.0.0.1:8786"], capture_output=True, text=True,
                            timeout=120, cwd=tmp_path)
    assert result.returncode == 2
    assert "scheduler must be" in result.stderr and "127.0.0.1:8786" in result.stderr


def _connect(address: str, security) -> str:
    """How a client with ``security`` fares against the cluster: "connected" or the error."""
    from distributed import Client

    try:
        with Client(address, timeout=15, security=security) as client:
            client.run(os.getpid)  # what an attacker would do: run code on every worker
            return "connected"
    except Exception as error:  # refused: a TLS handshake error, a timeout
        return f"{type(error).__name__}: {error}"


def test_the_cluster_refuses_a_client_without_the_courses_certificate(cluster, tmp_path):
    """Cause 2 of issue 38: only a client holding a certificate of the course's authority may
    run code on the workers; without one, with one of another authority, or in plain tcp, the
    scheduler refuses (the attacker's client ran code as root on a tcp:// worker)."""
    from distributed.security import Security

    from course_tools.grading._tls import make_certificates, security

    address, _, here = cluster
    mine = here / "tls" / "client"
    assert _connect(address, security(mine)) == "connected"  # the control: the instructor
    other = make_certificates(tmp_path / "other")["client"]
    attempts = {
        "no certificate": Security(tls_ca_file=str(mine / "ca.pem"), require_encryption=True),
        "another authority's certificate": Security(
            tls_ca_file=str(mine / "ca.pem"), tls_client_cert=str(other / "cert.pem"),
            tls_client_key=str(other / "key.pem"), require_encryption=True),
    }
    for what, attempt in attempts.items():
        assert _connect(address, attempt) != "connected", what
    plain = "tcp://" + address.split("://", 1)[1]
    assert _connect(plain, None) != "connected", "plain tcp"


def test_a_tcp_scheduler_is_refused_unless_the_insecure_flag_names_the_risk(tmp_path):
    """Cause 2: ``grade --scheduler tcp://...`` is refused before anything is sent, naming the
    route (tls://, --tls, grading-tls) and the flag; so is tls:// without the client's
    certificates, and any other protocol; the flag lets tcp:// through (to a closed port here:
    the connection error, not the refusal)."""
    pytest.importorskip("distributed", reason="distributed (pip install 'lectures-lib[cluster]')")
    folder = tmp_path / "submissions"
    folder.mkdir()
    nbformat.write(_submission("empty"), folder / f"dan_{NAME}.ipynb")

    def grade(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "course_tools", "grade", str(folder),
                               "--quiet", *args], capture_output=True, text=True, timeout=180,
                              cwd=tmp_path)

    for scheduler in ("tcp://127.0.0.1:9", "ws://127.0.0.1:9", "inproc://x", "ucx://h:1"):
        refused = grade("--scheduler", scheduler)
        assert refused.returncode == 2, (scheduler, refused.stderr[-1000:])
        assert "tls://HOST:PORT" in refused.stderr and "grading-tls" in refused.stderr \
            and "--insecure-plain-tcp-anyone-can-run-code" in refused.stderr, refused.stderr
    refused = grade("--scheduler", "tls://127.0.0.1:9")
    assert refused.returncode == 2 and "--tls DIR/client" in refused.stderr, refused.stderr
    allowed = grade("--scheduler", "tcp://127.0.0.1:9", "--insecure-plain-tcp-anyone-can-run-code")
    assert allowed.returncode == 2 and "OSError" in allowed.stderr, allowed.stderr[-1000:]
    assert "grading-tls" not in allowed.stderr


def test_the_certificates_are_private_and_no_authority_key_is_left(tmp_path):
    from course_tools.grading._tls import ROLES, main

    assert main([str(tmp_path / "tls")]) == 0
    written = sorted(str(p.relative_to(tmp_path / "tls")) for p in (tmp_path / "tls").rglob("*")
                     if p.is_file())
    assert written == sorted(f"{role}/{name}" for role in ROLES
                             for name in ("ca.pem", "cert.pem", "key.pem"))
    for role in ROLES:
        assert (tmp_path / "tls" / role / "key.pem").stat().st_mode & 0o077 == 0
        assert "PRIVATE KEY" not in (tmp_path / "tls" / role / "ca.pem").read_text()
    assert (tmp_path / "tls").stat().st_mode & 0o077 == 0


def test_a_worker_refuses_to_grade_as_root_or_over_plain_tcp(monkeypatch):
    """Cause 2: a worker runs whatever its scheduler sends, so it never grades as root (unless
    told root is fine on a throwaway machine) nor over a plain tcp:// scheduler the client did
    not allow."""
    from course_tools.grading import _cluster

    class Scheduler:
        address = "tcp://10.0.0.1:8786"

    class Worker:
        scheduler = Scheduler()

    import distributed

    monkeypatch.setattr(distributed, "get_worker", lambda: Worker())
    monkeypatch.delenv(_cluster.WORKER_AS_ROOT_ENV, raising=False)
    with pytest.raises(_cluster.WorkerRefused, match="tcp://, which authenticates no one"):
        _cluster._check_worker_host("w", {"insecure_plain_tcp": False})
    Scheduler.address = "tls://10.0.0.1:8786"
    if os.geteuid() == 0:
        with pytest.raises(_cluster.WorkerRefused, match="runs as root"):
            _cluster._check_worker_host("w", {"insecure_plain_tcp": False})
        monkeypatch.setenv(_cluster.WORKER_AS_ROOT_ENV, "unsafe")
    _cluster._check_worker_host("w", {"insecure_plain_tcp": False})  # accepted


# --------------------------------------------------------------------------------------------
# The client's side, without a cluster
# --------------------------------------------------------------------------------------------


def test_a_task_is_named_by_the_submissions_path_and_content(tmp_path):
    from course_tools.grading._cluster import _task_key

    path = tmp_path / f"alice_{NAME}.ipynb"
    key = _task_key(path, b"{}", "")
    assert key == _task_key(path, b"{}", "")  # rescheduled or resubmitted: one task
    assert key != _task_key(path, b"{ }", "")  # another content
    assert key != _task_key(tmp_path / f"bob_{NAME}.ipynb", b"{}", "")  # another submission
    assert key != _task_key(path, None, "it is a symbolic link")


class _Finished:
    def __init__(self, status, value):
        self.status, self.value = status, value

    def result(self):
        return self.value

    def exception(self):
        return self.value


class _Killed(Exception):
    pass


def test_what_a_finished_task_becomes(tmp_path):
    from course_tools.grading._cluster import WorkerRefused, _collect

    path = tmp_path / f"alice_{NAME}.ipynb"
    report = {"submission": str(path), "notebook": f"{NAME}.ipynb", "score": 4.0,
              "max_score": 4.0, "manual_max_score": 2.0, "error": "", "exercises": []}
    assert _collect(_Finished("finished", report), path, _Killed) == report
    lost = _collect(_Finished("error", _Killed("worker died")), path, _Killed)
    assert lost["score"] == 0 and "died while grading it" in lost["error"]
    failed = _collect(_Finished("error", OSError("disk full")), path, _Killed)
    assert "OSError: disk full" in failed["error"]
    with pytest.raises(WorkerRefused, match="another version"):
        _collect(_Finished("error", WorkerRefused("w1 has another version")), path, _Killed)
    with pytest.raises(ValueError, match="missing"):  # a worker's answer is checked, as locally
        _collect(_Finished("finished", {"score": 4.0}), path, _Killed)
