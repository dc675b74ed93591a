"""A minimal copy of Volcano's PodGroup CRD, for tests of gang scheduling.

Volcano's scheduler is not here: tests play its part by setting a group's phase (Inqueue,
Running) and by binding pods to nodes themselves.
"""

from __future__ import annotations

import contextlib
from typing import Any

from jobcontroller.operator import pod_group_crd_installed
from jobcontroller.runtime.kube import CRDS, ApiError, KubeApi, Resource
from jobcontroller.testing.waiting import wait_for

__all__ = ["POD_GROUPS", "VOLCANO_CRD", "install_volcano_crd"]

POD_GROUPS = Resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")

VOLCANO_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.volcano.sh"},
    "spec": {
        "group": "scheduling.volcano.sh",
        "names": {"kind": "PodGroup", "plural": "podgroups", "singular": "podgroup"},
        "scope": "Namespaced",
        "versions": [
            {
                "name": "v1beta1",
                "served": True,
                "storage": True,
                "subresources": {"status": {}},
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "x-kubernetes-preserve-unknown-fields": True,
                    }
                },
            }
        ],
    },
}


async def install_volcano_crd(kube: KubeApi) -> None:
    """Create the CRD unless it is there, and wait until it is served."""
    if not await pod_group_crd_installed(kube, "volcano"):
        with contextlib.suppress(ApiError):  # another test may have just created it
            await kube.create(CRDS, VOLCANO_CRD)
    await wait_for(
        kube,
        CRDS,
        "podgroups.scheduling.volcano.sh",
        until=lambda o: (
            o is not None
            and any(
                c.get("type") == "Established" and c.get("status") == "True"
                for c in ((o.get("status") or {}).get("conditions") or [])
            )
        ),
    )
