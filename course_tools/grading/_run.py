"""Running the course's test cells in the grader, against the submission's stand-ins (its code
runs in the sandbox: :mod:`course_tools.grading.sandbox`).
"""

from __future__ import annotations

import ast
import builtins
import json
import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from course_tools.grading._collect import _plan
from course_tools.grading._report import _short, clean_text
from course_tools.grading._rules import rule_problem
from course_tools.publish.exercises import exercise_cells as _exercise_cells
from course_tools.publish.exercises import strip_solutions


class SandboxRefused(RuntimeError):
    """No sandbox can be made here and ``sandbox=False`` (``--no-sandbox``) was not given."""


# --------------------------------------------------------------------------------------------
# Running the course's test cells here, against the submission's stand-ins
# --------------------------------------------------------------------------------------------


def _course_imports(course_nb) -> str:
    """Every import statement of the course's exercise cells: what its test cells' names mean."""
    statements = []
    for index in _exercise_cells(course_nb):
        try:
            tree = ast.parse(course_nb.cells[index].source)
        except SyntaxError:
            continue
        statements += [ast.unparse(node) for node in tree.body
                       if isinstance(node, (ast.Import, ast.ImportFrom))]
    return "\n".join(dict.fromkeys(statements))


def _free_names(source: str) -> list[str]:
    tree = ast.parse(source)
    loaded, bound = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded.append(node.id) if isinstance(node.ctx, ast.Load) else bound.add(node.id))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef)):
            bound.add(node.name)
    return [name for name in dict.fromkeys(loaded) if name not in bound]


REVIEW = "for a human to review: "  # how a test flagged by an exercise's rule begins


def _rule_broken(sources: list[str], checks: list, earlier: list[str] = (),
                 course_imports: str = "", trusted: set[str] = frozenset()) -> str:
    """Why the exercise's solution (``sources``) breaks or may break a rule its checkers state,
    or '' (:func:`~course_tools.grading._rules.rule_problem`)."""
    kind, why = rule_problem(list(sources), list(earlier), course_imports, checks, set(trusted))
    if kind == "review":
        return (f"{REVIEW}the exercise has a rule ({_words(checks)}) and its solution cannot be "
                f"read as keeping it: {why}. It earns nothing until an instructor looks.")
    return f"the solution breaks the exercise's rule: {why}" if kind else ""


def _words(checks: list) -> str:
    words = sorted({word for check in checks for word in getattr(check, "forbidden", ())})
    return "no " + ", ".join(f"`{word}`" for word in words) if words else "a stated limit"


def _run_test(source: str, imports: str, session, solution: list[str] = (),
              earlier: list[str] = (), trusted: set[str] = frozenset()) -> tuple[bool, str]:
    """Run one course test cell here; (passed, message). The student's names are stand-ins;
    ``solution`` is the exercise's source, held to the rules its checkers state (``earlier``:
    the program's cells before it; ``trusted``: the course's own cells' sources)."""
    from course_tools.grading.sandbox import SandboxError

    shown: list = []
    namespace: dict = {"__name__": "__course_test__"}
    exec(compile(imports, "<course imports>", "exec"), namespace)  # noqa: S102 - course code
    namespace["display"] = lambda *objects, **_: shown.extend(objects)
    checks = [value for value in namespace.values()  # the checkers this test cell calls
              if hasattr(value, "forbidden") and getattr(value, "__name__", "?") in source]
    broken = _rule_broken(list(solution), checks, list(earlier), imports, trusted)
    if broken:
        return False, broken
    try:
        for name in _free_names(source):
            if name in namespace or hasattr(builtins, name):
                continue
            try:  # data, or a stand-in (a module too): nothing it names is imported here
                namespace[name] = session.lookup(name)
            except NameError:
                continue  # the cell's NameError says it
        exec(compile(source, "<course test cell>", "exec"), namespace)  # noqa: S102
    except BaseException as error:  # an assert, a NameError, the sandbox's end, ...
        failed = [str(item) for item in shown if getattr(item, "passed", True) is False]
        if failed:  # the first check that failed says the most (e.g. "timed out")
            return False, clean_text(failed[0])
        if isinstance(error, SandboxError):
            return False, str(error)
        if isinstance(error, AssertionError):
            return False, clean_text(str(error) or "an assert of the hidden tests failed")
        return False, clean_text(f"{type(error).__name__}: {error}")
    results = [str(item) for item in shown if hasattr(item, "passed")]
    return True, results[0] if results else "hidden tests passed"


_STUDENT_CHECKS: dict[str, Path] = {}


def _student_checks() -> Path:
    """The sandbox's stand-in for lectures_lib.checks, written once per grading process."""
    if "path" not in _STUDENT_CHECKS:
        from course_tools.grading.sandbox import student_checks

        folder = tempfile.mkdtemp(prefix="lectures-student-checks-")
        os.chmod(folder, 0o755)
        _STUDENT_CHECKS["path"] = student_checks(Path(folder) / "checks")
    return _STUDENT_CHECKS["path"]


def _check_sandbox(sandbox: object, allow_root_without_cgroup: object = False) -> bool:
    if not isinstance(sandbox, bool):
        raise TypeError(f"sandbox must be a bool, got {type(sandbox).__name__} ({sandbox!r:.40})")
    if not isinstance(allow_root_without_cgroup, bool):
        raise TypeError("allow_root_without_cgroup must be a bool, got "
                        f"{type(allow_root_without_cgroup).__name__}")
    if sandbox:
        from course_tools.grading.sandbox import sandbox_problem

        problem = sandbox_problem(allow_root_without_cgroup)
        if problem:
            raise SandboxRefused(
                f"refusing to grade without a sandbox: {problem}. Student code would run with "
                "your rights and could read or change the course, the gradebook and the other "
                "submissions. Install bubblewrap, or grade inside a throwaway container or VM "
                "with --no-sandbox (sandbox=False)")
    return sandbox


@contextmanager
def _variant(key: str | None):
    """The checkers here draw the task variant ``key`` (the sandbox's data follow it too)."""
    from lectures_lib.checks.grader import set_task_variant, task_variant

    before = task_variant()
    set_task_variant(key)
    try:
        yield
    finally:
        set_task_variant(before)


def _not_the_submissions(session):
    """A checker's own work in the grader (08's homework trains the recipe here) is not the
    submission's time: its seconds move the session's limits (fair and wall clock) on."""
    def listener(seconds: float) -> None:
        session.clock.waited += seconds
        session.wall_deadline += seconds
    return listener


def _grade_tests(submission, course_nb, entries, timeout, sandbox, report) -> dict:
    from course_tools.grading.sandbox import SandboxError, Session

    cells, tests, missing = _plan(submission, course_nb, entries)
    results = {grade_id: (False, reason) for grade_id, reason in missing.items()}
    if not tests:
        return results
    imports = _course_imports(course_nb)
    trusted = {strip_solutions(course_nb.cells[index].source).strip()
               for index in _exercise_cells(course_nb)}  # the course's own cells, as released
    deadline = time.monotonic() + timeout
    call_timeout = max(1.0, min(10.0, timeout / 10))
    # With a secret, the trained exercises' data (in the sandbox and in the checkers here) are
    # this submission's own variant of each task: weights trained before grading do not fit.
    from lectures_lib.checks.grader import own_time_listener, task_key, timed_elsewhere

    key = task_key(json.dumps(cells))
    with Session(cells, _student_checks(), deadline=deadline, sandbox=sandbox,
                 call_timeout=call_timeout, task_key=key) as session, _variant(key), \
            timed_elsewhere(), own_time_listener(_not_the_submissions(session)):
        session.start()
        cell_errors: list = []
        for position, grade_id, source in tests:
            try:
                if session.dead_reason and session.clock.now() < deadline and session.ran:
                    session.close()  # a call ran out of time: a fresh run for the next test
                    session.start()
                if session.ran < position or session.ran == 0:
                    cell_errors += session.run_until(position)
            except SandboxError as error:
                results[grade_id] = (False, "not run: " + str(error))
                report["error"] = report["error"] or _short(str(error))
                continue
            previous = max([p for p, _, _ in tests if p < position], default=0)
            passed, message = _run_test(source, imports, session, cells[previous:position],
                                        cells[:previous], trusted)
            if not passed and cell_errors:
                index, problem = cell_errors[0]
                message += f" (cell {index + 1} of your exercises raised {problem})"
            results[grade_id] = (passed, _short(message))
    return results
