"""``training-operator``: every job kind in one process, as Kubeflow's training-operator
runs its frameworks, sharing one API client, one watch per resource, one metrics registry and
one Lease.
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

import pytest
from prometheus_client.parser import text_string_to_metric_families
from simulated_jobs import simulated_jobs

from jobcontroller.runtime.kube import CRDS, ApiError, KubeApi, Resource
from jobcontroller.testing.ports import free_port
from jobcontroller.testing.waiting import wait_for

LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")


JOBS = list(simulated_jobs().values())
#: The controller label of each kind's reconcile metrics.
CONTROLLERS = {job.resource.kind: job.controller for job in JOBS}


def _finished(job: dict[str, Any] | None) -> bool:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conditions)


async def _jobset_installed(kube: KubeApi) -> bool:
    try:
        await kube.get(CRDS, "jobsets.jobset.x-k8s.io")
    except ApiError as exc:
        if exc.is_not_found:
            return False
        raise
    return True


async def _ready(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    for _ in range(300):
        assert proc.poll() is None, log.read_text()[-3000:]
        url = f"http://127.0.0.1:{port}/readyz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
            if r.status == 200:
                return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not ready:\n{log.read_text()[-3000:]}")


@pytest.mark.parametrize(
    ("schemes", "kinds"),
    [(None, set(CONTROLLERS)), ("TFJob,pytorchjob,MPIJob", {"TFJob", "PyTorchJob", "MPIJob"})],
    ids=["default", "flag"],
)
async def test_one_process_runs_every_kind(
    kube: KubeApi,
    kubeconfig: str,
    kubeflow_crds: list[str],
    namespace: str,
    tmp_path: Path,
    schemes: str | None,
    kinds: set[str],
) -> None:
    metrics_port, health_port = free_port(), free_port()
    log = tmp_path / "training-operator.log"
    argv = [
        sys.executable,
        "-m",
        "training_operator",
        "run",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--log-format=json",
        f"--metrics-port={metrics_port}",
        f"--health-port={health_port}",
        *([f"--enable-scheme={schemes}"] if schemes else []),
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=os.environ)
    try:
        await _ready(proc, health_port, log)
        jobs = [(job.resource, job.body) for job in JOBS if job.resource.kind in kinds]
        for resource, body in jobs:
            await kube.create(resource, body, namespace=namespace)
        for resource, body in jobs:
            done = await wait_for(
                kube,
                resource,
                body["metadata"]["name"],
                namespace=namespace,
                until=_finished,
                timeout=90,
                what=f"{resource.kind} finished",
            )
            assert done is not None
            last = [c["type"] for c in done["status"]["conditions"] if c["status"] == "True"]
            assert last[-1] == "Succeeded", (resource.kind, log.read_text()[-3000:])
        with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics") as r:
            text = r.read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(proc.wait, 30)
    assert code == 0, log.read_text()[-3000:]

    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    controllers = {
        s.labels["controller"] for s in samples if s.name == "controller_runtime_reconcile_total"
    }
    expected = {CONTROLLERS[kind] for kind in kinds}
    if schemes is None and await _jobset_installed(kube):
        # By default TrainJobs are served where JobSet is installed (another test of this
        # session may have installed it; tests/integration/test_trainjob_all_in_one.py).
        expected.add("trainjob-controller")
    assert controllers == expected
    # Pods and services are watched once for all kinds.
    relists = {s.labels["resource"]: s.value for s in samples if s.name == "informer_relists_total"}
    assert relists["pods"] == 1 and relists["services"] == 1, relists
    # One Lease for the process.
    leases, _ = await kube.list(LEASES, namespace=namespace)
    assert [lease["metadata"]["name"] for lease in leases] == ["training-operator"]
