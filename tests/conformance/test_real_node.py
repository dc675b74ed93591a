"""The real node: Ready beside kwok's nodes, and a plain pod on it runs a real command whose
real exit code and output come back through the kubelet."""

from __future__ import annotations

from realpods import PODS, TOOLS_REF, logs, real_template, wait_default_service_account

from jobcontroller.runtime.apitypes import NODES
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.realnode import NODE_IP, REAL_NODE_LABEL
from jobcontroller.testing.waiting import wait_for


def _ready(node: dict) -> bool:  # type: ignore[type-arg]
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (node.get("status") or {}).get("conditions") or []
    )


async def test_real_node_is_ready_beside_the_kwok_nodes(kube: KubeApi) -> None:
    nodes, _ = await kube.list(NODES)
    by_name = {n["metadata"]["name"]: n for n in nodes}
    real = by_name["real-node-0"]
    assert _ready(real)
    assert real["metadata"]["labels"][REAL_NODE_LABEL] == "true"
    assert {"key": REAL_NODE_LABEL, "value": "true", "effect": "NoSchedule"} in real["spec"][
        "taints"
    ]
    assert {"type": "InternalIP", "address": NODE_IP} in real["status"]["addresses"]
    assert real["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    kwok = [n for n in nodes if n["metadata"]["name"].startswith("kwok-node-")]
    assert kwok and all(_ready(n) for n in kwok)


async def test_a_plain_pod_runs_a_command_and_exits_with_its_real_code(
    kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    script = (
        'echo "hello from $(hostname)"; '
        "nc -z -w 2 kubernetes.default.svc.cluster.local 443 && echo api-reachable; "
        "exit 3"
    )
    pod = {
        "metadata": {"name": "plain"},
        **real_template("main", ["/bin/sh", "-c", script], image=TOOLS_REF, restartPolicy="Never"),
    }
    await kube.create(PODS, pod, namespace=namespace)
    done = await wait_for(
        kube,
        PODS,
        "plain",
        namespace=namespace,
        until=lambda p: p is not None and (p.get("status") or {}).get("phase") == "Failed",
        timeout=120,
    )
    assert done is not None
    assert done["spec"]["nodeName"] == "real-node-0"
    state = done["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 3
    assert state["reason"] == "Error"
    out = await logs(kube, namespace, "plain")
    # Output of a real process: the pod's hostname, and the kubernetes Service reached through
    # kube-proxy and resolved by CoreDNS.
    assert out.splitlines() == ["hello from plain", "api-reachable"]
