"""Print each framework package's logic lines: the source lines of statements inside function
bodies (signatures, docstrings, imports, module- and class-level declarations, blank and
comment-only lines excluded), so declarations and prose never count as logic.

    python hack/logic_lines.py [packages-dir]
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def logic_lines(source: str) -> int:
    tree = ast.parse(source)
    lines: set[int] = set()
    text = source.splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        for stmt in body:
            for inner in ast.walk(stmt):
                is_doc = (
                    isinstance(inner, ast.Expr)
                    and isinstance(inner.value, ast.Constant)
                    and isinstance(inner.value.value, str)
                )
                if isinstance(inner, ast.stmt) and not is_doc:
                    end = inner.end_lineno or inner.lineno
                    lines.update(range(inner.lineno, end + 1))
    return sum(1 for n in lines if text[n - 1].strip() and not text[n - 1].strip().startswith("#"))


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "packages")
    for package in sorted(root.glob("*_operator/src/*_operator")):
        if package.name == "training_operator":
            continue
        total = sum(logic_lines(p.read_text()) for p in package.rglob("*.py"))
        print(f"{package.name:18} {total}")


if __name__ == "__main__":
    main()
