"""A cluster of its own for each chaos module, with the API server's audit log on."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

sys.path.insert(0, str(Path(__file__).parent))

from harness import AuditedPlane

from jobcontroller.runtime.kube import NAMESPACES, KubeApi
from jobcontroller.testing.operator import install_crds

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "base" / "crds"


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuditedPlane]:
    plane = AuditedPlane(tmp_path_factory.mktemp("chaos"))
    plane.plane.start()
    try:
        yield plane
    finally:
        plane.plane.stop()


@pytest_asyncio.fixture(loop_scope="session")
async def chaos_kube(audited: AuditedPlane) -> AsyncIterator[KubeApi]:
    api = await KubeApi.from_config(kubeconfig=str(audited.plane.kubeconfig), qps=200.0, burst=400)
    try:
        await install_crds(api, sorted(CRDS.glob("*.yaml")))
        yield api
    finally:
        await api.close()


@pytest_asyncio.fixture(loop_scope="session")
async def chaos_namespace(chaos_kube: KubeApi) -> str:
    name = f"chaos-{uuid.uuid4().hex[:6]}"
    await chaos_kube.create(NAMESPACES, {"metadata": {"name": name}})
    return name
