"""JAXJob (v1) with real JAX: 3 Workers join the coordinator at COORDINATOR_ADDRESS and
COORDINATOR_PORT (worker 0, the env the operator injects), sum over a mesh spanning the three
processes and fit a line together (JAX's CPU wheels, whose cross-process collectives are
gloo's)."""

from __future__ import annotations

import re

from conftest import RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import condition, finished, scripts_configmap

from jobcontroller.runtime.apitypes import Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.images import JAX_REF
from jobcontroller.testing.waiting import wait_for

JAXJOBS = Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs")


async def test_three_workers_sum_and_fit_on_a_global_mesh(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "jax_distributed.py")
    template = real_template(
        "jax", ["python3", "/scripts/jax_distributed.py"], image=JAX_REF, scripts=cm
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "JAXJob",
        "metadata": {"name": "jax"},
        "spec": {
            "jaxReplicaSpecs": {
                "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template}
            }
        },
    }
    await kube.create(JAXJOBS, job, namespace=namespace)
    done = await wait_for(kube, JAXJOBS, "jax", namespace=namespace, until=finished, timeout=600)
    assert done is not None
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    outputs = {name: await logs(kube, namespace, name, "jax") for name in sorted(pods)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    for name, out in outputs.items():
        print(f"--- {name}\n{out}")

    assert set(pods) == {f"jax-worker-{i}" for i in range(3)}
    weights = set()
    for i in range(3):
        out = outputs[f"jax-worker-{i}"]
        assert f"ALLREDUCE process={i} processes=3 devices=3 sum=3 expected=3" in out, out
        trained = re.search(
            r"TRAINED process=\d first_loss=([\d.]+) final_loss=([\d.]+) "
            r"w=([-\d.]+) b=([-\d.]+)",
            out,
        )
        assert trained, out
        first, final, w, b = map(float, trained.groups())
        assert final < first / 100, out
        assert abs(w - 3) < 0.1 and abs(b - 2) < 0.1, out
        weights.add((w, b))
    assert len(weights) == 1, weights
