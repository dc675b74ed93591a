"""A 100,000-worker TFJob fails before any pod is created, because its pods would be too large
(issue 30's must-show).

Every pod of a distributed TFJob carries a TF_CONFIG naming every replica: about 48 bytes per
worker (more with a long namespace), so 100,000 workers make each pod 5 MB or more, over three
times what the API server stores (etcd's 1.5 MiB). With the pod ceiling raised far past it, the
job is still failed at its first reconcile, with the estimated size, the limit and the excess
in its condition and a Warning event, and no pod or Service is ever created. The time from
creation to Failed is printed.
"""

from __future__ import annotations

import asyncio
import time

from tfjobs import TFJOBS, condition, events, pods, replica, services, tfjob, wait_event, wait_job

from jobcontroller.core import PlanConfig
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from tf_operator.controller import TFJobController

WORKERS = 100_000


async def test_a_100000_worker_tfjob_fails_for_its_pod_size_before_any_pod_exists(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    controller = TFJobController(config=PlanConfig(max_pods_per_job=1_000_000))
    async with running(kubeconfig, controller, namespace=ns):
        started = time.monotonic()
        await kube.create(TFJOBS, tfjob("huge", {"Worker": replica(WORKERS)}), namespace=ns)
        done = await wait_job(kube, ns, "huge", "Failed", timeout=30)
        seconds = time.monotonic() - started
        failed = condition(done, "Failed")
        assert failed is not None
        assert failed["reason"] == "TFJobFailedValidation"
        message = failed["message"]
        assert "its Worker pods would be about " in message
        assert "over the 1,572,864-byte limit" in message
        assert "cluster env lists every replica" in message
        # Events are sent in the background, after the status: wait for it, then make sure
        # it is the only one.
        await wait_event(kube, ns, "TFJobFailedValidation")
        await asyncio.sleep(2)  # anything still on its way would be here by now
        warnings = await events(kube, ns, reason="TFJobFailedValidation")
        assert [e["type"] for e in warnings] == ["Warning"]
        assert await pods(kube, ns) == {}
        assert await services(kube, ns) == {}
        print(f"\n100,000-worker TFJob: Failed {seconds:.2f} s after its creation: {message}")
