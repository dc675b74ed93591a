"""Kubeflow Trainer v2's TrainJob run for real: the training-operator (deployed from the
overlay) turns a TrainJob into a JobSet, the real JobSet controller (deployed from its overlay)
makes the Jobs and pods on the real node, and the frameworks form their groups from the env the
operator wrote: ``torchrun`` from ``PET_*`` (2 nodes x 2 processes, gloo), XGBoost's Rabit from
``DMLC_*``, JAX's distributed runtime from ``JAX_*``.

Each runtime is one of upstream's ClusterTrainingRuntimes (manifests/runtimes) as a
TrainingRuntime of the test's namespace with a local image (nothing can be pulled here), the
scripts ConfigMap mounted and the real node's selector and toleration: what a platform team
does to adapt a shipped runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, RUNTIMES, RealCluster
from realpods import PODS, TRAINER_REF, logs, on_real_node, wait_default_service_account
from test_pytorch import scripts_configmap

from jobcontroller.runtime.apitypes import EVENTS, Resource
from jobcontroller.runtime.kube import CONFIGMAPS, ApiError, KubeApi
from jobcontroller.testing.images import JAX_REF, XGBOOST_REF
from jobcontroller.testing.waiting import wait_for

TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes"
)
Obj = dict[str, Any]
#: ``torchrun``, as the Trainer SDK's command for a torch runtime starts the script. Debian's
#: torch 1.13 predates Python 3.11's Flag enums: torchrun's default "--redirects 0 --tee 0"
#: parse to None and crash it (test_pytorch_elastic_and_failures.py), so each local rank's
#: stdout is tee'd to the console explicitly.
TORCHRUN = ["torchrun", "--redirects", "0:1,1:1", "--tee", "0:1,1:1"]


def local_runtime(source: str, *, name: str, image: str, scripts: str) -> Obj:
    """The shipped ClusterTrainingRuntime ``source`` as a TrainingRuntime for the real node."""
    runtime = yaml.safe_load((RUNTIMES / source).read_text())
    runtime["kind"] = "TrainingRuntime"
    runtime["metadata"] = {"name": name, "labels": runtime["metadata"].get("labels", {})}
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]
        for container in pod["spec"]["containers"]:
            container["image"] = image
            container["imagePullPolicy"] = "Never"
            container["volumeMounts"] = [{"name": "scripts", "mountPath": "/scripts"}]
        pod["spec"]["volumes"] = [{"name": "scripts", "configMap": {"name": scripts}}]
        pod["spec"] = on_real_node(pod["spec"])
    return runtime


class LogKeeper:
    """The last log of each pod's first container (``node``, or an initializer step's), read
    while the TrainJob runs: JobSet deletes a failed run's pods, and with them what would say
    why."""

    def __init__(self, kube: KubeApi, namespace: str, jobset: str) -> None:
        self.kube, self.namespace, self.jobset = kube, namespace, jobset
        self.outputs: dict[str, str] = {}

    async def run(self) -> None:
        while True:
            await self.read()
            await asyncio.sleep(1)

    async def read(self) -> None:
        pods, _ = await self.kube.list(
            PODS,
            namespace=self.namespace,
            label_selector=f"jobset.sigs.k8s.io/jobset-name={self.jobset}",
        )
        for pod in pods:
            if not (pod.get("status") or {}).get("containerStatuses"):
                continue
            name = pod["metadata"]["name"]
            with contextlib.suppress(AssertionError, ApiError, OSError, asyncio.TimeoutError):
                container = pod["spec"]["containers"][0]["name"]
                self.outputs[name] = await logs(self.kube, self.namespace, name, container)


def is_true(obj: Obj | None, ctype: str) -> bool:
    conds = ((obj or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == ctype and c["status"] == "True" for c in conds)


async def run_trainjob(
    kube: KubeApi,
    namespace: str,
    *,
    name: str,
    runtime: Obj,
    trainer: Obj,
    initializer: Obj | None = None,
    steps: tuple[str, ...] = ("node",),
) -> tuple[Obj, dict[str, Obj], dict[str, str]]:
    """Create ``runtime`` (a TrainingRuntime) and a TrainJob on it; wait for it to finish and
    return it Complete, its pods by hostname and their logs by pod name (each pod's first
    container's: ``node``, or the step's own)."""
    await kube.create(TRAINING_RUNTIMES, runtime, namespace=namespace)
    trainjob = {
        "apiVersion": TRAINJOBS.api_version,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime["metadata"]["name"], "kind": "TrainingRuntime"},
            "trainer": trainer,
        },
    }
    if initializer is not None:
        trainjob["spec"]["initializer"] = initializer
    await kube.create(TRAINJOBS, trainjob, namespace=namespace)
    started = time.monotonic()
    keeper = LogKeeper(kube, namespace, name)
    reading = asyncio.create_task(keeper.run())
    try:
        done = await wait_for(
            kube,
            TRAINJOBS,
            name,
            namespace=namespace,
            until=lambda o: is_true(o, "Complete") or is_true(o, "Failed"),
            timeout=600,
        )
    finally:
        reading.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await reading
    pods, _ = await kube.list(
        PODS, namespace=namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={name}"
    )
    await keeper.read()
    outputs = keeper.outputs
    if done is None or not is_true(done, "Complete"):
        events, _ = await kube.list(EVENTS, namespace=namespace)
        seen = [f"{e['involvedObject']['name']}: {e['reason']} {e.get('message')}" for e in events]
        pytest.fail(f"{(done or {}).get('status')}\n{outputs}\n" + "\n".join(seen))
    print(f"\nTrainJob {name} Complete {time.monotonic() - started:.0f}s after creation")
    for pod_name, out in sorted(outputs.items()):
        print(f"--- {pod_name}\n{out}")
    # Each step is one Job (the trainer's of numNodes indexed pods): each succeeded, on the
    # real node.
    statuses = {s["name"]: s for s in done["status"]["jobsStatus"]}
    assert sorted(statuses) == sorted(steps), statuses
    for status in statuses.values():
        assert status["succeeded"] == 1 and status["failed"] == 0, status
    by_host = {p["spec"]["hostname"]: p for p in pods}
    for host, pod in by_host.items():
        assert pod["status"]["phase"] == "Succeeded", (host, pod["status"])
        assert pod["spec"]["nodeName"] == "real-node-0"
    return done, by_host, outputs


def node_env(pod: Obj) -> dict[str, str | None]:
    (node,) = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    return {e["name"]: e.get("value") for e in node["env"]}


async def test_torch_trainjob_two_nodes_two_processes_each_allreduce(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "torchrun_allreduce.py")
    runtime = local_runtime(
        "torch_distributed.yaml", name="torch-local", image=TRAINER_REF, scripts=cm
    )
    trainer = {
        "numNodes": 2,
        "numProcPerNode": 2,
        "command": [*TORCHRUN, "/scripts/torchrun_allreduce.py"],
    }
    _, by_host, outputs = await run_trainjob(
        kube, namespace, name="allreduce", runtime=runtime, trainer=trainer
    )
    assert set(by_host) == {"allreduce-node-0-0", "allreduce-node-0-1"}, sorted(by_host)
    for pod in by_host.values():
        env = node_env(pod)
        assert env["PET_NNODES"] == "2" and env["PET_NPROC_PER_NODE"] == "2", env
        assert env["PET_MASTER_ADDR"] == "allreduce-node-0-0.allreduce", env

    # Four processes, two per pod, each saw the all-reduced sum of ranks 0..3.
    lines = {
        host: re.findall(
            r"ALLREDUCE rank=(\d) local_rank=(\d) node_rank=(\d) world=4 sum=6 expected=6",
            outputs[pod["metadata"]["name"]],
        )
        for host, pod in by_host.items()
    }
    assert sorted(lines["allreduce-node-0-0"]) == [("0", "0", "0"), ("1", "1", "0")], outputs
    assert sorted(lines["allreduce-node-0-1"]) == [("2", "0", "1"), ("3", "1", "1")], outputs
    placement = re.search(
        r"PLACEMENT (.*)", outputs[by_host["allreduce-node-0-0"]["metadata"]["name"]]
    )
    assert placement, outputs
    assert placement.group(1).split() == [
        "0:allreduce-node-0-0/0",
        "1:allreduce-node-0-0/0",
        "2:allreduce-node-0-1/1",
        "3:allreduce-node-0-1/1",
    ], placement.group(1)


async def test_torch_trainjob_reports_progress_to_the_operator(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    """A torch loop reports each step through the stdlib helper (mounted beside the script),
    over HTTPS to the deployed operator's Service with the pod's projected token: the
    TrainJob's status shows the last report; the endpoint refused a report without a token and
    an oversized one."""
    await wait_default_service_account(kube, namespace)
    helper = ROOT / "packages" / "kfjob" / "src" / "kfjob" / "progress_report.py"
    cm = await scripts_configmap(kube, namespace, "torchrun_progress.py")
    await kube.merge_patch(
        CONFIGMAPS, cm, {"data": {"progress_report.py": helper.read_text()}}, namespace=namespace
    )
    runtime = local_runtime(
        "torch_distributed.yaml", name="torch-local", image=TRAINER_REF, scripts=cm
    )
    trainer = {
        "numNodes": 2,
        "numProcPerNode": 1,
        "command": [*TORCHRUN, "/scripts/torchrun_progress.py"],
    }
    _, by_host, outputs = await run_trainjob(
        kube, namespace, name="progress", runtime=runtime, trainer=trainer
    )
    out = outputs[by_host["progress-node-0-0"]["metadata"]["name"]]
    # Reports a second apart are coalesced to one write per 5 s: the last one may land after
    # the TrainJob completed.
    done = await wait_for(
        kube,
        TRAINJOBS,
        "progress",
        namespace=namespace,
        until=lambda o: (
            ((o.get("status") or {}).get("trainerStatus") or {}).get("progressPercentage") == 100
        ),
        timeout=30,
        what="the last report in the status",
    )
    assert done is not None, out
    status = done["status"].get("trainerStatus")
    assert status is not None, out
    assert status["progressPercentage"] == 100, (status, out)
    assert status["estimatedRemainingSeconds"] == 0, status
    assert [m["name"] for m in status["metrics"]] == ["loss", "step"], status
    assert {"name": "step", "value": "6"} in status["metrics"], status
    assert "REFUSED unauthenticated 401" in out, out
    assert "REFUSED oversized 413" in out, out
    env = node_env(by_host["progress-node-0-0"])
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://training-operator.kubeflow.svc:10443"
        f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/progress/status"
    ), env
    # What the user sees: kfjob's progress bar from that status.
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("kfjob")),
        "get",
        "-n",
        namespace,
        "trainjob/progress",
        env={**os.environ, "KUBECONFIG": str(operators.plane.kubeconfig), "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    shown, err = await asyncio.wait_for(proc.communicate(), 60)
    print(shown.decode())
    assert proc.returncode == 0, err.decode()
    assert "[####################] 100%  ETA 0s  loss=" in shown.decode(), shown.decode()


async def test_xgboost_trainjob_three_workers_allreduce_and_train_one_model(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    """Upstream's xgboost-distributed runtime with Debian's XGBoost: worker 0 runs the Rabit
    tracker at DMLC_TRACKER_URI (as upstream's XGBoost guide has it), the three workers
    all-reduce and train one model together."""
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "xgboost_collective.py")
    runtime = local_runtime(
        "xgboost_distributed.yaml", name="xgboost-local", image=XGBOOST_REF, scripts=cm
    )
    trainer = {"numNodes": 3, "command": ["python3", "/scripts/xgboost_collective.py"]}
    _, by_host, outputs = await run_trainjob(
        kube, namespace, name="xgb", runtime=runtime, trainer=trainer
    )
    assert set(by_host) == {f"xgb-node-0-{i}" for i in range(3)}, sorted(by_host)
    models = set()
    for i in range(3):
        pod = by_host[f"xgb-node-0-{i}"]
        env = node_env(pod)
        assert env["DMLC_NUM_WORKER"] == "3" and env["DMLC_TASK_ID"] is None, env
        assert env["DMLC_TRACKER_URI"] == "xgb-node-0-0.xgb", env
        out = outputs[pod["metadata"]["name"]]
        # Rank i is the pod of completion index i (DMLC_TASK_ID, from the index).
        assert f"ALLREDUCE rank={i} task={i} world=3 sum=3 expected=3" in out, out
        trained = re.search(r"TRAINED rank=\d test_rmse=([\d.]+) model=(\w+)", out)
        assert trained, out
        assert float(trained.group(1)) < 0.3, out  # y's spread is ~2: the trees fit it
        models.add(trained.group(2))
    assert len(models) == 1, models  # one model, built from every worker's shard


async def test_jax_trainjob_three_processes_sum_and_fit_on_a_global_mesh(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    """Upstream's jax-distributed runtime with JAX's CPU wheels: three processes join the
    coordinator at JAX_COORDINATOR_ADDRESS (pod 0) and compute over one global mesh."""
    await wait_default_service_account(kube, namespace)
    cm = await scripts_configmap(kube, namespace, "jax_distributed.py")
    runtime = local_runtime("jax_distributed.yaml", name="jax-local", image=JAX_REF, scripts=cm)
    trainer = {"numNodes": 3, "command": ["python3", "/scripts/jax_distributed.py"]}
    _, by_host, outputs = await run_trainjob(
        kube, namespace, name="jax", runtime=runtime, trainer=trainer
    )
    assert set(by_host) == {f"jax-node-0-{i}" for i in range(3)}, sorted(by_host)
    weights = set()
    for i in range(3):
        pod = by_host[f"jax-node-0-{i}"]
        env = node_env(pod)
        assert env["JAX_NUM_PROCESSES"] == "3", env
        assert env["JAX_COORDINATOR_ADDRESS"] == "jax-node-0-0.jax:29500", env
        out = outputs[pod["metadata"]["name"]]
        # The process id is the pod's completion index (JAX_PROCESS_ID).
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
    assert len(weights) == 1, weights  # every process holds the same replicated weights
