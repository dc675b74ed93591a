"""The ``kfjob`` CLI on TrainJobs against the local API server with the trainer CRDs: a TrainJob
submitted from YAML, its status written through the status subresource as the operator writes
it (conditions, jobsStatus, the trainer's reported progress; no controller needed), and
``get``, ``describe``, ``wait`` and ``submit --wait`` showing the progress bar and exiting 0 on
Complete, 1 on Failed; ``suspend``/``resume`` flipping ``spec.suspend``, ``delete`` deleting it,
``logs`` reading the trainer's pod (on a node that serves logs) or saying there is none. Run as
a user runs it (test_kfjob_cli.py's ``kfjob``: a subprocess, output piped, NO_COLOR)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_kfjob_cli import KFJOB, kfjob
from trainer_fixtures import TRAINJOBS, trainjob

from jobcontroller.api import format_time
from jobcontroller.runtime.kube import PODS, KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.lognode import LogNode
from jobcontroller.testing.waiting import wait_for

Obj = dict[str, Any]


def now() -> str:
    return format_time(dt.datetime.now(dt.UTC))


def condition(ctype: str, reason: str, message: str = "") -> Obj:
    return {
        "type": ctype,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now(),
    }


def jobs(active: int, succeeded: int = 0, failed: int = 0) -> list[Obj]:
    return [
        {
            "name": "node",
            "ready": active,
            "active": active,
            "succeeded": succeeded,
            "failed": failed,
            "suspended": 0,
        }
    ]


def trainer(pct: int, eta: int, loss: str) -> Obj:
    return {
        "progressPercentage": pct,
        "estimatedRemainingSeconds": eta,
        "metrics": [{"name": "loss", "value": loss}, {"name": "accuracy", "value": "0.93"}],
        "lastUpdatedTime": now(),
    }


async def write_status(kube: KubeApi, namespace: str, name: str, status: Obj) -> None:
    await kube.merge_patch(
        TRAINJOBS, name, {"status": status}, namespace=namespace, subresource="status"
    )


async def submit(kubeconfig: str, namespace: str, tmp_path: Path, name: str) -> None:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(trainjob(name)))
    code, out, err = await kfjob(kubeconfig, "submit", str(path), "-n", namespace)
    assert code == 0, err
    assert out.strip() == f"trainjob.trainer.kubeflow.org/{name} created"


async def test_get_and_describe_show_the_progress_bar(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    await submit(kubeconfig, namespace, tmp_path, "quiet")
    code, out, err = await kfjob(kubeconfig, "get", "-n", namespace)
    assert code == 0, err
    header, row = out.splitlines()
    assert "PROGRESS" not in header  # no TrainJob reported progress: nothing extra
    assert row.split()[:3] == ["TrainJob", "quiet", "Pending"]

    await submit(kubeconfig, namespace, tmp_path, "llm")
    await write_status(
        kube, namespace, "llm", {"jobsStatus": jobs(2), "trainerStatus": trainer(45, 130, "0.21")}
    )
    code, out, err = await kfjob(kubeconfig, "get", "-n", namespace)
    assert code == 0, err
    header, quiet, llm = out.splitlines()
    assert header.split()[-1] == "PROGRESS"
    assert llm.split()[:6] == ["TrainJob", "llm", "Running", "2", "0", "0"]
    assert llm.endswith("[#########-----------] 45%  ETA 2m10s  loss=0.21 accuracy=0.93")
    assert "[" not in quiet

    for args in (("get", "trainjob/llm"), ("get", "llm"), ("get", "llm", "-k", "trainjobs")):
        code, out, err = await kfjob(kubeconfig, *args, "-n", namespace)
        assert code == 0, err
        assert out.splitlines()[1].endswith("45%  ETA 2m10s  loss=0.21 accuracy=0.93"), out

    code, out, err = await kfjob(kubeconfig, "get", "-k", "trainjob", "-n", namespace, "-o", "yaml")
    assert code == 0, err
    listed = list(yaml.safe_load_all(out))
    assert [d["metadata"]["name"] for d in listed] == ["quiet", "llm"]
    assert listed[1]["status"]["trainerStatus"]["progressPercentage"] == 45

    code, out, err = await kfjob(kubeconfig, "describe", "trainjob/llm", "-n", namespace)
    assert code == 0, err
    assert f"TrainJob {namespace}/llm" in out
    assert "ClusterTrainingRuntime torch-distributed" in out
    assert "[#########-----------] 45%  ETA 2m10s" in out
    assert "loss=0.21" in out and "accuracy=0.93" in out


async def test_wait_follows_progress_and_exits_0_on_complete(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    await submit(kubeconfig, namespace, tmp_path, "llm")
    await write_status(
        kube, namespace, "llm", {"jobsStatus": jobs(1), "trainerStatus": trainer(10, 300, "0.9")}
    )
    proc = await asyncio.create_subprocess_exec(
        KFJOB,
        "wait",
        "trainjob/llm",
        "-n",
        namespace,
        "--interval",
        "0.2",
        env={**os.environ, "KUBECONFIG": kubeconfig, "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None

    async def line() -> str:
        assert proc.stdout is not None
        return (await asyncio.wait_for(proc.stdout.readline(), 60)).decode().rstrip("\n")

    # Each status the trainer reports is written once the previous one has been shown.
    first = await line()
    assert first.endswith(
        "] TrainJob llm Running  node 1/0/0  [##------------------] 10%  ETA 5m0s  loss=0.9 "
        "accuracy=0.93"
    ), first
    await write_status(kube, namespace, "llm", {"trainerStatus": trainer(80, 40, "0.3")})
    second = await line()
    assert second.endswith(
        "Running  node 1/0/0  [################----] 80%  ETA 40s  loss=0.3 accuracy=0.93"
    ), second
    await asyncio.sleep(1)  # five more looks at an unchanged job: no line for them
    await write_status(
        kube,
        namespace,
        "llm",
        {
            "conditions": [condition("Complete", "JobSetCompleted", "jobset completed")],
            "jobsStatus": jobs(0, succeeded=1),
            "trainerStatus": trainer(100, 0, "0.1"),
        },
    )
    rest, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    third, last = rest.decode().splitlines()
    assert third.endswith(
        "Complete  node 0/1/0  [####################] 100%  ETA 0s  loss=0.1 accuracy=0.93"
    ), third
    assert last.startswith(f"TrainJob {namespace}/llm Complete after ")


async def test_submit_wait_exits_1_on_failed(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(trainjob("bad")))
    waiting = asyncio.create_task(
        kfjob(kubeconfig, "submit", str(path), "-n", namespace, "--wait", "--interval", "0.2")
    )
    await wait_for(
        kube,
        TRAINJOBS,
        "bad",
        namespace=namespace,
        until=lambda tj: tj is not None,
        what="the submitted TrainJob",
    )
    await write_status(
        kube,
        namespace,
        "bad",
        {
            "conditions": [condition("Failed", "JobSetFailed", "trainer exited 3")],
            "jobsStatus": jobs(0, failed=1),
        },
    )
    code, out, err = await waiting
    assert code == 1, (out, err)
    assert out.splitlines()[0] == "trainjob.trainer.kubeflow.org/bad created"
    assert "Failed" in out.splitlines()[-1] and "[" not in out.splitlines()[-1].split("] ", 1)[1]
    assert f"TrainJob {namespace}/bad Failed: JobSetFailed: trainer exited 3" in err


def trainer_pod(trainjob: str, name: str, completion: int = 0) -> Obj:
    """A pod of the trainer step, labelled as JobSet v0.12.0 and the Job controller label it."""
    labels = {
        "jobset.sigs.k8s.io/jobset-name": trainjob,
        "jobset.sigs.k8s.io/replicatedjob-name": "node",
        "jobset.sigs.k8s.io/job-index": "0",
        "batch.kubernetes.io/job-completion-index": str(completion),
    }
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"containers": [{"name": "node", "image": "x"}]},
    }


async def test_suspend_resume_and_delete(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    await submit(kubeconfig, namespace, tmp_path, "llm")

    async def suspended() -> object:
        return (await kube.get(TRAINJOBS, "llm", namespace=namespace))["spec"].get("suspend")

    code, out, err = await kfjob(kubeconfig, "suspend", "trainjob/llm", "-n", namespace)
    assert (code, out.strip()) == (0, "trainjob.trainer.kubeflow.org/llm suspended"), err
    assert await suspended() is True
    # NAME alone: found among the TrainJobs.
    code, out, err = await kfjob(kubeconfig, "resume", "llm", "-n", namespace)
    assert (code, out.strip()) == (0, "trainjob.trainer.kubeflow.org/llm resumed"), err
    assert await suspended() is False

    code, out, err = await kfjob(kubeconfig, "delete", "trainjobs/llm", "-n", namespace)
    assert (code, out.strip()) == (0, "trainjob.trainer.kubeflow.org/llm deleted"), err
    await wait_for(
        kube, TRAINJOBS, "llm", namespace=namespace, until=lambda o: o is None, what="deletion"
    )
    for command in ("delete", "suspend", "resume"):
        code, _, err = await kfjob(kubeconfig, command, "trainjob/llm", "-n", namespace)
        assert code == 4 and "not found" in err, (command, err)


async def test_logs_says_which_pod_is_missing(
    kube: KubeApi, kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> None:
    await submit(kubeconfig, namespace, tmp_path, "llm")
    code, out, err = await kfjob(kubeconfig, "logs", "trainjob/llm", "-n", namespace)
    assert (code, out, err.strip()) == (4, "", "TrainJob llm has no pods yet")
    code, _, err = await kfjob(kubeconfig, "logs", "trainjob/nothing", "-n", namespace)
    assert code == 4 and '"nothing" not found' in err, err

    # The trainer's pod on a kwok node: no log to read.
    await kube.create(PODS, trainer_pod("llm", "llm-node-0-0-abcde"), namespace=namespace)
    code, _, err = await kfjob(
        kubeconfig, "logs", "trainjob/llm", "-r", "model-initializer", "-n", namespace
    )
    assert (code, err.strip()) == (
        4,
        "TrainJob llm has no pod of replicated job model-initializer index 0",
    )
    code, _, err = await kfjob(kubeconfig, "logs", "llm", "-i", "1", "-n", namespace)
    assert (code, err.strip()) == (4, "TrainJob llm has no pod of replicated job trainer index 1")
    # The default pod is the trainer's index 0: the API server's refusal names it.
    code, _, err = await kfjob(kubeconfig, "logs", "trainjob/llm", "-n", namespace)
    assert code == 4 and "llm-node-0-0-abcde" in err, err

    # -f on a finished TrainJob without pods: nothing to stream, it ends (as v1's).
    await submit(kubeconfig, namespace, tmp_path, "done")
    await write_status(
        kube, namespace, "done", {"conditions": [condition("Complete", "JobSetCompleted")]}
    )
    code, out, err = await kfjob(kubeconfig, "logs", "trainjob/done", "-f", "-n", namespace)
    assert (code, out) == (0, ""), err


@pytest.fixture(scope="module")
def log_node(
    control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LogNode]:
    node = LogNode(
        control_plane, directory=tmp_path_factory.mktemp("lognode"), name="kwok-logs-kfjob-tj"
    )
    node.start()
    try:
        yield node
    finally:
        node.stop()


async def test_logs_reads_and_follows_the_trainers_log(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    tmp_path: Path,
    log_node: LogNode,
) -> None:
    """The whole way: kfjob -> API server -> the node's kubelet API (kwok's, serving a log
    file) for the trainer's pod of index 0, and ``-f`` streaming lines as they are written."""
    await submit(kubeconfig, namespace, tmp_path, "llm")
    await write_status(kube, namespace, "llm", {"jobsStatus": jobs(1)})
    pod = log_node.place(trainer_pod("llm", "llm-node-0-0-abcde"))
    await kube.create(PODS, pod, namespace=namespace)
    await wait_for(
        kube,
        PODS,
        "llm-node-0-0-abcde",
        namespace=namespace,
        until=lambda p: p is not None and p["status"].get("phase") == "Running",
        what="the trainer's pod Running",
    )
    log_node.write("epoch 1 loss=0.9")
    code, out, err = await kfjob(kubeconfig, "logs", "trainjob/llm", "-n", namespace)
    assert (code, out) == (0, "epoch 1 loss=0.9\n"), err

    proc = await asyncio.create_subprocess_exec(
        KFJOB,
        "logs",
        "llm",
        "-f",
        "-n",
        namespace,
        env={**os.environ, "KUBECONFIG": kubeconfig, "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    try:
        first = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert first.decode() == "epoch 1 loss=0.9\n"
        log_node.write("epoch 2 loss=0.4")  # followed: arrives on the open stream
        second = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert second.decode() == "epoch 2 loss=0.4\n"
    finally:
        proc.kill()
        await proc.wait()
