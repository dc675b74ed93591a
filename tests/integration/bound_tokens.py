"""A service-account token bound to a pod, as the kubelet's projected volume holds it: what a
reporting pod sends to the training-progress endpoint (TrainJob and v1 kinds alike)."""

from __future__ import annotations

from typing import Any

from jobcontroller import KubeApi

#: The ServiceAccount the progress tests' pods run as.
SA = "trainer"


async def bound_token(kube: KubeApi, namespace: str, pod: dict[str, Any], audience: str) -> str:
    meta = pod["metadata"]
    review = await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{SA}/token",
        body={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "audiences": [audience],
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": meta["name"],
                    "uid": meta["uid"],
                },
            },
        },
    )
    return str(review["status"]["token"])
