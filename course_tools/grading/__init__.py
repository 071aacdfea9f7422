"""Grading submissions without nbgrader: ``python -m course_tools grade SUBMISSION ...``.

What a submission can and cannot do. Each submission is graded on its own:

1. its assignment is the one named with ``--notebook``, else the one its exercises' ``grade_id``s
   name (else its file name); a notebook whose ids name another assignment earns nothing for
   this one (a solved 01 handed in as 05 gets 0 for 05);
2. the code cells of its ``## Exercises`` section run in a **sandboxed worker process**
   (:mod:`course_tools.grading.sandbox`: bubblewrap, an unprivileged user, no network, a
   read-only library whose ``checks`` hold no checker, reference or probe, a private scratch
   folder, sized writable mounts, hard rlimits on address space, file size, CPU time and open
   files, and a cgroup of its own whose ``pids.max`` and memory limit hold for root too; every
   process it starts ends with it). Its own test cells never run;
3. the **course's** test cells (hidden tests included) run here, in the grader, with the
   course's checkers. The names they use that the course's own imports do not bind (the
   student's function, training function or model) are stand-ins: calling one sends the probe's
   tensors to the worker and brings back its answer as plain data (:mod:`course_tools.
   wire`: ``torch.load(weights_only=True)``, never an unpickled object). The expected answers,
   probes and verdict never enter the submission's process, so patching checkers, ``assert``,
   builtins or IPython there, or reading frames, gains nothing. Nothing the submission names is
   imported, run or looked up here (a module is a stand-in too), every answer is decoded under a
   budget (:data:`~course_tools.grading.sandbox.BUDGET`) and the call's deadline, and the
   grader never imports from the folder it grades in (:func:`_safe_python`);
4. an exercise's points are earned when its test cell ran here without an error; a checker that
   reports a failure fails the cell's ``assert``. Written answers are listed with their maximum
   points, to be graded by hand (with the start of the answer).

A submission that cannot be read (not a plain file, over :data:`MAX_SUBMISSION_BYTES`),
crashes, loops, sleeps, exits, floods its output or breaks the protocol gets a report like any
other, each exercise failed and the reason in its message; the batch goes on. Each
submission's grading process (the trusted side) has a memory limit of its own
(:data:`GRADER_MEMORY` of data, ``RLIMIT_DATA``). Folders are graded in parallel (``--jobs``: each job is a trusted process that
imports the grader once and forks a fresh grading process per submission, each with its own
sandbox, so no state of one submission's grading reaches the next), with a progress bar on
stderr. Reports are plain text: terminal control characters are removed, and a submission's
name is printed on one line (a newline in a file name escaped); no gradebook cell starts a
formula. ``--format nbgrader-csv`` takes student ids from a source the instructor holds, never
from file names (:mod:`._student_ids`), and tells each file's assignment before grading: a
student's second notebook for one assignment, or a notebook of none, gets a row of its own with
the reason and no score, and every other row is written (:func:`._report.one_row_each`).
``--output FILE``
writes them whole or not at all (a temporary file, then a replace).

Past one machine, ``--scheduler tls://HOST:PORT --tls DIR/client`` sends each submission to the
workers of a Dask distributed cluster over mutual TLS, which grade it as above (:mod:`._cluster`:
what crosses the network, where the grading secret lives, what a worker's death costs;
:mod:`._tls`: the certificates; ``tcp://`` only with ``--insecure-plain-tcp-anyone-can-run-code``).
Without it nothing runs on Dask.

What it cannot see: a student who copies the public reference solution (the notebooks are in a
public repository) writes correct code; exercises for credit need private variants. Where no
sandbox can be made (no bubblewrap, user namespaces disabled) the command refuses to grade
unless ``--no-sandbox`` is given: the verdict stays outside the submission's process, but its
code then runs with the grader's rights (do that only in a throwaway container or VM). Where no
cgroup of its own can be made for each sandbox, it refuses too, whoever runs it (only a cgroup
bounds a submission's processes and total memory: ``RLIMIT_NPROC`` does not hold for root,
``RLIMIT_AS`` is per process) unless ``--unbounded-without-cgroup``.

The package's parts, by responsibility (each imports only those before it, no circle):
``_report`` (tables, CSV, JSON, control characters removed), ``_student_ids`` (whose
row is whose in nbgrader's gradebook), ``_collect`` (reading a submission,
its assignment, which cells run before which test), ``_run`` (the course's test cells here,
against the sandbox's stand-ins), ``_verdict`` (one submission's report), ``_batch`` (a class:
zygotes, a forked grading process per submission, ``grade_paths``), ``_cluster`` (a class on
Dask's workers, each task one submission graded by ``_batch``'s zygote); ``_command`` (the
command line); this module names the public parts and imports each when first used (PEP 562), so
that importing a light part of the package (the sandboxed kernel's launcher,
:mod:`course_tools.grading.sandbox.kernel`, one for each kernel of every student of a class hub)
loads neither torch nor the checkers.
"""

from __future__ import annotations

import importlib

__all__ = ["DEFAULT_TIMEOUT", "SandboxRefused", "grade_submission", "grade_paths",
           "format_table", "format_csv", "format_nbgrader_csv", "clean_text"]

# Each name of the grader's parts, by the module (of this package, or absolute) that holds it.
_PARTS = {
    "_batch": ("GRADER_MEMORY", "_find", "_grade_one", "_limit_memory", "_one_parser",
               "_safe_python", "_Zygote", "_zygote_main", "grade_paths", "identify",
               "safe_sys_path"),
    "_collect": ("COURSE_NOTEBOOKS", "DEFAULT_TIMEOUT", "MAX_SUBMISSION_BYTES", "SECRET_ENV",
                 "_check_options", "read_submission", "use_secret"),
    "_report": ("_failed_report", "check_student_id", "clean_text", "format_csv",
                "format_nbgrader_csv", "format_table", "one_line", "one_row_each", "to_json",
                "write_atomic"),
    "_run": ("SandboxRefused", "_rule_broken", "_run_test", "_student_checks"),
    "_student_ids": ("ids_from_csv", "ids_from_folders"),
    "_verdict": ("grade_submission",),
    "course_tools.publish.exercises": ("find_exercises",),  # the grader's view of an exercise
    "_command": ("main", "_grade_main", "_Refused", "_grade_class", "_grade", "_formatted",
                 "_one_main"),
}
_LAZY = {name: module for module, names in _PARTS.items() for name in names}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _LAZY[name]
    value = getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"),
                    name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
