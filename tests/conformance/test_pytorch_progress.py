"""A real torch PyTorchJob reporting its training progress (our extension for the v1 kinds):
the same script and stdlib helper as the TrainJob's conformance test, unchanged, report each
step from the master over HTTPS to the deployed operator's Service with the pod's projected
token; the PyTorchJob's ``status.trainerStatus`` shows the last report and ``kfjob get`` its
bar; the endpoint refused a report without a token and an oversized one."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from conftest import ROOT, RealCluster
from realpods import PODS, logs, real_template, wait_default_service_account
from test_pytorch import PYTORCHJOBS, condition, finished, scripts_configmap

from jobcontroller.runtime.kube import CONFIGMAPS, KubeApi
from jobcontroller.testing.waiting import wait_for


async def test_torch_pytorchjob_reports_progress_to_the_operator(
    operators: RealCluster, kube: KubeApi, namespace: str
) -> None:
    await wait_default_service_account(kube, namespace)
    helper = ROOT / "packages" / "kfjob" / "src" / "kfjob" / "progress_report.py"
    cm = await scripts_configmap(kube, namespace, "torchrun_progress.py")
    await kube.merge_patch(
        CONFIGMAPS, cm, {"data": {"progress_report.py": helper.read_text()}}, namespace=namespace
    )
    template = real_template("pytorch", ["python3", "/scripts/torchrun_progress.py"], scripts=cm)
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "progress"},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
                "Worker": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
            }
        },
    }
    await kube.create(PYTORCHJOBS, job, namespace=namespace)
    done = await wait_for(
        kube, PYTORCHJOBS, "progress", namespace=namespace, until=finished, timeout=600
    )
    assert done is not None
    out = await logs(kube, namespace, "progress-master-0", "pytorch")
    assert condition(done, "Succeeded") is not None, (done["status"], out)
    # Reports a second apart are coalesced to one write per 5 s: the last one may land after
    # the job succeeded.
    shown = await wait_for(
        kube,
        PYTORCHJOBS,
        "progress",
        namespace=namespace,
        until=lambda o: (
            (((o or {}).get("status") or {}).get("trainerStatus") or {}).get("progressPercentage")
            == 100
        ),
        timeout=30,
        what="the last report in the status",
    )
    assert shown is not None, out
    status = shown["status"]["trainerStatus"]
    assert status["estimatedRemainingSeconds"] == 0, status
    assert [m["name"] for m in status["metrics"]] == ["loss", "step"], status
    assert {"name": "step", "value": "6"} in status["metrics"], status
    assert "REFUSED unauthenticated 401" in out, out
    assert "REFUSED oversized 413" in out, out
    master = await kube.get(PODS, "progress-master-0", namespace=namespace)
    env = {e["name"]: e.get("value") for e in master["spec"]["containers"][0]["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"] == (
        "https://training-operator.kubeflow.svc:10443"
        f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/progress/status"
    ), env
    # What the user sees: kfjob's progress bar from that status.
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("kfjob")),
        "get",
        "-n",
        namespace,
        "pytorchjob/progress",
        env={**os.environ, "KUBECONFIG": str(operators.plane.kubeconfig), "NO_COLOR": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    got, err = await asyncio.wait_for(proc.communicate(), 60)
    print(got.decode())
    assert proc.returncode == 0, err.decode()
    assert "[####################] 100%  ETA 0s  loss=" in got.decode(), got.decode()
