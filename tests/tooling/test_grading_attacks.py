"""The grade command against a hostile student: each class of attack in the security review
(/work/shared/reviews/grading_security.md, rows 1-54) is refused by its *cause*, not its payload.

* A, the verdict outside the student's process: the course's test cells run in the grader; the
  submission's process holds no checker, reference, probe or expected answer, and whatever it
  does to its own interpreter (checkers, CheckResult, builtins, IPython, frames) gains nothing;
* B, no answer key in the sandbox: references and probes cannot be imported or read;
* C, no harm: the course, the other submissions and the gradebook are out of reach, no process
  outlives its submission, memory/output/time are bounded, the grader's environment is not
  inherited;
* D, a class, not a file: odd metadata, a wrong assignment, a broken protocol or a hostile
  message cost that submission only; reports hold no terminal control characters.

Every attack is graded in one batch, next to a correct *victim* graded after it, which must keep
its full marks, and an unchanged course.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
import time
from pathlib import Path

import nbformat
import pytest
import torch

from course_tools import grading
from course_tools.grading import sandbox
from course_tools.grading.sandbox import wire
from course_tools.publish.exercises import find_exercises, release_notebook
from tests.tooling.test_grading import COURSE, NAME, _submission

pytestmark = [pytest.mark.system, pytest.mark.system_package("bubblewrap")]  # skipped without it, named
TIMEOUT = 40
CANARY = "913.37"  # the argument of every process an attack leaves behind

NONE = "\n\ndef my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):\n    return None\n"
ATTACKS = {
    # A: the submission's own interpreter, patched every way the review found
    "patch_checker": "import lectures_lib.checks as c\nfrom lectures_lib.checks import CheckResult\n"
    "c.check_additive_attention = lambda fn, **kw: CheckResult('additive_attention', True, 'ok')"
    "\nimport lectures_lib.checks._base as b\n"
    "b.CheckResult = lambda name, passed, *a, **k: CheckResult(name, True, 'ok')" + NONE,
    "import_hook": "import builtins, types\n_real = builtins.__import__\n"
    "def _fake(name, *a, **k):\n    m = _real(name, *a, **k)\n"
    "    if 'checks' in name:\n        m = types.SimpleNamespace(**vars(m))\n"
    "        m.check_additive_attention = lambda *x, **y: None\n    return m\n"
    "builtins.__import__ = _fake\nbuiltins.AssertionError = type('Nope', (Exception,), {})" + NONE,
    "ipython_hooks": "ip = get_ipython()\nimport ast\n"
    "class _Drop(ast.NodeTransformer):\n    def visit_Assert(self, node):\n        return ast.Pass()\n"
    "if ip is not None:\n    ip.ast_transformers.append(_Drop())\n"
    "    ip.set_custom_exc((AssertionError,), lambda *a, **k: None)\n"
    "    ip.events.register('post_run_cell', lambda *a: ip.displayhook(4.0))" + NONE,
    "stack_oracle": "import sys\n\ndef my_additive_attention(q, k, v, w_q, w_k, w_score, mask=None):"
    "\n    frame = sys._getframe()\n    while frame is not None:\n"
    "        if 'expected' in frame.f_locals:\n            return frame.f_locals['expected']\n"
    "        frame = frame.f_back\n    return None\n",
    "reference_import": "from lectures_lib.checks.additive import additive_attention_reference "
    "as my_additive_attention\n",
    "reference_by_path": "import glob, sys\nsource = ''\n"
    "for path in glob.glob('/course/**/additive.py', recursive=True) + "
    "glob.glob(sys.prefix + '/**/checks/additive.py', recursive=True):\n"
    "    source += open(path).read()\nspace = {}\nexec(source, space)\n"
    "my_additive_attention = space['additive_attention_reference']\n",
    "keyboard_interrupt": "def my_additive_attention(*args, **kwargs):\n    raise KeyboardInterrupt\n",
    "escape_codes": "def my_additive_attention(*args, **kwargs):\n"
    "    raise ValueError('\\x1b[2J\\x1b[H\\x1b]0;forged\\x07 4/4 yes \\x9b31m')\n",
    "protocol_forgery": "import os\n\ndef my_additive_attention(*args, **kwargs):\n"
    "    os.write(4, b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x10garbage-garbage!')\n    return None\n",
    "pickle_bomb": "import os\n\ndef my_additive_attention(*args, **kwargs):\n"
    "    return os.system\n",
    # C: harm to the machine, the course, the others
    "fork_and_detach": "import subprocess, os\n"
    f"subprocess.Popen(['sleep', '{CANARY}'], start_new_session=True)\n"
    f"subprocess.Popen(['sh', '-c', 'sleep {CANARY} &'])\n"
    "if os.fork() == 0:\n    os.setsid()\n    os.execvp('sleep', ['sleep', '" + CANARY + "'])\n"
    + NONE,
    "orphan_kernel": "import os\nos._exit = lambda *a: None\nwhile True:\n    try:\n"
    "        while True:\n            pass\n    except BaseException:\n        pass\n",
    "memory_hog": "import torch\n\ndef my_additive_attention(*args, **kwargs):\n"
    "    return torch.ones(64 * 2**30, dtype=torch.uint8)\n",
    "output_flood": "print('x' * 50_000_000)\n" + NONE,
    "exit_everywhere": "import os, sys\n\ndef my_additive_attention(*args, **kwargs):\n"
    "    os._exit(0)\nsys.exit(0)\n",
}


def _write(folder: Path, kind: str, body: str | None) -> Path:
    student = _submission("correct")
    if body is not None:
        exercise = next(e for e in find_exercises(nbformat.read(COURSE, as_version=4)) if e.tests)
        student.cells[exercise.solutions[0]].source = body
    path = folder / f"{kind}_{NAME}.ipynb"
    nbformat.write(student, path)
    return path


def _digest(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()


def _canaries() -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and CANARY in (entry / "cmdline").read_bytes().decode():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    shutil.copy(COURSE, course / COURSE.name)
    folder = tmp_path_factory.mktemp("class")
    victim = folder / f"zzz_victim_{NAME}.ipynb"
    paths = {"control": _write(folder, "aaa_control", None)}
    for kind, body in ATTACKS.items():
        paths[kind] = _write(folder, f"aaa_{kind}", body)
    # C: the course's notebook, the victim's file and the gradebook, attacked by path
    paths["course_write"] = _write(folder, "aaa_course_write", (
        "import glob\nfor path in glob.glob('/[!pds]*/**/*.ipynb', recursive=True) + "
        f"[{str(course / COURSE.name)!r}, {str(victim)!r}]:\n"
        "    try:\n        open(path, 'w').write('{}')\n    except OSError:\n        pass\n"
        "import os\nfor fd in glob.glob('/proc/*/fd/*'):\n    try:\n"
        "        os.write(os.open(fd, os.O_WRONLY), b'forged,4,4')\n    except OSError:\n"
        "        pass\n" + NONE))
    # D: malformed metadata and the wrong assignment
    odd = nbformat.read(paths["control"], as_version=4)
    odd.cells[0].metadata["nbgrader"] = "x"
    odd.cells[1].metadata["nbgrader"] = {"grade_id": [1]}
    odd.cells[2].metadata["nbgrader"] = {"grade_id": 5}
    nbformat.write(odd, folder / f"aaa_odd_metadata_{NAME}.ipynb")
    paths["odd_metadata"] = folder / f"aaa_odd_metadata_{NAME}.ipynb"
    paths["victim"] = _write(folder, "zzz_victim", None)
    before = _digest(course), victim.read_bytes()
    started = time.monotonic()
    reports, _ = grading.grade_paths([folder], timeout=TIMEOUT, course=course, jobs=2)
    seconds = time.monotonic() - started
    by_name = {Path(r["submission"]).name: r for r in reports}
    return {kind: by_name[path.name] for kind, path in paths.items()}, {
        "before": before, "after": (_digest(course), victim.read_bytes()), "seconds": seconds,
        "n": len(paths)}


@pytest.mark.parametrize("kind", [*ATTACKS, "course_write", "odd_metadata"])
def test_every_attack_earns_nothing_and_says_why(batch, kind):
    reports, _ = batch
    report = reports[kind]
    if kind == "odd_metadata":  # a correct answer with odd metadata: graded, not aborted
        assert report["score"] == 4.0, report
        return
    assert report["score"] == 0.0, report
    row = next(r for r in report["exercises"] if not r["manual"])
    assert row["passed"] is False and row["message"], row


def test_the_control_and_the_victim_keep_full_marks(batch):
    reports, _ = batch
    assert reports["control"]["score"] == reports["victim"]["score"] == 4.0, reports["victim"]


def test_the_course_and_the_other_submissions_are_unchanged(batch):
    _, facts = batch
    assert facts["after"] == facts["before"]


def test_no_process_outlives_its_submission(batch):
    time.sleep(1)
    assert _canaries() == [], "processes an attack started are still running"


def test_a_hanging_submission_does_not_hold_the_batch(batch):
    _, facts = batch
    # every submission ends at its limit: two at a time, none may take the batch past its share
    assert facts["seconds"] < facts["n"] * (TIMEOUT + 30) / 2 + 60, facts["seconds"]


def test_messages_name_the_reason(batch):
    reports, _ = batch

    def message(kind):
        report = reports[kind]
        return next(r for r in report["exercises"] if not r["manual"])["message"] + report["error"]

    assert "KeyboardInterrupt" in message("keyboard_interrupt")
    assert "time limit" not in message("keyboard_interrupt")
    assert "additive_attention_reference" in message("reference_import")
    assert "returned None" in message("patch_checker")
    assert "\x1b" not in message("escape_codes") and "\x9b" not in message("escape_codes")
    assert "\x1b" not in grading.format_table(reports["escape_codes"])
    assert len(str(reports["output_flood"])) < 20_000


# ------------------------------------------------------------------------------------------
# Causes, seen from inside the sandbox (one session each: a few seconds)
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def inside():
    """Facts about the sandbox, computed by a 'submission' and brought back as data."""
    os.environ["LECTURES_CANARY_SECRET"] = "do-not-leak"
    cells = ["import os, resource, glob, socket\n"
             "import lectures_lib.checks as checks, lectures_lib.checks.additive as additive\n"
             "facts = {\n"
             " 'env': sorted(os.environ),\n"
             " 'uid': os.getuid(),\n"
             " 'memory': resource.getrlimit(resource.RLIMIT_AS)[1],\n"
             " 'processes': resource.getrlimit(resource.RLIMIT_NPROC)[1],\n"
             " 'file': resource.getrlimit(resource.RLIMIT_FSIZE)[1],\n"
             " 'pids': [p for p in os.listdir('/proc') if p.isdigit()],\n"
             " 'cmdlines': [open(f'/proc/{p}/cmdline', 'rb').read().decode(errors='replace')\n"
             "              for p in os.listdir('/proc') if p.isdigit()],\n"
             " 'additive': sorted(n for n in dir(additive) if not n.startswith('__')),\n"
             " 'checks_all': list(checks.__all__),\n"
             f" 'visible': [p for p in [{str(COURSE)!r}, {str(sandbox.LIBRARY / 'checks')!r}]\n"
             "             if os.path.exists(p)],\n"
             "}\n"
             "try:\n    socket.create_connection(('1.1.1.1', 53), timeout=2)\n"
             "    facts['network'] = True\nexcept OSError:\n    facts['network'] = False\n"
             "for path in ['/course/lectures_lib/attention.py', '/scratch/x', '/job/spec.json']:\n"
             "    try:\n        open(path, 'a').write('x')\n        facts[path] = 'written'\n"
             "    except OSError as e:\n        facts[path] = type(e).__name__\n"]
    with sandbox.Session(cells, grading._student_checks(), deadline=time.monotonic() + 60) as s:
        s.start()
        assert s.run_until(1) == []
        return s.lookup("facts")


def test_the_sandbox_holds_no_checker_reference_or_probe(inside):
    assert not any(n.endswith("_reference") or n.startswith("_probe") for n in inside["additive"])
    assert "check_additive_attention" in inside["additive"], "the name stays, as a stub"
    assert "check_additive_attention" in inside["checks_all"]


def test_the_sandbox_is_unprivileged_offline_limited_and_clean(inside):
    assert inside["uid"] != 0
    assert inside["network"] is False
    assert "LECTURES_CANARY_SECRET" not in inside["env"], "the grader's environment leaked"
    assert 0 < inside["memory"] < 2**40 and 0 < inside["processes"] < 1000
    assert 0 < inside["file"] < 2**31
    # only the sandbox's own processes: its worker (whose module path says "grading") and what
    # the cells start; nothing of the grader outside (pytest, the grade command)
    own = "-m\x00course_tools.grading.sandbox.worker\x00"
    outside = [line for line in inside["cmdlines"] if own not in line.replace(" ", "\x00") + "\x00"]
    assert len(outside) < len(inside["cmdlines"]), "the worker's own command line is seen"
    assert not any("pytest" in line or "grading" in line or " grade" in line for line in outside)
    assert inside["/course/lectures_lib/attention.py"] in ("OSError", "PermissionError")
    assert inside["/job/spec.json"] in ("OSError", "PermissionError")
    assert inside["/scratch/x"] == "written"
    assert inside["visible"] == [], "the grader's course or checkers are visible"


def test_a_submission_cannot_keep_the_grader_waiting():
    cells = ["import time\ndef slow():\n    time.sleep(3600)\n"]
    with sandbox.Session(cells, grading._student_checks(), deadline=time.monotonic() + 60,
                         call_timeout=1) as session:
        session.start()
        session.run_until(1)
        started = time.monotonic()
        with pytest.raises(sandbox.SandboxError, match="time limit"):
            session.lookup("slow")()
        # cut off at the 1 s call limit, not after the hour the submission asked for; the margin
        # is for a loaded 2-core CI machine (11 s was seen with eight jobs beside it)
        assert time.monotonic() - started < 60


# ------------------------------------------------------------------------------------------
# What crosses: plain data only
# ------------------------------------------------------------------------------------------


class _Evil:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_the_wire_refuses_objects():
    with pytest.raises(wire.WireError):
        wire.loads(pickle.dumps({"ok": _Evil()}))
    with pytest.raises(wire.WireError):
        wire.encode({"f": print})  # the grader never sends an object
    with pytest.raises(wire.WireError):
        wire.decode(("x", 1))
    tree = wire.encode({"a": (torch.nn.Parameter(torch.ones(2)), [1, "s", None, torch.float64])})
    value = wire.decode(wire.loads(wire.dumps({"ok": tree}))["ok"])
    assert type(value["a"][0]) is torch.Tensor and value["a"][1][3] is torch.float64


# ------------------------------------------------------------------------------------------
# No sandbox: a refusal, unless the instructor says otherwise
# ------------------------------------------------------------------------------------------


def test_without_a_sandbox_the_grader_refuses(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(sandbox, "_bwrap", lambda: None)
    path = _write(tmp_path, "alice", None)
    with pytest.raises(grading.SandboxRefused, match="--no-sandbox"):
        grading.grade_submission(path, timeout=TIMEOUT)
    assert grading.main([str(path)]) == 2
    assert "bubblewrap" in capsys.readouterr().err
    report = grading.grade_submission(path, timeout=TIMEOUT, sandbox=False)
    assert report["score"] == 4.0, report


def test_a_solved_01_handed_in_as_05_earns_nothing(tmp_path):
    path = _write(tmp_path, "mallory", None)
    renamed = tmp_path / "mallory_05_transformer_decoder.ipynb"
    path.rename(renamed)
    report = grading.grade_submission(renamed, timeout=TIMEOUT, notebook="05_transformer_decoder")
    assert report["score"] == 0.0 and "01_self_attention" in report["error"], report
    assert report["notebook"] == "05_transformer_decoder.ipynb"
    unsolved = release_notebook(nbformat.read(COURSE, as_version=4), NAME)
    for cell in unsolved.cells:
        cell.metadata.pop("nbgrader", None)  # no ids: recognised by nothing, graded as 05
    nbformat.write(unsolved, renamed)
    report = grading.grade_submission(renamed, timeout=TIMEOUT, notebook="05_transformer_decoder")
    assert report["score"] == 0.0 and report["max_score"] > 0, report


# ------------------------------------------------------------------------------------------
# An exercise's stated rule (05/1: no `label_smoothing`) is enforced on the source
# ------------------------------------------------------------------------------------------

ALLOWED = """def my_label_smoothing_loss(logits, targets, smoothing, ignore_index):
    '''Uses F.cross_entropy without label_smoothing, as the exercise allows.'''
    import torch.nn.functional as F
    log_p = logits.log_softmax(-1)
    keep = targets != ignore_index
    nll = F.cross_entropy(logits, targets, ignore_index=ignore_index, reduction="none")
    return ((1 - smoothing) * nll - smoothing * log_p.mean(-1))[keep].mean()
"""
CHEATS = [
    "F.cross_entropy(logits, targets, ignore_index=ignore_index, label_smoothing=smoothing)",
    "F.cross_entropy(logits, targets, None, None, ignore_index, None, 'mean', smoothing)",
    "F.cross_entropy(logits, targets, **{'label_' + 'smoothing': smoothing, "
    "'ignore_index': ignore_index})",
    "getattr(F, 'cross_' + 'entropy')(logits, targets, None, None, ignore_index, None, 'mean', "
    "smoothing)",
    "torch.nn.CrossEntropyLoss(None, None, ignore_index, None, 'mean', smoothing)(logits, targets)",
]


@pytest.mark.parametrize("cheat", CHEATS)
def test_a_stated_rule_is_enforced_whatever_the_spelling(cheat):
    from lectures_lib.checks import check_label_smoothing_loss

    body = ("import torch\nimport torch.nn.functional as F\n\n"
            "def my_label_smoothing_loss(logits, targets, smoothing, ignore_index):\n"
            f"    return {cheat}\n")
    space = {}
    exec(body, space)
    assert check_label_smoothing_loss(space["my_label_smoothing_loss"]).passed, "a real answer"
    assert grading._rule_broken([body], [check_label_smoothing_loss]), cheat
    assert not grading._rule_broken([ALLOWED], [check_label_smoothing_loss])
    space = {}
    exec(ALLOWED, space)
    assert check_label_smoothing_loss(space["my_label_smoothing_loss"]).passed
