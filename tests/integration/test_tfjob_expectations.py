"""A lost expectation never stalls a job (kubeflow #1306).

The controller waits for the informer to show its own writes before planning a job again. If
an event it expects never comes (a watch gap, an object deleted and re-created in between),
the record expires and the job moves on; the anchor's jobs sat without pods for five minutes.
"""

from __future__ import annotations

from tfjobs import TFJOBS, replica, tfjob, wait_job, wait_pods

from jobcontroller.runtime.expectations import Expectations
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.operator import running
from tf_operator.controller import TFJobController


async def test_a_job_gets_its_pods_although_an_expected_creation_is_never_seen(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> None:
    ns = namespace
    controller = TFJobController(expectations=Expectations(timeout=2))
    async with running(kubeconfig, controller):
        # As if an earlier pass had created a pod whose event was lost.
        controller.expectations.expect_creations(f"{ns}/lost/Pod", 1)
        await kube.create(TFJOBS, tfjob("lost", {"Worker": replica(2)}), namespace=ns)
        await wait_pods(kube, ns, {"lost-worker-0", "lost-worker-1"}, phase="Running", timeout=20)
        await wait_job(kube, ns, "lost", "Running")
        assert controller.expectations.statistics().expired_total >= 1
