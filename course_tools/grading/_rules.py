"""An exercise's stated rule, held as an allowlist (05's "no ``label_smoothing=``").

A checker cannot see how an answer was computed, so a rule such as "write the label-smoothed loss
yourself, without ``F.cross_entropy(..., label_smoothing=)``" is held on the submission's source.
A ban on a spelling is bypassed in many ways (``functools.partial``, ``__call__``, ``map``, an
alias, code written to a file and imported, a patched ``F`` in an earlier cell), so the solution
is read as an allowlist instead: what it may name is listed, what it breaks is refused, and
anything the reading cannot follow is **flagged for a human** (the test earns nothing until an
instructor looks), never passed.

The exercise's own cells (the solution) may use

* imports of :data:`MODULES` only (``torch``, ``torch.nn``, ``torch.nn.functional``, ``math``);
* names bound in those cells, the builtins of :data:`BUILTINS`, and names the course's own
  import statements bind (an earlier cell that binds them otherwise is flagged);
* functions and classes of those modules only where it calls them directly: used as a value (an
  alias, an argument of ``partial`` or ``map``, ``.__call__``) a callable is flagged, and one
  that takes the forbidden parameter (or is capped by ``positional_limit``) is checked at the
  call: the forbidden keyword, ``*``/``**`` unpacking or one positional argument too many break
  the rule;
* no special attribute (``__call__``, ``__dict__``, ...; ``super().__init__`` only) and no
  private name of a module (``torch._C``).

The cells before it that are not the course's own, unchanged, may not patch a module
(``F.cross_entropy = ...``), reach names indirectly (``setattr``, ``exec``, ``sys.modules``, ...)
or rebind a name the solution uses.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import types

MODULES = frozenset({"torch", "torch.nn", "torch.nn.functional", "math"})
BUILTINS = frozenset({
    "abs", "all", "any", "bool", "dict", "enumerate", "float", "int", "isinstance", "len",
    "list", "max", "min", "print", "range", "reversed", "round", "set", "sorted", "str", "sum",
    "tuple", "zip", "super", "None", "True", "False", "ValueError", "TypeError",
    "RuntimeError", "NotImplementedError", "AssertionError", "IndexError", "KeyError",
})
# What an earlier cell may not do where a rule holds: reach or change names indirectly.
INDIRECT = frozenset({"setattr", "delattr", "exec", "eval", "compile", "__import__",
                      "globals", "vars", "locals", "importlib", "sys", "builtins",
                      "__builtins__", "open"})


class _Found(Exception):
    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # "broken" or "review"


def _review(message: str) -> _Found:
    return _Found("review", message)


def _broken(message: str) -> _Found:
    return _Found("broken", message)


def _bound_names(tree: ast.AST, imports: bool = True) -> set[str]:
    """Every name a piece of code binds (assignments, parameters, defs, loops, ...; imports
    too unless ``imports=False``)."""
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)) and imports:
            bound |= set(_import_bindings(node))
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return bound


def _import_bindings(node: ast.Import | ast.ImportFrom) -> dict[str, str]:
    """{name bound: dotted path of what it is}, e.g. ``import torch.nn.functional as F``."""
    found = {}
    for alias in node.names:
        if isinstance(node, ast.Import):
            path = alias.name if alias.asname else alias.name.split(".")[0]
            found[alias.asname or alias.name.split(".")[0]] = path
        else:
            prefix = "." * node.level + (node.module or "")
            found[alias.asname or alias.name] = f"{prefix}.{alias.name}"
    return found


def _resolve(path: str):
    """The object at a dotted path of the allowed modules (the real one, imported here)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        if module in MODULES:
            value = importlib.import_module(module)
            for part in parts[cut:]:
                if part.startswith("_"):
                    raise _review(f"it reaches `{path}`, a private name")
                if isinstance(value, types.ModuleType) and value.__name__ not in MODULES:
                    raise _review(f"it reaches into `{value.__name__}`, which is not among the "
                                  f"modules this exercise allows ({', '.join(sorted(MODULES))})")
                value = getattr(value, part, None)  # a missing name fails when it runs
            if isinstance(value, types.ModuleType) and value.__name__ not in MODULES:
                raise _review(f"it uses the module `{value.__name__}`, which is not among the "
                              f"modules this exercise allows ({', '.join(sorted(MODULES))})")
            return value
        if module.split(".")[0] not in {m.split(".")[0] for m in MODULES}:
            break
    raise _review(f"it uses `{path}`, which is not among the modules this exercise allows "
                  f"({', '.join(sorted(MODULES))})")


class _Rule:
    def __init__(self, forbidden: set[str], limits: dict[str, int]) -> None:
        self.forbidden, self.limits = forbidden, limits

    def sensitive(self, value, name: str) -> bool:
        """Whether a callable can take the forbidden parameter (or is capped positionally)."""
        if name in self.limits:
            return True
        try:
            target = value.__init__ if inspect.isclass(value) else value
            parameters = inspect.signature(target).parameters
        except (TypeError, ValueError):
            return False
        return any(p in self.forbidden for p in parameters)

    def check_call(self, call: ast.Call, value, name: str) -> None:
        if not self.sensitive(value, name):
            return
        for keyword in call.keywords:
            if keyword.arg is None:
                raise _broken(f"it passes keyword arguments to `{name}` with ** (the exercise "
                              f"forbids {self.words()}: pass them by name)")
            if keyword.arg in self.forbidden:
                raise _broken(f"it passes `{keyword.arg}` to `{name}`, which the exercise forbids")
        if any(isinstance(arg, ast.Starred) for arg in call.args):
            raise _broken(f"it unpacks positional arguments into `{name}` with * (the exercise "
                          f"forbids {self.words()})")
        limit = self.limits.get(name)
        if limit is not None and len(call.args) > limit:
            raise _broken(f"it passes {len(call.args)} positional arguments to `{name}` (at most "
                          f"{limit}: the next one is forbidden by the exercise)")

    def words(self) -> str:
        return ", ".join(f"`{word}`" for word in sorted(self.forbidden)) or "its rule"


def _chain(node: ast.AST) -> tuple[str, list[str]] | None:
    """``F.a.b`` -> ("F", ["a", "b"]); None for anything not rooted at a plain name."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node.id, attributes[::-1]) if isinstance(node, ast.Name) else None


def _parents(tree: ast.AST) -> dict[int, ast.AST]:
    return {id(child): parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _check_solution(tree: ast.AST, rule: _Rule, outside: dict[str, str]) -> None:
    """The exercise's own cells, against the allowlist (``outside``: names the course binds)."""
    aliases = dict(outside)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, path in _import_bindings(node).items():
                _resolve(path)  # an import of anything but the allowed modules is flagged
                aliases[name] = path
    bound = _bound_names(tree, imports=False)  # locals: their values come from these cells
    if bound & set(aliases):
        raise _review(f"it rebinds `{sorted(bound & set(aliases))[0]}`, a name it imports")
    parents = _parents(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in rule.forbidden:
            raise _broken(f"it uses `{node.arg}`, which the exercise forbids")
        if isinstance(node, ast.Attribute):
            if node.attr in rule.forbidden:
                raise _broken(f"it uses `{node.attr}`, which the exercise forbids")
            if node.attr.startswith("__") and not _is_super_init(node):
                raise _review(f"it reaches the attribute `{node.attr}` (special attributes "
                              "can call or change anything)")
        if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)):
            continue
        if node.id in rule.forbidden:
            raise _broken(f"it uses `{node.id}`, which the exercise forbids")
        if node.id in aliases and node.id not in bound:
            _check_use(node, aliases[node.id], parents, rule)
        elif node.id not in bound and node.id not in BUILTINS:
            where = "a builtin this exercise does not allow" if hasattr(builtins, node.id) else \
                "defined outside this exercise's cells"
            raise _review(f"it uses `{node.id}`, {where}")


def _is_super_init(node: ast.Attribute) -> bool:
    return (node.attr == "__init__" and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "super")


def _check_use(name: ast.Name, path: str, parents: dict, rule: _Rule) -> None:
    """A name bound to a module or to one of its objects: follow its attribute chain."""
    top: ast.AST = name
    while isinstance(parents.get(id(top)), ast.Attribute) and parents[id(top)].value is top:
        top = parents[id(top)]
    _, attributes = _chain(top)
    dotted = ".".join([path, *attributes])
    if path.startswith(".") or path.split(".")[0] not in {m.split(".")[0] for m in MODULES}:
        value = _course_object(path, attributes)
    else:
        value = _resolve(dotted)
    shown = ".".join([name.id, *attributes])
    if isinstance(value, types.ModuleType):
        raise _review(f"it uses the module `{shown}` as a value (only its functions, called)")
    if not callable(value):
        return  # data: a dtype, a constant
    parent = parents.get(id(top))
    if isinstance(parent, ast.Call) and parent.func is top:
        rule.check_call(parent, value, attributes[-1] if attributes else name.id)
        return
    if inspect.isclass(value) and not rule.sensitive(value, attributes[-1] if attributes
                                                     else name.id):
        return  # a class as a value (isinstance, a base class) calls nothing
    raise _review(f"it uses `{shown}` as a value, not in a call (an alias, `partial`, `map` or "
                  "`__call__` would hide what it is called with)")


def _course_object(path: str, attributes: list[str]):
    """What a name the course's imports bind is (e.g. ``lectures_lib.training.fit``)."""
    module, _, last = path.rpartition(".")
    try:
        value = getattr(importlib.import_module(module), last)
    except (ImportError, AttributeError, ValueError):
        try:
            value = importlib.import_module(path)
        except ImportError:
            raise _review(f"it uses `{path}`, which the reading of its source cannot follow") from None
    if isinstance(value, types.ModuleType) or attributes:
        raise _review(f"it reaches into `{path}`, which is not among the modules this exercise "
                      f"allows ({', '.join(sorted(MODULES))})")
    return value


def _check_earlier(tree: ast.AST, needed: set[str], course_bindings: dict[str, str]) -> None:
    """A cell before the solution that is not the course's own: nothing it does may change what
    the solution's names mean."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in INDIRECT:
            raise _review(f"a cell before the solution uses `{node.id}`, which can change what "
                          "the solution's names mean")
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
            raise _review("a cell before the solution sets an attribute "
                          f"(`{ast.unparse(node)}`): it could patch a module the solution calls")
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            raise _review(f"a cell before the solution reaches `{ast.unparse(node)}`")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for name, path in _import_bindings(node).items():
                if name in needed and course_bindings.get(name) != path:
                    raise _review(f"a cell before the solution binds `{name}` to `{path}`, not "
                                  "what the course's imports make it")
    rebound = _bound_names(tree, imports=False) & needed
    if rebound:
        raise _review(f"a cell before the solution rebinds `{sorted(rebound)[0]}`, which the "
                      "solution uses")


def rule_problem(solution: list[str], earlier: list[str], course_imports: str, checks: list,
                 trusted: set[str] = frozenset()) -> tuple[str, str]:
    """("", "") when the solution keeps its checkers' rule; ("broken", why) when it breaks it;
    ("review", why) when the reading cannot tell (a human decides).

    ``solution``: the exercise's own cells; ``earlier``: the program's cells before them;
    ``course_imports``: the course's import statements (what its names mean); ``trusted``: the
    sources of the course's own cells (an earlier cell equal to one is not read)."""
    from course_tools.grading.sandbox.worker import _python_source

    forbidden = {word for check in checks for word in getattr(check, "forbidden", ())}
    limits = {k: v for check in checks for k, v in getattr(check, "positional_limit", {}).items()}
    if not forbidden and not limits:
        return "", ""
    rule = _Rule(forbidden, limits)
    course_bindings = {}
    for node in ast.walk(ast.parse(course_imports)):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            course_bindings.update(_import_bindings(node))
    # the course's own cells, unchanged, in the span before a test (05's imports cell, before
    # the first solution) are not the answer: read as the trusted cells before it are
    solution = [source for source in solution if source.strip() not in trusted]
    try:
        trees = [ast.parse(_python_source(source)) for source in solution]
        before = [ast.parse(_python_source(source)) for source in earlier
                  if source.strip() not in trusted]
    except SyntaxError:
        return "", ""  # the cell fails when it runs
    try:
        program = ast.Module(body=[node for tree in trees for node in tree.body], type_ignores=[])
        own = _bound_names(program)
        needed = {node.id for node in ast.walk(program)
                  if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)} - own
        for tree in before:
            _check_earlier(tree, needed, course_bindings)
        _check_solution(program, rule, {k: v for k, v in course_bindings.items() if k in needed})
    except _Found as found:
        return found.kind, str(found)
    return "", ""
