"""The library's shape (ARCHITECTURE.md): no import circle, validators named for what they check,
no module over 500 lines without a reason, and the learner's library apart from the instructor's
tools: ``lectures_lib`` imports nothing of ``course_tools``. Static scans of both packages plus
runs that import every module alone and the whole library."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

import course_tools
import lectures_lib

PACKAGE = Path(lectures_lib.__file__).resolve().parent
TOOLS = Path(course_tools.__file__).resolve().parent
ROOT = PACKAGE.parent
MAX_LINES = 500


def _modules(folder: Path = PACKAGE, package: str = "lectures_lib") -> dict[str, Path]:
    """Dotted name -> file, for every module of the installed package."""
    found = {}
    for path in sorted(folder.rglob("*.py")):
        parts = [package, *path.relative_to(folder).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()  # the learner's library
TOOL_MODULES = _modules(TOOLS, "course_tools")  # the instructor's tools
EVERY_MODULE = {**MODULES, **TOOL_MODULES}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


def _from_module(node: ast.ImportFrom, package: str) -> str:
    """The absolute module of ``from X import ...`` written in ``package`` (relative resolved)."""
    base = node.module or ""
    if node.level:
        anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
        base = ".".join([*anchor, *([base] if base else [])])
    return base


def _imports(name: str, path: Path) -> set[str]:
    """The library modules ``name`` imports, at the top or inside a function (a lazy import
    closes a circle as surely, only later); imports under ``if TYPE_CHECKING`` never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and _is_type_checking(node)
            for child in node.body for n in ast.walk(child)}
    found = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, package)
            for alias in node.names:  # `from . import x` imports the module x when there is one
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in EVERY_MODULE else base)
    return {each for each in found if each in EVERY_MODULE and each != name}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph)))
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_static_import_map_has_no_circle():
    graph = {name: _imports(name, path) for name, path in EVERY_MODULE.items()}
    assert graph["lectures_lib.attention"] >= {"lectures_lib._validate.attention"}, "the scan reads"
    assert graph["course_tools.grading._run"] >= {"lectures_lib.checks.grader"}, "the scan reads"
    assert _cycles(graph) == []


def test_the_scan_finds_a_circle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _third_party_imports() -> set[str]:
    """Modules outside the library (``matplotlib.pyplot``, ``torch.nn``) that its modules import
    when they load (imports at module level; those inside functions run later)."""
    found = set()
    for path in EVERY_MODULE.values():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
    return {name for name in found if name.split(".")[0] not in ("lectures_lib", "course_tools")}


@pytest.mark.slow
def test_every_module_imports_alone_in_a_fresh_interpreter():
    """One interpreter loads the third-party packages the library imports (torch, numpy,
    matplotlib, ...), then forks once per module: each child imports that module first (no other
    library module loaded), so an order-dependent circle fails here. A package that fails to load
    in the parent is left to the child, where the module's import then fails as it would alone.
    The children run as many at a time as there are cores."""
    script = """
import importlib, os, sys, traceback
third_party, names = sys.argv[1].split(","), sys.argv[2:]
for package in third_party:  # shared by the forks: each child pays only for the library
    try:
        importlib.import_module(package)
    except BaseException:
        pass
assert not [m for m in sys.modules if m.startswith(("lectures_lib", "course_tools"))]
failed, running = [], {}
def reap():
    pid, status = os.wait()
    if status:
        failed.append(running[pid])
    del running[pid]
for name in names:
    while len(running) >= max(1, os.cpu_count() or 1):
        reap()
    pid = os.fork()
    if pid == 0:
        try:
            importlib.import_module(name)
        except BaseException:
            traceback.print_exc()
            os._exit(1)
        os._exit(0)
    running[pid] = name
while running:
    reap()
print("FAILED", sorted(failed))
sys.exit(1 if failed else 0)
"""
    names = sorted(name for name in EVERY_MODULE if not name.endswith(".__main__"))  # they run
    third_party = sorted(_third_party_imports())
    assert {"torch", "numpy"} <= set(third_party), "the scan reads"
    run = subprocess.run([sys.executable, "-c", script, ",".join(third_party), *names],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]


def _public_names() -> dict[str, str]:
    """Functions, classes and public methods defined outside the rules, with where."""
    names = {}
    for name, path in MODULES.items():
        if name.startswith("lectures_lib._validate"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                names.setdefault(node.name, name)
            if isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef) and not member.name.startswith("_"):
                        names.setdefault(member.name, f"{name}.{node.name}")
    return names


def test_no_validator_shares_a_public_name():
    """A search for the definition of ``scaled_dot_product_attention`` finds one: the rules are
    named for what they check (``qkv_and_mask``), as PyTorch's ``_mha_shape_check``."""
    public = _public_names()
    assert "scaled_dot_product_attention" in public and "fit" in public, "the scan reads"
    rules = [name for name in MODULES if name.startswith("lectures_lib._validate")]
    assert len(rules) >= 10, rules
    clashes = []
    for name in rules:
        for node in ast.parse(MODULES[name].read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef) and node.name in public:
                clashes.append(f"{name}.{node.name} (public in {public[node.name]})")
    assert clashes == []


def test_the_rules_mirror_the_taught_modules():
    """The rules of ``X.py`` are in ``_validate/X.py``: a module that imports rules imports its
    own file's, plus at most the shared ones (the settings' one rule, ``settings.py``); ``interop``
    (``from_torch``) uses the rules of the classes it builds."""
    settings = "lectures_lib._validate.settings"
    shared = {"lectures_lib._validate.variants.shared",
              "lectures_lib._validate.layers", settings}
    borrowers = {"lectures_lib.interop": {"lectures_lib._validate.attention",
                                          "lectures_lib._validate.layers", settings}}
    for name, path in MODULES.items():
        if name.startswith("lectures_lib._validate"):
            continue
        rules = {m for m in _imports(name, path) if m.startswith("lectures_lib._validate.")}
        if not rules:
            continue
        if name in borrowers:
            assert rules <= borrowers[name], (name, rules)
            continue
        own = "lectures_lib._validate." + name.removeprefix("lectures_lib.")
        assert own in rules or rules <= {"lectures_lib._validate.variants.shared", settings}, (
            name, rules)
        assert rules <= shared | {own}, (name, rules)


def _imported_names(path: Path, package: str) -> set[str]:
    """Every module name ``path`` imports, anywhere in it (functions, ``TYPE_CHECKING`` blocks,
    ``if __name__ == "__main__"``), relative imports resolved, and the names handed as text to
    ``importlib.import_module`` or ``__import__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _from_module(node, package)
            found.update([base, *(f"{base}.{alias.name}" for alias in node.names)])
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in
              ("import_module", "__import__")):
            found.add(node.args[0].value)
    return found


def _reaches_the_tools(names: set[str]) -> set[str]:
    return {name for name in names if name == "course_tools" or name.startswith("course_tools.")}


def test_lectures_lib_imports_nothing_of_the_tools():
    """Static, over every module of the learner's library, wherever the import stands."""
    reaching = {}
    for name, path in MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = _reaches_the_tools(_imported_names(path, package))
        if found:
            reaching[name] = sorted(found)
    assert reaching == {}
    tools = _imported_names(TOOL_MODULES["course_tools.grading._run"], "course_tools.grading")
    assert "lectures_lib.checks.grader" in tools, "the scan reads"
    lazy = ast.parse("def f():\n    import importlib\n    importlib.import_module('course_tools.cli')")
    assert _reaches_the_tools({n.args[0].value for n in ast.walk(lazy) if isinstance(n, ast.Call)
                               and n.args}) == {"course_tools.cli"}, "the scan reads"


def test_the_tools_use_only_public_modules_of_the_library():
    """The grader reaches the checkers through their one interface (``lectures_lib.checks.grader``:
    the secret, the task variant, the time limits), never through a private module
    (``checks._base``, ``checks._secrets``, ``_validate``, ...)."""
    private = {}
    for name, path in TOOL_MODULES.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = {each for each in _imported_names(path, package)
                 if each.split(".")[0] == "lectures_lib"
                 and any(part.startswith("_") for part in each.split("."))}
        if found:
            private[name] = sorted(found)
    assert private == {}
    assert "lectures_lib.checks.grader.SECRET_ENV" in _imported_names(
        TOOL_MODULES["course_tools.grading._collect"], "course_tools.grading"), "the scan reads"


@pytest.mark.slow
def test_importing_the_whole_library_loads_no_tool():
    """At import time: every module of ``lectures_lib`` imported in one fresh interpreter, and
    no module of ``course_tools`` is loaded."""
    names = sorted(name for name in MODULES if not name.endswith(".__main__"))
    script = ("import importlib, sys\n"
              "for name in sys.argv[1:]:\n"
              "    importlib.import_module(name)\n"
              "print(sorted(m for m in sys.modules if m.split('.')[0] == 'course_tools'))\n"
              "print(len([m for m in sys.modules if m.split('.')[0] == 'lectures_lib']))\n")
    run = subprocess.run([sys.executable, "-c", script, *names], capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    loaded, count = run.stdout.splitlines()[-2:]
    assert loaded == "[]", f"importing lectures_lib loaded {loaded}"
    assert int(count) >= len(names), "the run imports the library"


REASON = re.compile(r"#\s*Over 500 lines:\s*\S")  # e.g. "# Over 500 lines: one table of ..."


def _first_comment(text: str) -> str:
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            return token.string
    return ""


def _over_without_reason(text: str) -> bool:
    """A module over :data:`MAX_LINES` lines whose first comment does not say why
    (``# Over 500 lines: <the reason>``)."""
    return len(text.splitlines()) > MAX_LINES and not REASON.match(_first_comment(text))


def test_the_line_rule_reads_the_first_comment():
    long_body = "x = 1\n" * MAX_LINES
    assert not _over_without_reason("x = 1\n")
    assert _over_without_reason('"""Doc."""\n' + long_body)
    assert _over_without_reason("# a comment, no reason\n" + long_body)
    assert _over_without_reason("x = 1  # the first comment\n# Over 500 lines: too late\n" + long_body)
    assert not _over_without_reason('"""Doc."""\n# Over 500 lines: one table of 180 rows.\n'
                                    + long_body)


def test_no_module_is_over_500_lines_without_a_reason_in_its_first_comment():
    lines = {}
    for folder in (PACKAGE, TOOLS):
        for path in folder.rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            lines[path.relative_to(folder.parent).as_posix()] = (len(text.splitlines()),
                                                                  _over_without_reason(text))
    assert lines["lectures_lib/attention.py"][0] > 100 and len(lines) == len(EVERY_MODULE), \
        "the scan reads"
    assert {name: n for name, (n, without) in lines.items() if without} == {}


# ---- guards apart from the maths --------------------------------------------------------


def test_guards_are_at_most_a_few_percent_of_the_taught_code():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import guard_share
    finally:
        sys.path.pop(0)
    rows = guard_share.table()
    code = sum(r[2] for r in rows)
    checks = sum(r[3] for r in rows)
    assert checks / code <= 0.07, f"guards are {checks / code:.1%} of the taught code"
    for name, _, module_code, module_checks in rows:
        assert module_checks / module_code <= 0.10, f"{name}: {module_checks}/{module_code}"



def test_no_taught_module_keeps_boundary_blocks():
    for name in ("attention", "masks", "positional", "layers", "models", "decoding", "training"):
        tree = ast.parse((ROOT / "lectures_lib" / f"{name}.py").read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") in (
                "at_boundary", "inside_library"
            ):
                raise AssertionError(f"{name}.py:{node.lineno} still calls {node.func.id}()")

