"""TFJob with real TensorFlow: two workers form a MultiWorkerMirroredStrategy cluster from the
TF_CONFIG the operator injects (parsed by TensorFlow's own TFConfigClusterResolver), all-reduce,
and train a model whose loss falls, with identical weights on both."""

from __future__ import annotations

import json
import re

from conftest import RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import condition, finished, scripts_configmap

from jobcontroller.runtime.apitypes import Resource
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.images import TENSORFLOW_REF
from jobcontroller.testing.waiting import wait_for

TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")


async def test_multi_worker_mirrored_strategy_from_tf_config(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "tf_mwms.py")
    template = real_template(
        "tensorflow", ["python3", "/scripts/tf_mwms.py"], image=TENSORFLOW_REF, scripts=cm
    )
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mwms"},
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}
            }
        },
    }
    await kube.create(TFJOBS, job, namespace=namespace)
    done = await wait_for(kube, TFJOBS, "mwms", namespace=namespace, until=finished, timeout=600)
    assert done is not None
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=namespace))[0]}
    outputs = {name: await logs(kube, namespace, name, "tensorflow") for name in sorted(pods)}
    assert condition(done, "Succeeded") is not None, (done["status"], outputs)
    assert set(pods) == {"mwms-worker-0", "mwms-worker-1"}
    expected_cluster = {
        "worker": [f"mwms-worker-{i}.{namespace}.svc:2222" for i in (0, 1)],
    }
    weights = set()
    for i in (0, 1):
        out = outputs[f"mwms-worker-{i}"]
        seen = re.search(r"TF-CONFIG task=worker:(\d) cluster=(.*)", out)
        assert seen and int(seen.group(1)) == i, out
        assert json.loads(seen.group(2)) == expected_cluster
        assert f"TF-ALLREDUCE task=worker:{i} replicas=2 sum=3" in out, out
        trained = re.search(
            r"TF-TRAINED task=worker:\d first_loss=([\d.]+) final_loss=([\d.]+) "
            r"w=([-\d.]+) b=([-\d.]+)",
            out,
        )
        assert trained, out
        first, final, w, b = map(float, trained.groups())
        assert final < first / 100, out
        assert abs(w - 3) < 0.1 and abs(b - 2) < 0.1, out
        weights.add((w, b))
    assert len(weights) == 1  # the variables stayed mirrored
