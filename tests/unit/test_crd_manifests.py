"""The committed CRD manifests are exactly what hack/gen-crds.py generates from the models."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from jobcontroller.testing import yamlfast

ROOT = Path(__file__).parents[2]


def _gen_crds() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_crds", ROOT / "hack" / "gen-crds.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_crds", module)
    spec.loader.exec_module(module)
    return module


GEN = _gen_crds()
#: Rendered once: each rendering builds every kind's schema (seconds).
RENDERED = GEN.rendered()


@pytest.mark.parametrize("path", sorted(RENDERED), ids=lambda p: p.name)
def test_committed_manifest_matches_the_models(path: Path) -> None:
    assert path.exists(), f"{path} missing: run `uv run python hack/gen-crds.py`"
    assert path.read_text() == RENDERED[path], (
        f"{path.name} is stale: run `uv run python hack/gen-crds.py`"
    )


def test_manifests_are_the_six_kubeflow_crds_and_the_three_trainer_ones() -> None:
    names = sorted(p.name for p in RENDERED)
    assert names == [
        "kubeflow.org_jaxjobs.yaml",
        "kubeflow.org_mpijobs.yaml",
        "kubeflow.org_paddlejobs.yaml",
        "kubeflow.org_pytorchjobs.yaml",
        "kubeflow.org_tfjobs.yaml",
        "kubeflow.org_xgboostjobs.yaml",
        "trainer.kubeflow.org_clustertrainingruntimes.yaml",
        "trainer.kubeflow.org_trainingruntimes.yaml",
        "trainer.kubeflow.org_trainjobs.yaml",
    ]
    for path in RENDERED:
        docs = yamlfast.load_all(path.read_text())
        assert [d["kind"] for d in docs] == ["CustomResourceDefinition"]


def test_check_mode_fails_on_drift_and_write_mode_repairs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(GEN, "CRD_DIR", tmp_path)
    # What rendered() gives is checked above; here main()'s check and write modes, on the same
    # texts re-rooted in tmp_path (rendering again costs seconds per call).
    moved = {tmp_path / path.name: text for path, text in RENDERED.items()}
    monkeypatch.setattr(GEN, "rendered", lambda: moved)
    assert GEN.main(["--check"]) == 1
    assert "out of date" in capsys.readouterr().out
    assert GEN.main([]) == 0
    assert GEN.main(["--check"]) == 0
    stale = tmp_path / "kubeflow.org_tfjobs.yaml"
    stale.write_text(stale.read_text().replace("maxItems: 64", "maxItems: 65"))
    assert GEN.main(["--check"]) == 1
    assert "maxItems: 65" in capsys.readouterr().out
