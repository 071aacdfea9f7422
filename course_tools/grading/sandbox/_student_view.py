"""The sandbox's view of ``lectures_lib.checks``: no checker, no reference, no probe.

:func:`student_checks` writes the stand-in package that the sandbox binds over the real
``checks`` (see :mod:`course_tools.grading.sandbox`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import course_tools
import lectures_lib

LIBRARY = Path(lectures_lib.__file__).resolve().parent  # the grader's lectures_lib
TOOLS = Path(course_tools.__file__).resolve().parent  # the grader's course_tools (the worker)
# The checks modules a submission gets whole: results, safe calls and the comparison engine, no
# checker, reference or probe. A new machinery module goes here, or its private functions are cut.
MACHINERY = ("_base", "_secrets", "_time_limit", "_compare")

_STUB = '''

class _GradedElsewhere:
    """What a checker gives inside the grader's sandbox: the course's grader decides."""

    passed = False
    mistake = "graded_by_the_grader"
    message = "checked by the course's grader, outside this process"

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"[GRADED BY THE COURSE] {{self.name}}: {{self.message}}"

    __repr__ = __str__

    def __bool__(self):
        return False

'''


def _is_secret(name: str) -> bool:
    return name.startswith("check_") or name.endswith("_reference") or name.startswith("_")


def _strip_module(source: str, keep_private: bool) -> tuple[str, list[str]]:
    """A checks module without its checkers, references and private functions; and its stubs."""
    tree = ast.parse(source)
    body, stubs = [], []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name.startswith("check_"):
                stubs.append(node.name)
                continue
            if not keep_private and _is_secret(node.name):
                continue
        body.append(node)
    tree.body = body
    text = ast.unparse(tree)
    if stubs:
        text += _STUB + "".join(
            f"\ndef {name}(student_fn=None, *args, **kwargs):\n"
            f"    return _GradedElsewhere({name[len('check_'):]!r})\n" for name in stubs)
    return text, stubs


def student_checks(target: Path) -> Path:
    """Write the sandbox's ``lectures_lib/checks`` into ``target``: public helpers and data only.

    Every ``check_*`` becomes a stub that passes nothing (the grader runs the real one), every
    ``*_reference`` and private function of a checker module is left out; the machinery
    (:data:`MACHINERY`: ``_base``, ``_secrets`` (the task variant the worker sets; the secret
    itself never reaches the sandbox), ``_time_limit``, ``_compare``; no answers) stays whole. Imports of names a module no longer has
    are dropped, so ``from lectures_lib.checks import check_x`` still works in a submission.
    """
    source = LIBRARY / "checks"
    target.mkdir(parents=True, exist_ok=True)
    kept: dict[str, set[str]] = {}
    texts: dict[str, str] = {}
    for path in sorted(source.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        if path.stem not in ("__init__", *MACHINERY):
            text, _ = _strip_module(text, keep_private=False)
        texts[path.stem] = text
        kept[path.stem] = _defined_names(text)
    for stem, text in texts.items():
        (target / f"{stem}.py").write_text(_filter_imports(text, kept), encoding="utf-8")
    return target


def _defined_names(text: str) -> set[str]:
    names = set()
    for node in ast.parse(text).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):  # `A = ...` and `A, B = ...` alike
            names |= {n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target,
                                                                              ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return names


def _filter_imports(text: str, kept: dict[str, set[str]]) -> str:
    """Drop ``from .module import name`` of names the stripped module lacks; fix ``__all__``."""
    tree = ast.parse(text)
    defined = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module in kept:
            node.names = [a for a in node.names
                          if a.name == "*" or a.name in kept[node.module]]
    tree.body = [node for node in tree.body
                 if not (isinstance(node, ast.ImportFrom) and not node.names)]
    text = ast.unparse(tree)
    defined = _defined_names(text)
    tree = ast.parse(text)
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__"
                                                 for t in node.targets)
                and isinstance(node.value, ast.List)):
            node.value.elts = [e for e in node.value.elts
                               if not (isinstance(e, ast.Constant) and isinstance(e.value, str)
                                       and e.value not in defined)]
    return ast.unparse(tree) + "\n"
