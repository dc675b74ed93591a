"""The layering docs/architecture.md states, checked on the source: what each part imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMMON = ROOT / "packages" / "common" / "src" / "jobcontroller"
FRAMEWORKS = [
    ROOT / "packages" / name / "src" / name
    for name in (
        "tf_operator",
        "pytorch_operator",
        "mpi_operator",
        "xgboost_operator",
        "paddle_operator",
        "jax_operator",
        "trainer_operator",
        "training_operator",
    )
]
PUBLIC = {
    "jobcontroller",
    "jobcontroller.api",
    "jobcontroller.api.crd",
    "jobcontroller.api.validation",
}


def _imports(package: Path) -> dict[str, set[str]]:
    """Module path -> the jobcontroller / framework modules it imports."""
    found: dict[str, set[str]] = {}
    for file in sorted(package.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(file.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
            elif isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
        found[str(file.relative_to(ROOT))] = {
            n for n in names if n.split(".")[0] in ("jobcontroller", *(p.name for p in FRAMEWORKS))
        }
    return found


@pytest.mark.parametrize("package", FRAMEWORKS, ids=lambda p: p.name)
def test_frameworks_import_only_the_public_surface(package: Path) -> None:
    wrong = {
        f: sorted(n for n in names if n.startswith("jobcontroller") and n not in PUBLIC)
        for f, names in _imports(package).items()
    }
    assert not {f: n for f, n in wrong.items() if n}


def test_core_imports_only_api_and_itself() -> None:
    wrong = {
        f: sorted(n for n in names if not n.startswith(("jobcontroller.api", "jobcontroller.core")))
        for f, names in _imports(COMMON / "core").items()
    }
    assert not {f: n for f, n in wrong.items() if n}


def test_runtime_imports_no_core_controller_or_framework() -> None:
    bad = ("jobcontroller.core", "jobcontroller.controller", "tf_operator", "pytorch_operator")
    wrong = {
        f: sorted(n for n in names if n.startswith((*bad, "mpi_operator")))
        for f, names in _imports(COMMON / "runtime").items()
    }
    assert not {f: n for f, n in wrong.items() if n}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _module_level(body: list[ast.stmt]) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs when it is imported: its top level, inside ``if`` and ``try``
    blocks too, but not under ``if TYPE_CHECKING:`` nor inside functions and classes."""
    found: list[ast.Import | ast.ImportFrom] = []
    for node in body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                found += _module_level(node.body)
            found += _module_level(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                found += _module_level(block)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package tree it imports at import time."""
    base = root.parent
    modules = {
        ".".join(f.relative_to(base).with_suffix("").parts).removesuffix(".__init__"): f
        for f in root.rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, file in modules.items():
        package = name if file.name == "__init__.py" else name.rpartition(".")[0]
        edges: set[str] = set()
        for node in _module_level(ast.parse(file.read_text()).body):
            if isinstance(node, ast.Import):
                edges.update(a.name for a in node.names if a.name in modules)
                continue
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*parts, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                edges.add(sub if sub in modules else target)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(graph.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_inside_jobcontroller() -> None:
    graph = import_graph(COMMON)
    assert "jobcontroller.controller.base" in graph  # the graph covers the package
    assert graph["jobcontroller.controller.base"] >= {"jobcontroller.core.planner"}
    assert cycles(graph) == []


def test_no_import_cycles_inside_trainer_operator() -> None:
    root = ROOT / "packages" / "trainer_operator" / "src" / "trainer_operator"
    graph = import_graph(root)
    assert graph["trainer_operator.crd"] >= {"trainer_operator.api", "trainer_operator.runtime"}
    assert cycles(graph) == []
