"""The design's import rules, checked on the source: core imports only api; runtime and api
never import a framework or the layers above them; framework packages import only what
jobcontroller exports on purpose (its __init__, jobcontroller.api, jobcontroller.testing)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGES = Path(__file__).resolve().parents[2] / "packages"
COMMON = PACKAGES / "common" / "src" / "jobcontroller"
FRAMEWORKS = (
    "tf_operator",
    "pytorch_operator",
    "mpi_operator",
    "xgboost_operator",
    "paddle_operator",
    "jax_operator",
    "trainer_operator",
)


def imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def ours(modules: set[str]) -> set[str]:
    prefixes = ("jobcontroller", *FRAMEWORKS)
    return {m for m in modules if m.split(".")[0] in prefixes}


@pytest.mark.parametrize("layer", ["core", "api"])
def test_pure_layers_import_only_what_is_below_them(layer: str) -> None:
    allowed = {"core": ("jobcontroller.api", "jobcontroller.core"), "api": ("jobcontroller.api",)}
    for path in (COMMON / layer).rglob("*.py"):
        bad = {m for m in ours(imports(path)) if not m.startswith(allowed[layer])}
        assert not bad, f"{path.relative_to(PACKAGES)} imports {sorted(bad)}"


def test_runtime_knows_no_job_logic_and_no_framework() -> None:
    for path in (COMMON / "runtime").rglob("*.py"):
        bad = {m for m in ours(imports(path)) if not m.startswith("jobcontroller.runtime")}
        assert not bad, f"{path.relative_to(PACKAGES)} imports {sorted(bad)}"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_frameworks_use_only_the_public_surface(framework: str) -> None:
    public = ("jobcontroller.api", "jobcontroller.testing")
    for path in (PACKAGES / framework / "src" / framework).rglob("*.py"):
        for module in ours(imports(path)):
            if module.split(".")[0] == framework:
                continue
            assert module == "jobcontroller" or module.startswith(public), (
                f"{path.relative_to(PACKAGES)} imports {module}"
            )
