"""Fixtures shared by the integration and e2e tiers (the cluster ones come from the
jobcontroller.testing pytest plugin)."""

from __future__ import annotations

from pathlib import Path

import pytest_asyncio

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import install_crds

ROOT = Path(__file__).resolve().parents[1]
CRD_DIR = ROOT / "manifests" / "base" / "crds"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kubeflow_crds(kube: KubeApi) -> list[str]:
    """Every CRD in manifests/base/crds (the kubeflow.org job kinds, the trainer.kubeflow.org
    TrainJob and runtimes), installed and Established."""
    return await install_crds(kube, sorted(CRD_DIR.glob("*.yaml")))
