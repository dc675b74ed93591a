"""The default install's operator (the all-in-one training-operator, which ran every job of the
suite, of every kind) ran as a Deployment on the real node, from the manifests, under its own
ServiceAccount: two Ready replicas (probes passing, never restarted), one holding its Lease, and
not one call the API server refused it for want of a permission.

Named to run last: the audit log then holds every call of the jobs the suite ran before.
"""

from __future__ import annotations

from conftest import OPERATORS, RealCluster
from realpods import PODS

from jobcontroller.runtime.apitypes import LEASES
from jobcontroller.runtime.kube import KubeApi


async def test_operators_ran_as_deployments_with_no_forbidden_call(
    operators: RealCluster, kube: KubeApi
) -> None:
    pods, _ = await kube.list(PODS, namespace="kubeflow")
    by_app: dict[str, list[dict]] = {}  # type: ignore[type-arg]
    for pod in pods:
        by_app.setdefault(pod["metadata"]["labels"]["app.kubernetes.io/name"], []).append(pod)
    assert sorted(by_app) == sorted(OPERATORS)
    for name, replicas in by_app.items():
        assert len(replicas) == 2, name
        for pod in replicas:
            assert pod["spec"]["nodeName"] == "real-node-0"
            assert pod["spec"]["serviceAccountName"] == name
            status = pod["status"]["containerStatuses"][0]
            # Readiness (/readyz) passing, liveness (/healthz) never failed.
            assert status["ready"] is True, (name, status)
            assert status["restartCount"] == 0, (name, status)
    leases, _ = await kube.list(LEASES, namespace="kubeflow")
    holders = {lease["metadata"]["name"]: lease["spec"].get("holderIdentity") for lease in leases}
    pod_names = {p["metadata"]["name"] for p in pods}
    held = [h for h in holders.values() if h and h.split("_")[0] in pod_names]
    assert len(held) == len(OPERATORS), holders
    assert operators.forbidden_calls() == []
    # The audit log did see them: the check above is not vacuous.
    assert operators.audited_calls() > 100
