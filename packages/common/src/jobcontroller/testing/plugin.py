"""pytest plugin: a real local cluster for the whole session, an API client, a namespace per test.

Registered through the ``pytest11`` entry point of the ``jobcontroller`` distribution, so any
project that installs the library gets the fixtures:

- ``control_plane``: the session's :class:`ControlPlane` (etcd, kube-apiserver,
  kube-controller-manager, kube-scheduler, kwok with four fake nodes). Started on first use only,
  so unit-test runs never start it. Tests that restart or compact it start their own instead.
  With ``pytest --real-node`` (or ``JOBCONTROLLER_REAL_NODE=1``) it also has one real node
  (``testing/realnode.py``) with every image of ``testing/images.py`` imported; needs root and
  ``hack/build-node.sh``'s binaries.
- ``kubeconfig``: the path of its admin kubeconfig.
- ``kube``: a session-wide :class:`jobcontroller.runtime.kube.KubeApi`.
- ``k8s_client``: a session-wide ``kubernetes_asyncio`` ``ApiClient``, for tests of that library.
- ``namespace``: a fresh namespace for one test, deleted afterwards (without waiting).
- ``kueue``: Kueue's manager (``testing/kueue.py``, built by ``hack/build-kueue.sh``) running
  against the session's cluster, started on first use. Its kubeflow.org webhooks act only in
  namespaces labelled ``jobcontroller.testing/kueue`` (``Kueue.queue(namespace, ...)`` sets
  it), so the session's other tests never go through them. Install the job CRDs first: Kueue
  sets up an integration whose CRD is missing only after a backoff (up to two minutes).
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import pytest
import pytest_asyncio

from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.jobset import JobSetController
from jobcontroller.testing.kueue import Kueue

if TYPE_CHECKING:
    from jobcontroller.runtime.kube import KubeApi


KUEUE_NAMESPACE_LABEL = "jobcontroller.testing/kueue"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-node",
        action="store_true",
        help="give the session's cluster a real node (kubelet, containerd) beside kwok's",
    )


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    real = bool(request.config.getoption("--real-node")) or (
        os.environ.get("JOBCONTROLLER_REAL_NODE") == "1"
    )
    images: list[Any] = []
    if real:
        from jobcontroller.testing.__main__ import node_images

        images = node_images()
    cp = ControlPlane(
        controller_manager=True,
        scheduler=True,
        kwok=True,
        nodes=4,
        real_node=real,
        node_images=images,
    )
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def kueue(control_plane: ControlPlane) -> Iterator[Kueue]:
    kq = Kueue(control_plane, namespace_label=KUEUE_NAMESPACE_LABEL)
    kq.start()
    try:
        yield kq
    finally:
        kq.stop()


@pytest.fixture(scope="session")
def jobset(control_plane: ControlPlane) -> Iterator[JobSetController]:
    controller = JobSetController(control_plane)
    controller.start()
    try:
        yield controller
    finally:
        controller.stop()


@pytest.fixture(scope="session")
def kubeconfig(control_plane: ControlPlane) -> str:
    return str(control_plane.kubeconfig)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kube(kubeconfig: str) -> AsyncIterator[KubeApi]:
    from jobcontroller.runtime.kube import KubeApi

    api = await KubeApi.from_config(kubeconfig=kubeconfig, qps=500.0, burst=1000)
    try:
        yield api
    finally:
        await api.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def k8s_client(kubeconfig: str) -> AsyncIterator[Any]:
    from kubernetes_asyncio import client, config

    configuration = client.Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with client.ApiClient(configuration) as api_client:
        yield api_client


def _namespace_name(node_name: str) -> str:
    stem = re.sub(r"[^a-z0-9-]+", "-", node_name.lower()).strip("-")[:40].strip("-")
    return f"{stem or 't'}-{uuid.uuid4().hex[:6]}"


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(kube: KubeApi, request: pytest.FixtureRequest) -> AsyncIterator[str]:
    from jobcontroller.runtime.kube import NAMESPACES

    name = _namespace_name(request.node.name.removeprefix("test_"))
    await kube.create(NAMESPACES, {"metadata": {"name": name, "labels": {"e2e": "true"}}})
    try:
        yield name
    finally:
        if not os.environ.get("JOBCONTROLLER_KEEP_NAMESPACES"):
            await kube.delete(NAMESPACES, name)
