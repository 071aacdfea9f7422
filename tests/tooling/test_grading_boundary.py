"""The grader's own side against what crosses from the sandbox (issue 32), one cause at a time:

1. nothing a submission names is imported, run or looked up in the grader (a module it hands
   in, or names as its answer, never runs there; the grader never imports from the folder it
   was started in);
2. a reply is decoded under a budget: a few kB that decode to gigabytes (a stride-0 tensor, one
   tensor or subtree referenced many times, a compressed record) are refused before anything is
   allocated, and decoding stops at the call's deadline;
3. the rebuild of the course's model holds every size it reads off the submission (d_model,
   d_ff, vocabulary, depth, heads) to the exercise's bounds before it builds anything;
4. a submitted file is read without trusting its size or kind, and the grading process parses
   it under a memory limit;
5. the limits hold: every writable mount of the sandbox has a size (``/``, ``/course``, ``/dev``
   read-only), the process limit holds as root (a cgroup) or grading as root is refused.
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
import torch

from course_tools import grading
from course_tools.grading import sandbox
from course_tools.grading.sandbox import _cgroups as cgroups
from course_tools.grading.sandbox import wire
from lectures_lib.checks import trained
from lectures_lib.checks.trained import REVERSE_VOCAB_SIZE, check_reverse_translator
from lectures_lib.models import Transformer
from tests.tooling.test_grading import COURSE, NAME, _submission

pytestmark = pytest.mark.system  # the system tier (tests/conftest.py)

ROOT = Path(__file__).resolve().parents[2]
needs_sandbox = pytest.mark.skipif(sandbox.sandbox_problem() is not None,
                                   reason=f"no sandbox here: {sandbox.sandbox_problem()}")
MARKER = "LECTURES_ISSUE32_RAN"


def _session(cells: list[str], **options) -> sandbox.Session:
    return sandbox.Session(cells, grading._student_checks(), deadline=time.monotonic() + 90,
                           **options)


# ------------------------------------------------------------------------------------------
# 1. Nothing a submission names is imported in the grader
# ------------------------------------------------------------------------------------------


def _plant(folder: Path, names: list[str]) -> Path:
    """Modules that, if the grader ever imports them, leave a file behind."""
    seen = folder / "imported"
    seen.mkdir()
    for name in names:
        (folder / f"{name}.py").write_text(
            f"import pathlib\npathlib.Path({str(seen)!r}, {name!r}).write_text('ran')\n")
    return seen


@needs_sandbox
def test_a_module_the_submission_names_never_runs_in_the_grader(tmp_path, monkeypatch):
    seen = _plant(tmp_path, ["handed_in_helper"])
    monkeypatch.syspath_prepend(str(tmp_path))  # the grading folder first, as under `python -m`
    student = _submission("correct")
    exercise = next(e for e in grading.find_exercises(nbformat.read(COURSE, as_version=4))
                    if e.tests)
    student.cells[exercise.solutions[0]].source = (
        "import types\nmy_additive_attention = types.ModuleType('handed_in_helper')\n")
    path = tmp_path / f"alice_{NAME}.ipynb"
    nbformat.write(student, path)
    report = grading.grade_submission(path, timeout=40, course=COURSE.parent)
    assert list(seen.iterdir()) == [], "the grader imported a module the submission named"
    assert report["score"] == 0, report
    assert "handed_in_helper" not in sys.modules


@needs_sandbox
def test_the_grader_never_imports_from_the_folder_it_grades_in(tmp_path, monkeypatch):
    # a class folder with a handed-in torch.py / nbformat.py beside the notebooks, graded from
    # inside that folder: neither the zygotes nor the command's own process import them
    folder = tmp_path / "class"
    folder.mkdir()
    seen = _plant(folder, ["torch", "nbformat", "tqdm", "handed_in_helper"])
    nbformat.write(_submission("correct"), folder / f"bob_{NAME}.ipynb")
    monkeypatch.chdir(folder)
    reports, _ = grading.grade_paths([Path(".")], timeout=40, course=COURSE.parent, jobs=1)
    assert [r["score"] for r in reports] == [4.0], reports
    command = subprocess.run([sys.executable, "-m", "course_tools", "grade", "--help"],
                             cwd=folder, capture_output=True, text=True, timeout=120)
    assert command.returncode == 0, command.stderr[-2000:]
    assert list(seen.iterdir()) == [], "the grader imported a file from the grading folder"


def test_the_sandboxed_kernel_launcher_ignores_its_working_directory():
    from course_tools.grading.sandbox.kernel import kernel_spec

    argv = kernel_spec()["argv"]
    assert "-P" in argv[: argv.index("-m")] or "-I" in argv[: argv.index("-m")], argv


# ------------------------------------------------------------------------------------------
# 2. A reply is decoded under a budget
# ------------------------------------------------------------------------------------------


def _roundtrip(tree) -> object:
    """``tree`` as the grader receives it (torch.save'd as it is: a hostile worker's frame)."""
    return wire.loads(wire.dumps({"ok": tree}))["ok"]


def _refused_quickly(tree, budget=None, seconds: float = 5.0) -> str:
    budget = budget or sandbox.BUDGET  # what the grader's session decodes a reply under
    started = time.monotonic()
    with pytest.raises(wire.WireError) as error:
        wire.decode(tree, budget=budget)
    assert time.monotonic() - started < seconds, "refused, but not quickly"
    return str(error.value)


def test_a_stride_0_tensor_is_counted_at_its_dense_size():
    small = torch.zeros(1).expand(2**14, 2**14)  # 4 bytes stored, 1 GiB dense
    tree = _roundtrip(("t", small))
    assert tree[1].untyped_storage().nbytes() <= 64, "the frame holds only the one element"
    assert "bytes" in _refused_quickly(tree) or "elements" in _refused_quickly(tree)


def test_a_tensor_referenced_many_times_counts_each_time():
    one = torch.zeros(2**18)  # 1 MiB, referenced 400 times: 400 MiB decoded
    tree = _roundtrip(("L", [("t", one)] * 400))
    _refused_quickly(tree)
    assert wire.decode(_roundtrip(("L", [("t", one)] * 4)), budget=sandbox.BUDGET)[3].shape == (
        2**18,), "a few references are fine"


def test_an_exponential_tree_is_refused_quickly():
    tree = ("v", 1)
    for _ in range(30):  # 2**30 leaves, a few hundred bytes on the wire
        tree = ("L", [tree, tree])
    received = _roundtrip(tree)
    assert len(wire.dumps({"ok": tree})) < 20_000
    _refused_quickly(received, seconds=5.0)


def test_decoding_stops_at_the_calls_deadline():
    tree = _roundtrip(("L", [("v", i) for i in range(50_000)]))
    late = wire.Budget(seconds=time.monotonic() - 1)
    assert "time limit" in _refused_quickly(tree, budget=late)
    assert len(wire.decode(tree, budget=wire.Budget(seconds=time.monotonic() + 60))) == 50_000


def test_a_compressed_or_legacy_frame_is_refused_before_torch_reads_it(tmp_path):
    import io
    import zipfile

    data = wire.dumps({"ok": ("t", torch.zeros(2**16))})
    packed = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, \
            zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as target:
        for record in source.infolist():
            target.writestr(record.filename, source.read(record.filename))
    with pytest.raises(wire.WireError, match="compressed"):
        wire.loads(packed.getvalue())
    legacy = io.BytesIO()
    torch.save({"ok": ("v", 1)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(wire.WireError, match="zip"):
        wire.loads(legacy.getvalue())


def test_a_dtype_name_is_never_looked_up_on_a_module():
    assert wire.decode(("dtype", "float16")) is torch.float16
    for name in ("load", "_dynamo", "onnx", "__class__"):
        with pytest.raises(wire.WireError):
            wire.decode(("dtype", name))


@needs_sandbox
@pytest.mark.parametrize("payload", ["stride0", "shared"])
def test_a_hostile_worker_reply_that_decodes_large_is_refused(payload):
    make = {"stride0": "('t', torch.zeros(1).expand(2**14, 2**14))",
            "shared": "('L', [('t', torch.zeros(2**18))] * 400)"}[payload]
    cells = ["import time, torch\nfrom course_tools.grading.sandbox import wire\n"
             "def answer(*args):\n"
             f"    wire.write_frame(4, {{'ok': {make}}})\n"
             "    time.sleep(60)\n"]
    with _session(cells, call_timeout=30) as session:
        session.start()
        assert session.run_until(1) == []
        started = time.monotonic()
        with pytest.raises(sandbox.SandboxError, match="refused"):
            session.lookup("answer")()
        assert time.monotonic() - started < 15


# ------------------------------------------------------------------------------------------
# 3. Sizes declared by the student are bounded before anything is built
# ------------------------------------------------------------------------------------------


class _Declares(Transformer):
    """A small Transformer whose state_dict (or settings) declares other sizes."""

    def __init__(self, changes: dict) -> None:
        super().__init__(REVERSE_VOCAB_SIZE, REVERSE_VOCAB_SIZE, d_model=32, num_heads=2,
                         num_encoder_layers=1, num_decoder_layers=1, d_ff=64)
        self._changes = changes

    def state_dict(self, *args, **kwargs):
        state = dict(super().state_dict(*args, **kwargs))
        state.update(self._changes)
        return state


def _extra_layers(n: int) -> dict:
    return {f"encoder.layers.{i}.norm1.weight": torch.ones(32) for i in range(1, n)}


DECLARED = {
    "d_model": {"src_embed.embedding.weight": torch.zeros(1).expand(REVERSE_VOCAB_SIZE, 4096)},
    "d_ff": {"encoder.layers.0.feed_forward.linear1.weight": torch.zeros(1).expand(2**16, 32)},
    "vocabulary": {"src_embed.embedding.weight": torch.zeros(1).expand(2**16, 32)},
    "output vocabulary": {"tgt_embed.embedding.weight": torch.zeros(1).expand(2**16, 32)},
    "encoder layers": _extra_layers(40),
}


@pytest.mark.parametrize("size", [*DECLARED, "num_heads"])
def test_a_declared_size_beyond_the_exercises_is_refused_before_building(size, monkeypatch):
    model = _Declares(DECLARED.get(size, {}))
    if size == "num_heads":
        model.encoder.layers[0].num_heads = 4096
    built = []
    real = Transformer.__init__

    def spy(self, *args, **kwargs):
        built.append((args, kwargs))
        real(self, *args, **kwargs)

    monkeypatch.setattr(Transformer, "__init__", spy)
    result = check_reverse_translator(model)
    assert not result.passed and result.mistake == "not_a_model", result
    assert built == [], f"the checker built a Transformer of the declared sizes: {built}"
    assert size in result.message and "outside" in result.message, result.message


def test_the_bounds_admit_the_exercises_own_model():
    bounds = {**trained.MODEL_BOUNDS["both"], **trained.MODEL_BOUNDS["seq2seq"]}
    assert bounds["d_model"][0] <= 32 <= bounds["d_model"][1]
    assert bounds["vocab"][0] <= REVERSE_VOCAB_SIZE <= bounds["vocab"][1]
    trained._course_copy(_Declares({}), "seq2seq")  # the notebook's sizes: built, no Mistake


# ------------------------------------------------------------------------------------------
# 4. Files are read with a budget
# ------------------------------------------------------------------------------------------


def _padded(path: Path, size: int) -> Path:
    notebook = _submission("correct")
    text = nbformat.writes(notebook)
    tree = json.loads(text)
    tree["metadata"]["padding"] = "x" * size
    path.write_text(json.dumps(tree))
    return path


def test_an_oversized_submission_is_refused_without_parsing(tmp_path, monkeypatch):
    path = _padded(tmp_path / f"carol_{NAME}.ipynb", grading.MAX_SUBMISSION_BYTES + 10)
    sizes = []

    def spy(real):
        def parse(text, *args, **kwargs):
            sizes.append(len(text))
            return real(text, *args, **kwargs)
        return parse

    monkeypatch.setattr(nbformat, "reads", spy(nbformat.reads))
    monkeypatch.setattr(json, "loads", spy(json.loads))
    from course_tools.grading import _verdict

    monkeypatch.setattr(_verdict, "_check_sandbox", lambda *a: False)  # not needed to refuse
    started = time.monotonic()
    report = grading.grade_submission(path, timeout=40, course=COURSE.parent, notebook=NAME)
    assert max(sizes, default=0) < grading.MAX_SUBMISSION_BYTES, "the oversized file was parsed"
    assert report["score"] == 0 and "MiB" in report["error"], report
    assert time.monotonic() - started < 10


def test_a_link_or_device_is_not_read_as_a_submission(tmp_path):
    link = tmp_path / f"dave_{NAME}.ipynb"
    link.symlink_to("/dev/zero")
    with pytest.raises(ValueError, match="link"):
        grading.read_submission(link)
    real = _padded(tmp_path / "real.ipynb", 0)
    other = tmp_path / f"erin_{NAME}.ipynb"
    other.symlink_to(real)
    with pytest.raises(ValueError, match="link"):
        grading.read_submission(other)
    assert grading.read_submission(real).cells, "a plain file is read"


def test_the_grading_process_parses_under_a_memory_limit(tmp_path):
    path = tmp_path / f"frank_{NAME}.ipynb"
    path.write_text("[" + "[]," * 4_000_000 + "[]]")  # 12 MB, about 300 MB once parsed
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            grading._limit_memory(64 * 2**20)
            try:
                grading.read_submission(path)
                outcome = b"parsed"
            except MemoryError:
                outcome = b"MemoryError"
            except Exception as error:
                outcome = type(error).__name__.encode()
            os.write(write_fd, outcome)
        finally:
            os._exit(0)
    os.close(write_fd)
    outcome = os.read(read_fd, 100)
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert outcome == b"MemoryError"


# ------------------------------------------------------------------------------------------
# 5. Limits that hold
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mounts():
    """What a submission can write where (60 MiB files: under the file-size limit)."""
    cells = ["import os\n"
             "def fill(folder, limit):\n"
             "    written, n, error = 0, 0, ''\n"
             "    while written < limit:\n"
             "        try:\n"
             "            with open(f'{folder}/f{n}', 'wb') as f:\n"
             "                for _ in range(60):\n"
             "                    f.write(b'0' * 2**20)\n"
             "                    written += 2**20\n"
             "        except OSError as e:\n"
             "            error = e.errno\n"
             "            break\n"
             "        n += 1\n"
             "    for i in range(n + 1):\n"
             "        try:\n"
             "            os.remove(f'{folder}/f{i}')\n"
             "        except OSError:\n"
             "            pass\n"
             "    return [written, error]\n"]
    sizes = _sizes()
    with _session(cells, call_timeout=60) as session:
        session.start()
        assert session.run_until(1) == []
        fill = session.lookup("fill")
        return {folder: fill(folder, sizes.get(folder, 0) + 128 * 2**20)
                for folder in ("/", "/course", "/dev", "/dev/shm", "/tmp", "/scratch")}


def _sizes() -> dict[str, int]:
    limits = sandbox.Limits()
    return {"/dev/shm": getattr(limits, "shm_bytes", 64 * 2**20), "/tmp": limits.scratch_bytes,
            "/scratch": limits.scratch_bytes}


@needs_sandbox
@pytest.mark.parametrize("folder", ["/", "/course", "/dev"])
def test_the_sandboxs_root_course_and_dev_are_read_only(mounts, folder):
    assert mounts[folder] == [0, errno.EROFS], mounts


@needs_sandbox
@pytest.mark.parametrize("folder", ["/dev/shm", "/tmp", "/scratch"])
def test_writes_beyond_a_mounts_size_fail(mounts, folder):
    size = _sizes()[folder]
    amount, error = mounts[folder]
    assert error == errno.ENOSPC and size - 4 * 2**20 <= amount <= size, mounts[folder]


@needs_sandbox
def test_the_process_limit_holds_for_every_user():
    # as root the kernel ignores RLIMIT_NPROC: only the sandbox's cgroup limits this
    cells = ["import subprocess, os\n"
             "def spawn(n):\n"
             "    started, error = [], ''\n"
             "    try:\n"
             "        for _ in range(n):\n"
             "            started.append(subprocess.Popen(['sleep', '60'],\n"
             "                                            start_new_session=True))\n"
             "    except OSError as e:\n"
             "        error = e.errno\n"
             "    for p in started:\n"
             "        p.kill()\n"
             "        p.wait()\n"
             "    return [len(started), error]\n"]
    limits = sandbox.Limits()
    with _session(cells, call_timeout=60) as session:
        session.start()
        assert session.run_until(1) == []
        if session._group is not None:
            pids_max = session._group.folders[0] / "pids.max"
            assert pids_max.read_text().strip() == str(limits.processes)
            assert session.process.pid in session._group.pids()
        started, error = session.lookup("spawn")(3 * limits.processes)
        groups = list(session._group.folders) if session._group is not None else []
    assert started < limits.processes and error == errno.EAGAIN, (started, error)
    assert not any(folder.exists() for folder in groups), "the cgroup outlived its sandbox"


def test_grading_without_a_cgroup_is_refused_for_every_user_unless_asked(monkeypatch, tmp_path):
    """Issue 38, cause 3: without a group per sandbox nothing bounds a submission's processes
    (root) or its total memory (anyone: RLIMIT_AS is per process), so grading refuses whoever
    runs it (it fell back silently for an unprivileged grader), unless the loudly named flag;
    a kernel inside a student's group that root made (the hub's) is bounded by that group."""
    monkeypatch.setattr(sandbox, "_GROUPS", {"problem": "no cgroup filesystem is mounted"})
    monkeypatch.setattr(cgroups, "in_student_group", lambda: False)
    for uid in (0, 1000):
        monkeypatch.setattr(os, "geteuid", lambda uid=uid: uid)
        problem = sandbox.limits_problem()
        assert problem is not None and "no cgroup filesystem" in problem, uid
        assert "--unbounded-without-cgroup" in problem
        assert sandbox.limits_problem(allow_root_without_cgroup=True) is None
    monkeypatch.setattr(sandbox, "_bwrap", lambda: "/bin/true")
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0))
    path = tmp_path / f"gina_{NAME}.ipynb"
    nbformat.write(_submission("correct"), path)
    with pytest.raises(grading.SandboxRefused, match="cgroup"):
        grading.grade_submission(path, timeout=40, course=COURSE.parent)
    monkeypatch.setattr(cgroups, "in_student_group", lambda: True)
    assert sandbox.limits_problem() is None


def test_the_grade_commands_help_names_the_unbounded_flag():
    command = subprocess.run([sys.executable, "-m", "course_tools", "grade", "--help"],
                             capture_output=True, text=True, timeout=120)
    assert "--unbounded-without-cgroup" in command.stdout


@pytest.mark.skipif(cgroups.group_problem() is not None,
                    reason=f"no cgroup here: {cgroups.group_problem()}")
def test_a_cgroup_is_made_limited_and_removed():
    group = cgroups.Group(processes=7, memory_bytes=2**28)
    folders = list(group.folders)
    assert any((f / "pids.max").exists() and (f / "pids.max").read_text().strip() == "7"
               for f in folders)
    memory = [f for f in folders if (f / "memory.limit_in_bytes").exists()
              or (f / "memory.max").exists()]
    assert memory, folders
    child = subprocess.Popen(["sleep", "60"], preexec_fn=group.join)
    assert child.pid in group.pids()
    group.close()
    assert child.wait(timeout=10) == -9, "close kills what is left in the group"
    assert not any(f.exists() for f in folders)


def test_the_grader_process_has_a_memory_budget():
    assert grading.GRADER_MEMORY <= 8 * 2**30
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            grading._limit_memory(256 * 2**20)
            try:
                block = bytearray(1024 * 2**20)  # noqa: F841
                outcome = b"allocated"
            except MemoryError:
                outcome = b"MemoryError"
            os.write(write_fd, outcome)
        finally:
            os._exit(0)
    os.close(write_fd)
    outcome = os.read(read_fd, 100)
    os.close(read_fd)
    os.waitpid(pid, 0)
    assert outcome == b"MemoryError"
