"""The ``kfjob`` CLI against the local cluster with the operator running in-process: ``submit
--wait`` prints progress and exits 0 on a seed job that succeeds, exits 1 with the failure
reason on one that fails; ``get``, ``describe``, ``suspend``/``resume`` and ``delete`` show
and do what they say. The CLI runs as a user runs it: ``.venv/bin/kfjob`` in a subprocess,
KUBECONFIG set, NO_COLOR=1, output piped (no terminal)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.kube import PODS, ApiError, KubeApi, Resource
from jobcontroller.testing.operator import running
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list
from kfjob.render import RenderError, render_job
from pytorch_operator.controller import PyTorchJobController
from tf_operator.controller import TFJobController

ROOT = Path(__file__).resolve().parents[2]
KFJOB = str(Path(sys.executable).parent / "kfjob")
SEEDS = ROOT / "tests" / "data" / "seeds"
TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")
PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")


async def kfjob(kubeconfig: str, *args: str, timeout: float = 120) -> tuple[int, str, str]:
    """Run the CLI without blocking the event loop the operator runs on."""
    env = {**os.environ, "KUBECONFIG": kubeconfig, "NO_COLOR": "1"}
    proc = await asyncio.create_subprocess_exec(
        KFJOB,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def seed(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SEEDS / name).read_text())
    return doc


async def test_submit_wait_prints_progress_and_exits_0_on_success(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    job = seed("distributed-tensorflow-job.yaml")
    specs = job["spec"]["tfReplicaSpecs"]
    simulate(specs["Worker"]["template"], 0, run_for="3s")  # PS run until deleted, as real ones
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    async with running(kubeconfig, TFJobController(), namespace=namespace):
        code, out, err = await kfjob(
            kubeconfig, "submit", str(path), "-n", namespace, "--wait", "--interval", "0.5"
        )
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "tfjob.kubeflow.org/distributed-tensorflow-job created"
    progress = [line for line in lines if "] TFJob distributed-tensorflow-job " in line]
    # Live progress: the job seen running with its 6 pods active, per replica type, then done.
    assert any("Running  PS 2/0/0  Worker 4/0/0" in line for line in progress), out
    assert "Succeeded" in progress[-1] and "Worker 0/4/0" in progress[-1], out
    assert lines[-1].startswith(f"TFJob {namespace}/distributed-tensorflow-job Succeeded after ")

    code, out, _ = await kfjob(kubeconfig, "get", "-n", namespace)
    assert code == 0
    header, row = out.splitlines()[:2]
    assert header.split() == [
        "KIND", "NAME", "STATE", "ACTIVE", "SUCCEEDED", "FAILED", "AGE", "DURATION"
    ]  # fmt: skip
    kind, name, state, _, succeeded, failed, *_ = row.split()
    assert (kind, name, state, failed) == ("TFJob", "distributed-tensorflow-job", "Succeeded", "0")
    assert int(succeeded) >= 4


async def test_submit_wait_exits_1_with_the_failure_reason(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    job = seed("distributed-pytorch-job.yaml")
    master = job["spec"]["pytorchReplicaSpecs"]["Master"]
    master["restartPolicy"] = "Never"
    simulate(master["template"], 3, run_for="2s", reason="Error")
    for_workers = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    simulate(for_workers, None)  # workers run until the job ends
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    async with running(kubeconfig, PyTorchJobController(), namespace=namespace):
        code, out, err = await kfjob(
            kubeconfig, "submit", str(path), "-n", namespace, "--wait", "--interval", "0.5"
        )
        assert code == 1, (out, err)
        assert "] PyTorchJob distributed-pytorch-job Running" in out
        name = f"PyTorchJob {namespace}/distributed-pytorch-job"
        # The condition's reason and message, and the pod that failed with its exit code.
        assert f"{name} Failed: PyTorchJobFailed: " in err
        assert "distributed-pytorch-job-master-0: exit code 3 (Error)" in err

        code, out, err = await kfjob(
            kubeconfig, "describe", "-n", namespace, "pytorchjob/distributed-pytorch-job"
        )
        assert code == 0, err
        sections = {s.split(":")[0]: s for s in out.split("\n\n")}
        assert "Failed" in sections["Name"].splitlines()[1]  # State: Failed
        failed = next(line for line in sections["Conditions"].splitlines() if "Failed" in line)
        assert "PyTorchJobFailed" in failed
        pod = next(line for line in sections["Pods"].splitlines() if "-master-0" in line)
        assert pod.split()[1:4] == ["Failed", "3", "Error"]
        assert "SuccessfulCreatePod" in sections["Events"]


async def test_suspend_resume_and_delete(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    job = seed("distributed-pytorch-job.yaml")
    for spec in job["spec"]["pytorchReplicaSpecs"].values():
        simulate(spec["template"], None)  # run until deleted
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    selector = "training.kubeflow.org/job-name=distributed-pytorch-job"
    async with running(kubeconfig, PyTorchJobController(), namespace=namespace):
        assert (await kfjob(kubeconfig, "submit", str(path), "-n", namespace))[0] == 0
        await wait_for_list(
            kube, PODS, namespace=namespace, label_selector=selector, until=lambda p: len(p) == 3
        )
        # NAME alone: kfjob finds the kind.
        code, out, err = await kfjob(
            kubeconfig, "suspend", "-n", namespace, "distributed-pytorch-job"
        )
        assert (code, out.strip()) == (
            0,
            "pytorchjob.kubeflow.org/distributed-pytorch-job suspended",
        )
        await wait_for_list(
            kube, PODS, namespace=namespace, label_selector=selector, until=lambda p: not p
        )
        code, out, _ = await kfjob(kubeconfig, "get", "-n", namespace, "distributed-pytorch-job")
        assert out.splitlines()[1].split()[2] == "Suspended"
        assert (await kfjob(kubeconfig, "resume", "-n", namespace, "distributed-pytorch-job"))[
            0
        ] == 0
        await wait_for_list(
            kube, PODS, namespace=namespace, label_selector=selector, until=lambda p: len(p) == 3
        )
        code, out, _ = await kfjob(kubeconfig, "delete", "-n", namespace, "distributed-pytorch-job")
        assert code == 0
        await wait_for(
            kube,
            PYTORCHJOBS,
            "distributed-pytorch-job",
            namespace=namespace,
            until=lambda o: o is None,
        )
    code, _, err = await kfjob(kubeconfig, "get", "-n", namespace, "distributed-pytorch-job")
    assert code == 4 and 'no job named "distributed-pytorch-job"' in err


def tf_spec(rtype: str, container: str = "tensorflow", **replica: Any) -> dict[str, Any]:
    template = {"spec": {"containers": [{"name": container, "image": "tf"}]}}
    return {"tfReplicaSpecs": {rtype: {"template": template, **replica}}}


INVALID = [
    tf_spec("PS"),  # no Chief, Master or Worker
    tf_spec("Worker", replicas=-1),
    tf_spec("Worker", container="sidecar"),  # no tensorflow container
    tf_spec("Chief", replicas=2),
]


async def test_render_refuses_what_admission_refuses(
    kube: KubeApi, kubeflow_crds: list[str], namespace: str
) -> None:
    """Both refuse each job; the words differ (the report in docs/cli.md shows both)."""
    for spec in INVALID:
        job = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "bad", "namespace": namespace},
            "spec": spec,
        }
        try:
            await kube.create(TFJOBS, job, namespace=namespace)
        except ApiError as exc:
            assert exc.status == 422, exc
        else:
            raise AssertionError(f"admission accepted {spec}")
        try:
            render_job(job)
        except RenderError:
            pass
        else:
            raise AssertionError(f"render accepted {spec}")
