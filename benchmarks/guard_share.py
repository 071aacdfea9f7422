"""How much of the taught library's code is input checking (issue 18's measure).

Counts the way ``reviews/architecture.md`` does: code lines exclude blank lines, comments and
docstrings; a code line is a *check* when it belongs to a ``check_*``/``_check_*`` function or a
``check_inputs`` method, an ``if at_boundary():`` block, an ``if ...: raise`` block, a ``raise`` or
``assert`` statement, or a statement whose value is a ``check_*`` call. The lines that hand the
arguments to a validator count too (a ``@validated(...)`` decorator, a ``rules.*(...)`` call):
they are what a learner still reads of the checks. The validators themselves, kept apart in
``_validate/``, are not teaching code and are not counted.

    python benchmarks/guard_share.py            # a table per module
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TAUGHT = ("attention", "masks", "positional", "layers", "models", "decoding", "training", "cache")


def _code_lines(source: str, tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                        tokenize.DEDENT, tokenize.ENDMARKER):
            continue
        lines.update(range(tok.start[0], tok.end[0] + 1))
    for node in ast.walk(tree):  # docstrings are not code
        body = getattr(node, "body", None)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) \
                and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            lines.difference_update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def _is_check_call(value: ast.AST | None) -> bool:
    if not isinstance(value, ast.Call):
        return False
    f = value.func
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id.endswith("rules"):
        return True  # a hand-over to a validator
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name.startswith(("check_", "_check_", "validated"))


def _span(node: ast.AST) -> range:
    return range(node.lineno, node.end_lineno + 1)


def _check_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith(("check_", "_check_")) or node.name == "check_inputs":
                lines.update(_span(node))
            for decorator in node.decorator_list:
                if _is_check_call(decorator):
                    lines.update(_span(decorator))
        elif isinstance(node, ast.If):
            t = node.test
            boundary = isinstance(t, ast.Call) and getattr(t.func, "id", "") == "at_boundary"
            raises = any(isinstance(s, ast.Raise) for s in node.body)
            if boundary or raises:
                lines.update(_span(node))
        elif isinstance(node, (ast.Raise, ast.Assert)):
            lines.update(_span(node))
        elif isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign, ast.Return)) and _is_check_call(
            node.value
        ):
            lines.update(_span(node))
    return lines


def measure(path: Path) -> tuple[int, int]:
    """``(code lines, check lines)`` of one module."""
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source)
    code = _code_lines(source, tree)
    return len(code), len(code & _check_lines(tree))


def table(names: tuple[str, ...] = TAUGHT) -> list[tuple[str, int, int, int]]:
    rows = []
    for name in names:
        path = ROOT / "lectures_lib" / f"{name}.py"
        if path.exists():
            code, checks = measure(path)
            total = len(path.read_text(encoding="utf-8").splitlines())
            rows.append((name, total, code, checks))
    return rows


def main() -> None:
    rows = table()
    print(f"{'module':<12} {'lines':>6} {'code':>6} {'checks':>7} {'share':>6}")
    for name, total, code, checks in rows:
        print(f"{name:<12} {total:>6} {code:>6} {checks:>7} {checks / code:>6.1%}")
    code = sum(r[2] for r in rows)
    checks = sum(r[3] for r in rows)
    print(f"{'total':<12} {sum(r[1] for r in rows):>6} {code:>6} {checks:>7} {checks / code:>6.1%}")


if __name__ == "__main__":
    sys.exit(main())
