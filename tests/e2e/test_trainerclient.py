"""``kubeflow==0.5.0``'s ``TrainerClient`` (the SDK Kubeflow Trainer v2 users drive TrainJobs
with) against our ``training-operator``, unchanged: the runtimes installed as the docs say
(``kubectl apply -k manifests/runtimes``), the real JobSet controller, kwok's pods.

A data scientist lists the runtimes, trains a function on torch-distributed, watches the
TrainJob's steps, waits for it and deletes it; each answer comes from what
our operator wrote (the TrainJob's conditions, the JobSet's pods and their labels). The SDK is
synchronous: it runs in a thread so the test's event loop keeps serving the cluster fixtures.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from kubeflow.common.types import KubernetesBackendConfig
from kubeflow.trainer import CustomTrainer, TrainerClient
from kubeflow.trainer.options.kubernetes import (
    JobSetSpecPatch,
    JobSetTemplatePatch,
    JobSpecPatch,
    JobTemplatePatch,
    PodTemplatePatch,
    ReplicatedJobPatch,
    RuntimePatch,
    TrainingRuntimeSpecPatch,
)

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.pods import sim_annotations
from jobcontroller.testing.ports import free_port
from jobcontroller.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parents[2]
TRAINJOBS = Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs")
TRAINING_RUNTIMES = Resource(
    "trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", "trainingruntimes"
)
TIMEOUT = 120


def train_mnist(lr: float) -> None:
    """The function the SDK ships to the nodes (its source goes into the trainer's command)."""
    print(f"training with lr={lr}")


def kwok_finishes(exit_code: int) -> RuntimePatch:
    """The SDK's own RuntimePatch option, giving the trainer pods kwok's annotations: each
    node's pod exits ``exit_code`` after 2 s."""
    pod = PodTemplatePatch(metadata={"annotations": sim_annotations(exit_code, run_for="2s")})
    node = ReplicatedJobPatch(name="node", template=JobTemplatePatch(spec=JobSpecPatch(pod)))
    spec = JobSetSpecPatch(replicated_jobs=[node])
    return RuntimePatch(
        training_runtime_spec=TrainingRuntimeSpecPatch(template=JobSetTemplatePatch(spec=spec))
    )


def install_runtimes(kubeconfig: str) -> None:
    """As docs/trainjob.md installs them (the cluster-wide runtimes stay for the session)."""
    kubectl = [find_binaries()["kubectl"], "--kubeconfig", kubeconfig]
    runtimes = str(ROOT / "manifests" / "runtimes")
    applied = subprocess.run(
        [*kubectl, "apply", "--server-side", "--force-conflicts", "-k", runtimes],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert applied.returncode == 0, applied.stderr


@contextlib.asynccontextmanager
async def training_operator(kubeconfig: str, namespace: str, log: Path) -> Any:
    health = free_port()
    argv = [
        sys.executable,
        "-m",
        "training_operator",
        "run",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        f"--metrics-port={free_port()}",
        f"--health-port={health}",
        "--enable-scheme=trainjob",
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    try:
        for _ in range(300):
            assert proc.poll() is None, log.read_text()[-3000:]
            with (
                contextlib.suppress(OSError),
                urllib.request.urlopen(f"http://127.0.0.1:{health}/readyz", timeout=2) as r,
            ):
                if r.status == 200:
                    break
            await asyncio.sleep(0.2)
        else:
            raise AssertionError(f"not ready:\n{log.read_text()[-3000:]}")
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
        assert code == 0, log.read_text()[-3000:]


async def test_trainerclient_trains_lists_waits_and_deletes(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    jobset: JobSetController,
    namespace: str,
    tmp_path: Path,
) -> None:
    install_runtimes(kubeconfig)
    client_config = KubernetesBackendConfig(namespace=namespace, config_file=kubeconfig)

    def train() -> tuple[list[str], str, Any, list[tuple[str, str, int]]]:
        client = TrainerClient(backend_config=client_config)
        runtimes = {r.name: r for r in client.list_runtimes()}
        torch = runtimes["torch-distributed"]
        name = client.train(
            runtime=torch,
            trainer=CustomTrainer(
                func=train_mnist,
                func_args={"lr": 0.01},
                num_nodes=2,
                resources_per_node={"cpu": 1},
            ),
            options=[kwok_finishes(0)],
        )
        client.wait_for_job_status(name, timeout=TIMEOUT, polling_interval=1)
        done = client.get_job(name)
        listed = [(j.name, j.status, len(j.steps)) for j in client.list_jobs(runtime=torch)]
        return sorted(runtimes), name, done, listed

    log = tmp_path / "training-operator.log"
    async with training_operator(kubeconfig, namespace, log):
        runtimes, name, done, listed = await asyncio.to_thread(train)
        assert {"torch-distributed", "jax-distributed", "xgboost-distributed"} <= set(runtimes)

        # The SDK's view of the TrainJob: Complete from our condition, one step per node,
        # each from a pod found by JobSet's labels and the Job's completion index.
        assert done.status == "Complete", (done, log.read_text()[-3000:])
        assert done.num_nodes == 2
        assert done.runtime.name == "torch-distributed"
        steps = sorted((s.name, s.status) for s in done.steps)
        assert steps == [("node-0", "Succeeded"), ("node-1", "Succeeded")], done.steps
        assert {s.device_count for s in done.steps} == {"1"}  # PET_NPROC_PER_NODE: 1 cpu
        assert listed == [(name, "Complete", 2)]

        # What the SDK sent reached the pods through our operator.
        trainjob = await kube.get(TRAINJOBS, name, namespace=namespace)
        command = trainjob["spec"]["trainer"]["command"]
        jobset_obj = await kube.get(JOBSETS, name, namespace=namespace)
        [rjob] = jobset_obj["spec"]["replicatedJobs"]
        [node] = rjob["template"]["spec"]["template"]["spec"]["containers"]
        assert node["command"] == command
        assert "train_mnist(**{'lr': 0.01})" in command[-1]

        def delete() -> list[str]:
            client = TrainerClient(backend_config=client_config)
            client.delete_job(name)
            return [j.name for j in client.list_jobs()]

        remaining = await asyncio.to_thread(delete)
        assert name not in remaining
        gone = await wait_for(
            kube, JOBSETS, name, namespace=namespace, timeout=TIMEOUT, until=lambda j: j is None
        )
        assert gone is None


async def test_trainerclient_reports_a_failed_trainjob(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    jobset: JobSetController,
    namespace: str,
    tmp_path: Path,
) -> None:
    """A node exiting 1: ``wait_for_job_status`` raises as the SDK says it does for a Failed
    TrainJob, and waiting for {Failed} returns it. The runtime is the namespace's copy of
    torch-distributed whose Job retries no pod (the Job's default six retries with back-off
    would take minutes)."""
    [torch] = [
        d
        for d in yaml.safe_load_all((ROOT / "manifests/runtimes/torch_distributed.yaml").open())
        if d
    ]
    runtime = {**torch, "kind": "TrainingRuntime", "metadata": {**torch["metadata"]}}
    runtime["metadata"]["name"] = "torch-no-retry"
    [rjob] = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    rjob["template"]["spec"]["backoffLimit"] = 0
    await kube.create(TRAINING_RUNTIMES, runtime, namespace=namespace)
    client_config = KubernetesBackendConfig(namespace=namespace, config_file=kubeconfig)

    def train() -> tuple[str, str, Any]:
        client = TrainerClient(backend_config=client_config)
        name = client.train(
            runtime="torch-no-retry",
            trainer=CustomTrainer(func=train_mnist, func_args={"lr": 1.0}, num_nodes=1),
            options=[kwok_finishes(1)],
        )
        try:
            client.wait_for_job_status(name, timeout=TIMEOUT, polling_interval=1)
        except RuntimeError as exc:
            raised = str(exc)
        else:
            raised = ""
        failed = client.wait_for_job_status(
            name, status={"Failed"}, timeout=TIMEOUT, polling_interval=1
        )
        return name, raised, failed

    log = tmp_path / "training-operator.log"
    async with training_operator(kubeconfig, namespace, log):
        name, raised, failed = await asyncio.to_thread(train)
    assert raised == f"TrainJob {name} is Failed", log.read_text()[-3000:]
    assert failed.status == "Failed"
    trainjob = await kube.get(TRAINJOBS, name, namespace=namespace)
    [cond] = [c for c in trainjob["status"]["conditions"] if c["type"] == "Failed"]
    assert cond["status"] == "True"
    with contextlib.suppress(ApiError):
        await kube.delete(TRAINJOBS, name, namespace=namespace)
