"""A TrainJob with a model initializer run for real: the runtime's ``model-initializer`` step
(a Job of one pod) gets the TrainJob's ``initializer.model.storageUri`` as STORAGE_URI and
fills the shared ``initializer`` volume; the trainer's pods start only once it is Complete
(the JobSet's ``dependsOn``) and two torchrun nodes load that model and all-reduce with it.

The runtime is what v2.3.0's initializer runtimes are (the ancestor-step labels, the
``initializer`` volume mounted at /workspace by the step and the trainer), with a local image
and script for the step (nothing can be downloaded here) and a hostPath on the one real node
standing in for the shared PersistentVolumeClaim.
"""

from __future__ import annotations

import re

from conftest import RealCluster
from realpods import TRAINER_REF, on_real_node, wait_default_service_account
from test_pytorch import scripts_configmap
from test_trainjob import TORCHRUN, Obj, node_env, run_trainjob

from jobcontroller.runtime.kube import KubeApi

ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
URI = "hf://kubeflow-conformance/linear-1x1"


def _step(name: str, ancestor: str, container: Obj, *, namespace: str, scripts: str) -> Obj:
    container = {
        **container,
        "image": TRAINER_REF,
        "imagePullPolicy": "Never",
        "volumeMounts": [
            {"name": "initializer", "mountPath": "/workspace"},
            {"name": "scripts", "mountPath": "/scripts"},
        ],
    }
    pod = {
        "containers": [container],
        "volumes": [
            {
                "name": "initializer",
                "hostPath": {
                    "path": f"/tmp/jobcontroller-initializer-{namespace}",
                    "type": "DirectoryOrCreate",
                },
            },
            {"name": "scripts", "configMap": {"name": scripts}},
        ],
    }
    return {
        "name": name,
        "template": {
            "metadata": {"labels": {ANCESTOR: ancestor}},
            "spec": {"template": {"spec": on_real_node(pod)}},
        },
    }


def runtime_with_model_initializer(*, namespace: str, scripts: str) -> Obj:
    initializer = _step(
        "model-initializer",
        "model-initializer",
        {"name": "model-initializer", "command": ["python3", "/scripts/model_initializer.py"]},
        namespace=namespace,
        scripts=scripts,
    )
    node = _step("node", "trainer", {"name": "node"}, namespace=namespace, scripts=scripts)
    node["dependsOn"] = [{"name": "model-initializer", "status": "Complete"}]
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {
            "name": "torch-with-model",
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {"spec": {"replicatedJobs": [initializer, node]}},
        },
    }


async def test_model_initializer_runs_first_and_the_trainer_uses_its_model(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "model_initializer.py", "torchrun_with_model.py")
    runtime = runtime_with_model_initializer(namespace=namespace, scripts=cm)
    trainer = {"numNodes": 2, "command": [*TORCHRUN, "/scripts/torchrun_with_model.py"]}
    _, by_host, outputs = await run_trainjob(
        kube,
        namespace,
        name="finetune",
        runtime=runtime,
        trainer=trainer,
        initializer={"model": {"storageUri": URI}},
        steps=("model-initializer", "node"),
    )
    [init_pod] = [p for h, p in by_host.items() if "model-initializer" in h]
    [init] = init_pod["spec"]["containers"]
    assert {e["name"]: e.get("value") for e in init["env"]}["STORAGE_URI"] == URI
    init_out = outputs[init_pod["metadata"]["name"]]
    assert f"MODEL_INITIALIZED uri={URI} path=/workspace/model" in init_out, init_out
    # The trainer started after the step finished (dependsOn: Complete).
    init_end = init_pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"]
    nodes = {h: p for h, p in by_host.items() if h.startswith("finetune-node-")}
    assert sorted(nodes) == ["finetune-node-0-0", "finetune-node-0-1"], sorted(by_host)
    for rank, host in enumerate(sorted(nodes)):
        pod = nodes[host]
        started = pod["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]
        assert started >= init_end, (started, init_end)
        assert node_env(pod)["PET_NNODES"] == "2"
        out = outputs[pod["metadata"]["name"]]
        # w=3, b=2 from the initializer's model: 3*(0+1) + 2*2 = 7 on both ranks.
        found = re.findall(rf"MODEL rank={rank} world=2 source=(\S+) w=3 b=2 sum=7 expected=7", out)
        assert found == [URI], out
