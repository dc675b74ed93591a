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
