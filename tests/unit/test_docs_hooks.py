"""The docs say what the code does: the tutorial's hook table names exactly the hooks a
framework can override, every ``jobcontroller.X`` the docs name exists, and the architecture's
table of shared helpers says truly which operators use each."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

from jobcontroller.controller.hooks import ControllerHooks, RuntimeHooks
from jobcontroller.core.types import FrameworkOf

ROOT = Path(__file__).resolve().parents[2]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FRAMEWORKS = ("tf", "pytorch", "mpi", "xgboost", "paddle", "jax")

_ROW = re.compile(r"^\| `(\w+)` \|(.*)\|\s*$", re.MULTILINE)
_NAME = re.compile(r"`(jobcontroller(?:\.\w+)+)`")


def _table(text: str, header: str) -> dict[str, list[str]]:
    """The rows of the markdown table whose header row starts with ``| <header> |``."""
    start = text.index(f"| {header} |")
    end = text.find("\n\n", start)
    block = text[start : end if end != -1 else len(text)]
    return {m[1]: [c.strip() for c in m[2].split("|")] for m in _ROW.finditer(block)}


def _hooks(cls: type) -> set[str]:
    return {
        name
        for name, member in vars(cls).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_the_tutorials_hook_table_names_exactly_the_hooks() -> None:
    table = _table((ROOT / "docs" / "writing-an-operator.md").read_text(), "hook")
    assert set(table) == _hooks(FrameworkOf) | _hooks(ControllerHooks) | _hooks(RuntimeHooks)


def test_every_jobcontroller_name_in_the_docs_exists() -> None:
    missing: list[str] = []
    for doc in DOCS:
        for dotted in sorted(set(_NAME.findall(doc.read_text()))):
            parts = dotted.split(".")
            obj: object = None
            for i in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:i]))
                except ImportError:
                    continue
                for attr in parts[i:]:
                    obj = getattr(obj, attr, None)
                break
            if obj is None:
                missing.append(f"{doc.name}: {dotted}")
    assert missing == []


def test_the_shared_helpers_table_says_which_operators_use_each() -> None:
    table = _table((ROOT / "docs" / "architecture.md").read_text(), "helper")
    assert table, "architecture.md has no table of shared helpers"
    import jobcontroller
    import jobcontroller.api

    sources = {
        f: "\n".join(
            path.read_text() for path in (ROOT / "packages" / f"{f}_operator" / "src").rglob("*.py")
        )
        for f in FRAMEWORKS
    }
    for helper, (_, used_by) in table.items():
        assert hasattr(jobcontroller, helper) or hasattr(jobcontroller.api, helper), helper
        claimed = {f for f in FRAMEWORKS if re.search(rf"\b{f}\b", used_by)}
        actual = {f for f, text in sources.items() if re.search(rf"\b{helper}\b", text)}
        assert claimed == actual, helper
