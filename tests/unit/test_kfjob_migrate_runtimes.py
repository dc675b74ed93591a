"""kfjob carries the shipped runtimes (for ``migrate``): they stay what manifests/runtimes
installs, the image tags its kustomization sets included."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kfjob.migrate.runtimes import FILES, shipped_runtime

ROOT = Path(__file__).resolve().parents[2]
RUNTIMES = ROOT / "manifests" / "runtimes"


def _installed(file: str) -> dict[str, object]:
    [doc] = [d for d in yaml.safe_load_all((RUNTIMES / file).read_text()) if d]
    kustomization = yaml.safe_load((RUNTIMES / "kustomization.yaml").read_text())
    tags = {i["name"]: i["newTag"] for i in kustomization.get("images") or ()}
    for rjob in doc["spec"]["template"]["spec"]["replicatedJobs"]:
        for c in rjob["template"]["spec"]["template"]["spec"]["containers"]:
            if c["image"] in tags:
                c["image"] = f"{c['image']}:{tags[c['image']]}"
    return dict(doc)


def test_every_installed_node_set_runtime_is_carried() -> None:
    """Each installed runtime a PyTorchJob, JAXJob or XGBoostJob can land on (the MPI ones,
    deepspeed and mlx, are never migrated onto: an MPIJob gets a runtime of its own)."""
    listed = yaml.safe_load((RUNTIMES / "kustomization.yaml").read_text())["resources"]
    mpi = {"deepspeed_distributed.yaml", "mlx_distributed.yaml"}
    assert sorted(FILES.values()) == sorted(set(listed) - mpi)


@pytest.mark.parametrize("name", sorted(FILES))
def test_carried_runtime_equals_the_installed_one(name: str) -> None:
    assert shipped_runtime(name) == _installed(FILES[name])
