"""Real pods: the conformance suite's cluster has a real node (kubelet + containerd) beside
kwok's, the images of ``jobcontroller.testing.images`` imported, and the default install (the
all-in-one training-operator, serving every kind) running on it as a Deployment from
``manifests/overlays/local-real-node``.

The API server keeps an audit log, from which the suite counts the operators' forbidden calls.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

sys.path.insert(0, str(Path(__file__).parent))

from jobcontroller.runtime.kube import NAMESPACES, ApiError, KubeApi
from jobcontroller.testing.__main__ import node_images
from jobcontroller.testing.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]
OVERLAY = ROOT / "manifests" / "overlays" / "local-real-node"
TRAINER_CRDS = [
    f"crd/{plural}.trainer.kubeflow.org"
    for plural in ("trainjobs", "trainingruntimes", "clustertrainingruntimes")
]
#: The operator Deployments the overlay deploys: the default install's one, every kind in one
#: process. (The per-framework Deployments are run as deployed by
#: tests/e2e/test_operators_as_deployed.py.)
OPERATORS = ("training-operator",)
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {"level": "Metadata", "userGroups": ["system:serviceaccounts:kubeflow"]},
        {"level": "None"},
    ],
}


class RealCluster:
    def __init__(self, workdir: Path) -> None:
        policy = workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        self.audit_log = workdir / "audit.log"
        started = time.monotonic()
        images = node_images()
        self.images_seconds = time.monotonic() - started
        self.plane = ControlPlane(
            controller_manager=True,
            scheduler=True,
            kwok=True,
            nodes=2,
            workdir=workdir / "cluster",
            real_node=True,
            node_images=images,
            extra_apiserver_args=[
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=blocking",
                "--audit-log-maxsize=0",
            ],
        )

    def kubectl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        assert self.plane.binaries is not None
        return subprocess.run(
            [self.plane.binaries["kubectl"], f"--kubeconfig={self.plane.kubeconfig}", *args],
            check=check,
            capture_output=True,
            text=True,
        )

    def audited_calls(self) -> int:
        """How many calls of the operators' ServiceAccounts the audit log holds."""
        return sum(
            1 for line in self.audit_log.read_text().splitlines() if '"ResponseComplete"' in line
        )

    def forbidden_calls(self) -> list[str]:
        """Each 403 answered to one of the operators' ServiceAccounts."""
        found = []
        for line in self.audit_log.read_text().splitlines():
            entry = json.loads(line)
            code = (entry.get("responseStatus") or {}).get("code")
            if code == 403 and entry.get("stage") == "ResponseComplete":
                found.append(f"{entry['user']['username']} {entry['verb']} {entry['requestURI']}")
        return found


@pytest.fixture(scope="session")
def real_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealCluster]:
    cluster = RealCluster(tmp_path_factory.mktemp("conformance"))
    started = time.monotonic()
    cluster.plane.start()
    print(
        f"\nconformance cluster: images {cluster.images_seconds:.0f}s, "
        f"cluster with a real node {time.monotonic() - started:.0f}s"
    )
    try:
        yield cluster
    finally:
        cluster.plane.stop()


@pytest.fixture(scope="session")
def control_plane(real_cluster: RealCluster) -> ControlPlane:
    """The plugin's fixtures (kubeconfig, kube, namespace) use the real-node cluster here."""
    return real_cluster.plane


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def operators(real_cluster: RealCluster, kube: KubeApi) -> RealCluster:
    """The operator(s), deployed from the overlay and Available (their probes passing)."""
    # As the README installs: the first apply creates the CRDs; the install's
    # ClusterTrainingRuntimes are taken by a second one, once their CRD is established.
    real_cluster.kubectl("apply", "--server-side", "-k", str(OVERLAY), check=False)
    real_cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *TRAINER_CRDS)
    real_cluster.kubectl("apply", "--server-side", "-k", str(OVERLAY))
    for name in OPERATORS:
        result = await asyncio.to_thread(
            real_cluster.kubectl,
            "-n",
            "kubeflow",
            "rollout",
            "status",
            f"deployment/{name}",
            "--timeout=240s",
            check=False,
        )
        if result.returncode != 0:
            pods = real_cluster.kubectl("-n", "kubeflow", "get", "pods", "-o", "wide").stdout
            logs = real_cluster.kubectl(
                "-n", "kubeflow", "logs", f"deployment/{name}", "--tail=30", check=False
            )
            pytest.fail(
                f"{name} not rolled out: {result.stderr}\n{pods}\n{logs.stdout}{logs.stderr}"
            )
    return real_cluster


@pytest_asyncio.fixture(loop_scope="session")
async def real_namespace(kube: KubeApi) -> AsyncIterator[str]:
    name = f"real-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name}})
    yield name


JOBSET_OVERLAY = ROOT / "manifests" / "overlays" / "local-real-node-jobset"


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def jobset(real_cluster: RealCluster, kube: KubeApi) -> RealCluster:
    """The JobSet controller as a real cluster runs it: manifests/jobset's Deployment (leader
    election, certificates it makes itself, webhooks called through its Service) on the real
    node, Available and admitting JobSets. It stands in for the plugin's fixture of the same
    name (the controller as a process), so one JobSet controller serves the session."""
    started = time.monotonic()
    real_cluster.kubectl("apply", "--server-side", "-k", str(JOBSET_OVERLAY))
    result = await asyncio.to_thread(
        real_cluster.kubectl,
        "-n",
        "jobset-system",
        "rollout",
        "status",
        "deployment/jobset-controller-manager",
        "--timeout=240s",
        check=False,
    )
    if result.returncode != 0:
        pods = real_cluster.kubectl("-n", "jobset-system", "get", "pods", "-o", "wide").stdout
        logs = real_cluster.kubectl(
            "-n", "jobset-system", "logs", "deployment/jobset-controller-manager", check=False
        )
        pytest.fail(f"JobSet not rolled out: {result.stderr}\n{pods}\n{logs.stdout[-3000:]}")
    # Ready means its webhook server listens; the API server must also reach it through the
    # Service with the CA the controller injected: a dry-run JobSet passes both webhooks.
    probe = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"replicatedJobs": []},
    }
    path = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
    deadline = time.monotonic() + 120
    while True:
        try:
            await kube.request("POST", path, query={"dryRun": "All"}, body=probe)
            break
        except ApiError as exc:
            if time.monotonic() > deadline:
                pytest.fail(f"JobSet's webhooks not reachable through its Service: {exc}")
        await asyncio.sleep(0.5)
    print(f"\nJobSet deployed from {JOBSET_OVERLAY.name}: {time.monotonic() - started:.0f}s")
    return real_cluster
