"""What a class runs for every student, and the light commands, load no torch (issue 41: sizing).

The sandboxed kernel's launcher (:mod:`course_tools.grading.sandbox.kernel`, a relay outside the
sandbox, one for each kernel of every student) needs ZeroMQ, not torch; it imported torch only
through the packages' ``__init__``s (``course_tools`` -> ``lectures_lib`` -> ``utils``;
``grading`` -> the grader; ``grading.sandbox`` -> the checkers), and so held torch's ~150 MiB
for every student beside the kernel's own (``benchmarks/class_sizing.py``). Each process here
starts fresh, as Jupyter, the hub or an instructor starts it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from course_tools.grading.sandbox import kernel as sandbox_kernel

# torch, and what only the grader and the learner's maths need
HEAVY = ("torch", "numpy", "lectures_lib.checks", "lectures_lib.utils", "course_tools.grading._batch")


def _heavy(modules: list[str]) -> list[str]:
    return sorted(m for m in modules if m in HEAVY)


def _imported_by_launcher_start(cwd: Path) -> list[str]:
    """``sys.modules`` after the launcher's module is imported by the kernelspec's own command
    line (its interpreter and flags, ``-P`` included, in the notebook's folder)."""
    argv = sandbox_kernel.kernel_spec()["argv"]
    at = argv.index("-m")
    module = argv[at + 1]
    code = (f"import importlib, json, sys; importlib.import_module({module!r}); "
            "import zmq; print(json.dumps(sorted(sys.modules)))")  # zmq: what launch() adds
    run = subprocess.run([*argv[:at], "-c", code], cwd=cwd, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.splitlines()[-1])


def test_the_kernel_launcher_loads_no_torch(tmp_path):
    modules = _imported_by_launcher_start(tmp_path)
    assert "course_tools.grading.sandbox.kernel" in modules and "zmq" in modules, "it ran"
    assert _heavy(modules) == [], (
        "the sandboxed kernel's launcher (one per kernel of every student) imports "
        f"{_heavy(modules)}: a package __init__ it passes through imports them eagerly")


def _imported_by_command(args: list[str], cwd: Path) -> list[str]:
    """The modules ``python -m course_tools ARGS`` imports (``-X importtime``'s list)."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "course_tools", *args],
                         cwd=cwd, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONWARNINGS="ignore"))
    assert run.returncode == 0, (args, run.stderr[-3000:])
    return [line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines()
            if line.startswith("import time:") and line.count("|") == 2]


@pytest.mark.parametrize("args", [
    ["--help"],
    ["hub", "--help"],
    ["hub", "status", "--help"],
    ["copy", "--help"],  # and the copy itself runs at every student's login (hub.configure)
    ["release", "--help"],
    ["sandbox-kernelspec"],  # prints kernel.json
])
def test_light_commands_load_no_torch(args, tmp_path):
    modules = _imported_by_command(args, tmp_path)
    assert "course_tools.cli" in modules, "the scan reads the command's imports"
    assert _heavy(modules) == [], f"`python -m course_tools {' '.join(args)}` imports {_heavy(modules)}"


def test_the_scan_sees_torch_where_a_command_needs_it(tmp_path):
    """``grade`` imports the grader (torch, the checkers): the scan above would see it."""
    assert "torch" in _imported_by_command(["grade", "--help"], tmp_path)


def test_the_hubs_own_processes_load_no_torch(tmp_path):
    """The hub process (its ``jupyterhub_config.py`` imports ``course_tools.classroom.hub``) and
    its submit service, started and with what a submission imports (the grader's process
    helpers): none needs torch (the service would grow ~220 MiB at the first submission)."""
    code = ("import json, sys; import course_tools.classroom.hub, course_tools.classroom.submit, "
            "course_tools.classroom.operations, nbformat; "
            "from course_tools.grading._process import MAX_SUBMISSION_BYTES, _die_with, "
            "_limit_memory, _read_line; print(json.dumps(sorted(sys.modules)))")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    modules = json.loads(run.stdout.splitlines()[-1])
    assert "course_tools.classroom.hub" in modules, "it ran"
    assert _heavy(modules) == [], _heavy(modules)


def test_the_packages_still_give_every_public_name():
    """The lazy ``__init__``s (PEP 562) still give what they named, on first use."""
    import course_tools.grading as grading
    import lectures_lib
    from course_tools.grading import sandbox

    assert callable(lectures_lib.seed_everything) and callable(lectures_lib.get_device)
    assert lectures_lib.utils.check_bool is lectures_lib.plain_checks.check_bool
    for name in grading.__all__:
        assert getattr(grading, name) is not None, name
    for name in sandbox.__all__:
        assert getattr(sandbox, name) is not None, name
    assert sandbox.Session.__module__ == "course_tools.grading.sandbox._session"
    for module in (lectures_lib, grading, sandbox):
        with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
            _ = module.no_such_name


FRAGMENTING_CELL = ("blocks = [bytearray(4000) for _ in range(50_000)]  # ~200 MB of heap\n"
                    "pin = bytearray(4000)  # above them: the heap's top stays in use\n"
                    "del blocks\n")
SHELL = """
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
if sys.argv[1] == "with":
    shell.extension_manager.load_extension(sys.argv[2])
def dirty():
    rollup = open("/proc/self/smaps_rollup").read().splitlines()[1:]
    return int(dict(line.split(":", 1) for line in rollup)["Private_Dirty"].split()[0]) * 1024
before = dirty()
shell.run_cell(sys.argv[3])
print(dirty() - before)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps_rollup")
def test_the_kernel_gives_back_what_a_cell_freed(tmp_path):
    """The sandboxed kernel's extension (loaded by the launcher's inner command): after a cell,
    the pages it freed leave the process; without it glibc keeps them (the baseline)."""
    from course_tools.grading.sandbox import _kernel_memory

    if _kernel_memory._TRIM is None:
        pytest.skip("this C library has no malloc_trim (not glibc): the extension does nothing")
    held = {}
    for mode in ("without", "with"):
        run = subprocess.run([sys.executable, "-c", SHELL, mode, sandbox_kernel.MEMORY_EXTENSION,
                              FRAGMENTING_CELL], cwd=tmp_path, capture_output=True, text=True,
                             timeout=120)
        assert run.returncode == 0, run.stderr[-3000:]
        held[mode] = int(run.stdout.split()[-1])
    assert held["without"] > 100 * 2**20, f"the baseline: glibc kept the freed pages {held}"
    assert held["with"] < held["without"] / 4, held
