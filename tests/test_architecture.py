"""The library's shape (ARCHITECTURE.md): no import circle, validators named for what they check,
no module over about 500 lines. Static scans of ``lectures_lib/`` plus one run that imports every
module alone."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import lectures_lib

PACKAGE = Path(lectures_lib.__file__).resolve().parent
ROOT = PACKAGE.parent
MAX_LINES = 500


def _modules() -> dict[str, Path]:
    """Dotted name -> file, for every module of the installed package."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = ["lectures_lib", *path.relative_to(PACKAGE).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return getattr(test, "id", None) == "TYPE_CHECKING" or getattr(test, "attr", None) == "TYPE_CHECKING"


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
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:  # `from . import x` imports the module x when there is one
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {each for each in found if each in MODULES and each != name}


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
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    assert graph["lectures_lib.attention"] >= {"lectures_lib._validate.attention"}, "the scan reads"
    assert _cycles(graph) == []


def test_the_scan_finds_a_circle_when_there_is_one():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]


def _third_party_imports() -> set[str]:
    """Modules outside the library (``matplotlib.pyplot``, ``torch.nn``) that its modules import
    when they load (imports at module level; those inside functions run later)."""
    found = set()
    for path in MODULES.values():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                found.add(node.module)
    return {name for name in found if name.split(".")[0] != "lectures_lib"}


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
assert not [m for m in sys.modules if m.startswith("lectures_lib")]
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
    names = sorted(name for name in MODULES if not name.endswith(".__main__"))  # scripts: they run
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


def test_no_module_is_over_about_500_lines():
    lines = {path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8").splitlines())
             for path in PACKAGE.rglob("*.py")}
    assert lines["attention.py"] > 100 and len(lines) == len(MODULES), "the scan reads"
    assert {name: n for name, n in lines.items() if n > MAX_LINES} == {}


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

