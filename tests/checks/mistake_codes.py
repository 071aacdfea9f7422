"""Every mistake code a checker can return, read from the checkers' source (``ast``), however the
code travels: a literal, a constant, a variable bound by a loop over a list of tuples or over a
dict, a parameter of a helper, a field of a candidate object (``Wrong``, ``_Candidate``, ...).

:func:`collect` returns ``(codes, unresolved)``. ``unresolved`` names every place where a code is
passed in a way this reader cannot follow (``file:line: expression``): the test fails on those
too, so a code cannot slip past by being passed some new way. What counts as "passing a code":

* ``Mistake(code, ...)``, ``CheckResult(name, passed, message, code)`` (or ``mistake=code``);
* the constructor of any class of ``lectures_lib/checks/`` with a field ``code`` (``Wrong``,
  ``_Candidate``, ``Candidate``): ``X(code, ...)`` or ``X(code=...)``. Reading ``something.code``
  passes on a code that one of these constructions made, so it needs no resolving itself.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path


class Unresolved(Exception):
    pass


@dataclass
class _Module:
    path: Path
    tree: ast.Module
    parents: dict = field(default_factory=dict)

    def scopes(self, node) -> list:
        """The functions enclosing ``node``, innermost first, then the module."""
        found = []
        while node in self.parents:
            node = self.parents[node]
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                found.append(node)
        return found + [self.tree]


class _Reader:
    def __init__(self, folder: Path):
        self.modules = []
        for path in sorted(folder.glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            module = _Module(path, tree)
            for parent in ast.walk(tree):
                for child in ast.iter_child_nodes(parent):
                    module.parents[child] = parent
            self.modules.append(module)
        self.carriers = {"Mistake": 0, "CheckResult": 3}  # class -> position of the code
        for module in self.modules:
            for node in ast.walk(module.tree):
                if isinstance(node, ast.ClassDef):
                    fields = [s.target.id for s in node.body if isinstance(s, ast.AnnAssign)
                              and isinstance(s.target, ast.Name)]
                    if "code" in fields:
                        self.carriers[node.name] = fields.index("code")
        self.depth = 0

    # ------------------------------------------------------------------ values of a code
    def values(self, expr, module: _Module, at) -> set[str]:
        """The strings ``expr`` (found at node ``at``) can be."""
        self.depth += 1
        try:
            if self.depth > 40:
                raise Unresolved("too deep")
            if isinstance(expr, ast.Constant):
                if expr.value is None:
                    return set()
                if isinstance(expr.value, str):
                    return {expr.value}
            if isinstance(expr, ast.IfExp):
                return self.values(expr.body, module, at) | self.values(expr.orelse, module, at)
            if isinstance(expr, ast.Attribute) and expr.attr in ("code", "mistake"):
                return set()  # a carrier's field (or a result's): its construction is collected
            if isinstance(expr, ast.Name):
                found = set()
                for value, scope_module, where in self.bindings(expr.id, module, at):
                    found |= self.values(value, scope_module, where)
                return found
            if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
                found = set()
                for element in self.elements(expr.value, module, at, subscript=True):
                    found |= self.values(element[0], element[1], element[2])
                return found
            raise Unresolved(ast.unparse(expr))
        finally:
            self.depth -= 1

    def bindings(self, name: str, module: _Module, at):
        """(value expression, where, module) for every binding of ``name`` visible from ``at``."""
        for scope in module.scopes(at):
            found = list(self._bound_in(name, scope, module))
            if found:
                return found
        for other in self.modules:  # an imported constant (NOT_IMPLEMENTED from _base)
            found = [b for b in self._bound_in(name, other.tree, other)]
            if found:
                return found
        raise Unresolved(name)

    def _bound_in(self, name, scope, module):
        body = scope.body if isinstance(scope.body, list) else [scope.body]
        arguments = getattr(scope, "args", None)
        if arguments is not None:
            params = [a.arg for a in arguments.posonlyargs + arguments.args]
            keywords = [a.arg for a in arguments.kwonlyargs]
            if name in params or name in keywords:
                yield from self._arguments(scope, name, params, module)
                return
        for node in self._walk_scope(body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    yield from self._unpack(target, name, [(node.value, module, node)], module)
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                yield from self._unpack(node.target, name, [(node.value, module, node)], module)
            elif isinstance(node, (ast.For, ast.comprehension)):
                if self._names(node.target) & {name}:
                    items = self.elements(node.iter, module, node)
                    yield from self._unpack(node.target, name, items, module)

    def _walk_scope(self, body):
        """The nodes of a scope, without descending into nested functions."""
        stack = list(body)
        while stack:
            node = stack.pop()
            yield node
            for child in ast.iter_child_nodes(node):
                if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda,
                                          ast.ClassDef)):
                    stack.append(child)

    @staticmethod
    def _names(target) -> set[str]:
        return {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}

    def _unpack(self, target, name, items, module):
        if isinstance(target, ast.Name):
            if target.id == name:
                yield from items
            return
        if isinstance(target, (ast.Tuple, ast.List)) and name in self._names(target):
            index = next(i for i, t in enumerate(target.elts) if name in self._names(t))
            for value, item_module, where in items:
                if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    yield from self._unpack(target.elts[index], name,
                                            [(value.elts[index], item_module, where)], module)
                elif isinstance(value, ast.Constant) and value.value is None:
                    continue
                else:
                    raise Unresolved(f"unpacking {ast.unparse(value)}")

    def _arguments(self, function, name, params, module):
        """The arguments passed for parameter ``name`` wherever ``function`` is called."""
        if isinstance(function, ast.Lambda):
            raise Unresolved(f"lambda parameter {name}")
        index = params.index(name) if name in params else None
        if params and params[0] in ("self", "cls") and index is not None:
            index -= 1
        calls = 0
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Call) and (
                    (isinstance(node.func, ast.Name) and node.func.id == function.name)
                    or (isinstance(node.func, ast.Attribute) and node.func.attr == function.name)):
                calls += 1
                keyword = next((k.value for k in node.keywords if k.arg == name), None)
                if keyword is not None:
                    yield keyword, module, node
                elif index is not None and index < len(node.args):
                    yield node.args[index], module, node
                else:
                    default = self._default(function, name)
                    if default is None:
                        raise Unresolved(f"{function.name}({name}=...) called without it")
                    yield default, module, function
        if not calls:
            raise Unresolved(f"parameter {name} of {function.name}, never called here")

    @staticmethod
    def _default(function, name):
        arguments = function.args
        positional = arguments.posonlyargs + arguments.args
        for arg, default in zip(positional[::-1], arguments.defaults[::-1]):
            if arg.arg == name:
                return default
        for arg, default in zip(arguments.kwonlyargs, arguments.kw_defaults):
            if arg.arg == name and default is not None:
                return default
        return None

    # --------------------------------------------------------------- elements of a collection
    def elements(self, expr, module, at, subscript=False) -> list:
        """(element expression, module, where) for what iterating ``expr`` yields."""
        if isinstance(expr, (ast.List, ast.Tuple, ast.Set)):
            out = []
            for element in expr.elts:
                if isinstance(element, ast.Starred):
                    out += self.elements(element.value, module, at)
                else:
                    out.append((element, module, at))
            return out
        if isinstance(expr, ast.Dict):
            source = expr.values if subscript else expr.keys
            return [(key, module, at) for key in source if key is not None]
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
            return self.elements(expr.left, module, at) + self.elements(expr.right, module, at)
        if isinstance(expr, ast.Call):
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in ("items", "keys", "values"):
                dicts = self._dicts(func.value, module, at)
                out = []
                for literal, dict_module in dicts:
                    for key, value in zip(literal.keys, literal.values):
                        pair = {"items": ast.Tuple(elts=[key, value]), "keys": key,
                                "values": value}[func.attr]
                        out.append((pair, dict_module, literal))
                return out
            if isinstance(func, ast.Name) and func.id in ("sorted", "list", "tuple", "reversed",
                                                          "set") and expr.args:
                return self.elements(expr.args[0], module, at)
            if isinstance(func, ast.Name) and func.id == "enumerate" and expr.args:
                return [(ast.Tuple(elts=[ast.Constant(None), e]), m, w)
                        for e, m, w in self.elements(expr.args[0], module, at)]
            if isinstance(func, ast.Name):
                for definition, def_module in self._functions(func.id, module):
                    return self._returned(definition, def_module)
            if isinstance(func, ast.Name) and func.id in self.carriers:
                return []
        if isinstance(expr, ast.Name):
            out = []
            for value, value_module, where in self.bindings(expr.id, module, at):
                out += self.elements(value, value_module, where, subscript)
                out += self._appended(expr.id, value_module, where)
            return out
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            return []  # iterating a string: characters, never codes
        raise Unresolved(f"iterating {ast.unparse(expr)}")

    def _dicts(self, expr, module, at):
        if isinstance(expr, ast.Dict):
            return [(expr, module)]
        if isinstance(expr, ast.Name):
            out = []
            for value, value_module, where in self.bindings(expr.id, module, at):
                out += self._dicts(value, value_module, where)
            return out
        raise Unresolved(f"the dict {ast.unparse(expr)}")

    def _functions(self, name, module):
        found = [(n, module) for n in ast.walk(module.tree)
                 if isinstance(n, ast.FunctionDef) and n.name == name]
        if not found:
            found = [(n, m) for m in self.modules for n in m.tree.body
                     if isinstance(n, ast.FunctionDef) and n.name == name]
        return found

    def _returned(self, function, module):
        out = []
        for node in self._walk_scope(function.body):
            if isinstance(node, ast.Return) and node.value is not None:
                out += self.elements(node.value, module, node)
        return out

    def _appended(self, name, module, at):
        """Elements added to list ``name``: ``name.append(x)``, ``.insert(i, x)``, ``.extend(xs)``,
        ``name += xs``."""
        out = []
        scope = module.scopes(at)[0]
        for node in ast.walk(scope):
            if (isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name)
                    and node.target.id == name):
                out += self.elements(node.value, module, node)
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == name):
                if node.func.attr == "append":
                    out.append((node.args[0], module, node))
                elif node.func.attr == "extend":
                    out += self.elements(node.args[0], module, node)
                elif node.func.attr == "insert":
                    out.append((node.args[1], module, node))
        return out

    # ---------------------------------------------------------------------------- the codes
    def sites(self):
        """(module, call node, code expression) for every place a code is passed."""
        for module in self.modules:
            for node in ast.walk(module.tree):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.id if isinstance(node.func, ast.Name) else getattr(
                    node.func, "attr", None)
                if name not in self.carriers:
                    continue
                keyword = "mistake" if name == "CheckResult" else "code"
                value = next((k.value for k in node.keywords if k.arg == keyword), None)
                position = self.carriers[name]
                if value is None and position < len(node.args):
                    value = node.args[position]
                if value is not None:
                    yield module, node, value


def collect(folder: Path) -> tuple[set[str], list[str]]:
    """(every code the checkers in ``folder`` can pass, the places this reader could not follow)."""
    reader = _Reader(folder)
    codes: set[str] = set()
    unresolved: list[str] = []
    for module, node, value in reader.sites():
        # the element of a list built by a comprehension etc. is resolved through its parts
        if isinstance(value, ast.Starred):
            value = value.value
        try:
            reader.depth = 0
            for element in ([value] if not isinstance(value, ast.Tuple) else value.elts):
                codes |= reader.values(element, module, node)
        except Unresolved as why:
            unresolved.append(f"{module.path.name}:{node.lineno}: {ast.unparse(value)} ({why})")
    return codes, unresolved
