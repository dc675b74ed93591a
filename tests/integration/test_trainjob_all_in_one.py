"""One ``training-operator`` process serving a PyTorchJob (v1) and a TrainJob (Trainer v2)
side by side, with the real JobSet controller and kwok's pods: the migration from one API to
the other needs no second operator."""

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

import pytest
from trainer_fixtures import TRAINJOBS
from trainjob_helpers import TIMEOUT, example, finishing, is_true, shipped_runtimes

from jobcontroller.runtime.kube import KubeApi, Resource
from jobcontroller.testing.jobset import JobSetController
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.ports import free_port
from jobcontroller.testing.waiting import wait_for

__all__ = ["shipped_runtimes"]  # a fixture the test uses

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
Obj = dict[str, Any]


def _pytorchjob(name: str) -> Obj:
    def template() -> Obj:
        pod = {"spec": {"containers": [{"name": "pytorch", "image": "busybox"}]}}
        return simulate(pod, 0, run_for="1s")

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "template": template()},
                "Worker": {"replicas": 1, "template": template()},
            }
        },
    }


async def _ready(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    for _ in range(300):
        assert proc.poll() is None, log.read_text()[-3000:]
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r,
        ):
            if r.status == 200:
                return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not ready:\n{log.read_text()[-3000:]}")


@pytest.mark.parametrize("schemes", ["pytorchjob,trainjob", None], ids=["flag", "default"])
async def test_a_pytorchjob_and_a_trainjob_in_one_process(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    jobset: JobSetController,
    shipped_runtimes: list[str],
    namespace: str,
    tmp_path: Path,
    schemes: str | None,
) -> None:
    """Named in --enable-scheme, or by default (JobSet's CRD is installed here)."""
    metrics_port, health_port = free_port(), free_port()
    log = tmp_path / "training-operator.log"
    argv = [
        sys.executable,
        "-m",
        "training_operator",
        "run",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        f"--metrics-port={metrics_port}",
        f"--health-port={health_port}",
        *([f"--enable-scheme={schemes}"] if schemes else []),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    try:
        await _ready(proc, health_port, log)
        await kube.create(PYTORCHJOBS, _pytorchjob("v1"), namespace=namespace)
        trainjob = finishing(example("01-multi-node.yaml"))
        trainjob["metadata"]["name"] = "v2"
        await kube.create(TRAINJOBS, trainjob, namespace=namespace)
        v1 = await wait_for(
            kube,
            PYTORCHJOBS,
            "v1",
            namespace=namespace,
            timeout=TIMEOUT,
            until=lambda j: is_true(j, "Succeeded") or is_true(j, "Failed"),
        )
        assert is_true(v1, "Succeeded"), (v1, log.read_text()[-3000:])
        v2 = await wait_for(
            kube,
            TRAINJOBS,
            "v2",
            namespace=namespace,
            timeout=TIMEOUT,
            until=lambda j: is_true(j, "Complete") or is_true(j, "Failed"),
        )
        assert is_true(v2, "Complete"), (v2, log.read_text()[-3000:])
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
    assert code == 0, log.read_text()[-3000:]
