"""The TFJobs users start from run to Succeeded, with the operator run as its Deployment runs it.

The operator is a separate process (``python -m tf_operator run`` with the Deployment's flags:
leader election, JSON logs, metrics and probe ports) against the local cluster, where kwok
plays the kubelet. The seeds are used as written plus the simulation annotations that tell kwok
how each pod ends: workers exit 0 after a moment, parameter servers run until deleted, as real
ones do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families

from jobcontroller.runtime.kube import PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "tests" / "data" / "seeds"
TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")

# The multi-worker lab's job (seed 002: "Distributed Multi-worker TensorFlow Training on
# Kubernetes"): three workers of the training image, with the script's arguments. Its
# top-level cleanPodPolicy is the pre-runPolicy spelling; the apiserver prunes it.
MULTI_WORKER = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: multi-worker
spec:
  cleanPodPolicy: None
  tfReplicaSpecs:
    Worker:
      replicas: 3
      template:
        spec:
          containers:
            - name: tensorflow
              image: gcr.io/my-project/mnist-train
              args:
                - --epochs=5
                - --steps_per_epoch=100
                - --per_worker_batch=64
                - --saved_model_path=gs://my-project-bucket/saved_model_dir
                - --checkpoint_path=gs://my-project-bucket/checkpoints
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class OperatorProcess:
    process: subprocess.Popen[bytes]
    metrics_url: str
    log: Path

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-5000:]

    async def counter(self, name: str, **labels: str) -> float:
        """A sample scraped from /metrics, as Prometheus would (0 when absent)."""
        async with aiohttp.ClientSession() as session, session.get(self.metrics_url) as resp:
            text = await resp.text()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return 0.0


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, kubeflow_crds: list[str], namespace: str, tmp_path: Path
) -> AsyncIterator[OperatorProcess]:
    metrics_port, health_port = _free_port(), _free_port()
    log = tmp_path / "tf-operator.log"
    args = [
        sys.executable,
        "-m",
        "tf_operator",
        "run",
        f"--kubeconfig={kubeconfig}",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        "--log-format=json",
        f"--metrics-port={metrics_port}",
        f"--health-port={health_port}",
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(
            args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"}
        )
    running = OperatorProcess(process, f"http://127.0.0.1:{metrics_port}/metrics", log)
    try:
        await _wait_ready(running, f"http://127.0.0.1:{health_port}/readyz")
        yield running
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
        code = await asyncio.to_thread(process.wait, 30)
        # SIGTERM is how a Deployment stops it: a graceful drain exits 0.
        assert code == 0, running.logs()


async def _wait_ready(op: OperatorProcess, url: str, timeout: float = 60) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    async with aiohttp.ClientSession() as session:
        while True:
            assert op.process.poll() is None, f"operator exited:\n{op.logs()}"
            with contextlib.suppress(aiohttp.ClientError):
                async with session.get(url) as resp:
                    if resp.status == 200:
                        body = await resp.json()
                        if body.get("leader", True):
                            return
            assert loop.time() < deadline, f"operator not ready:\n{op.logs()}"
            await asyncio.sleep(0.2)


def _succeeded(job: dict[str, Any] | None) -> bool:
    return any(
        c["type"] == "Succeeded" and c["status"] == "True"
        for c in ((job or {}).get("status") or {}).get("conditions") or []
    )


async def _run_to_success(
    kube: KubeApi, op: OperatorProcess, namespace: str, job: dict[str, Any]
) -> dict[str, Any]:
    name = job["metadata"]["name"]
    await kube.create(TFJOBS, job, namespace=namespace)
    try:
        done = await wait_for(
            kube,
            TFJOBS,
            name,
            namespace=namespace,
            until=_succeeded,
            timeout=60,
            what=f"TFJob {name} Succeeded",
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\noperator log:\n{op.logs()}") from None
    assert done is not None
    return done


def _tf_config(pod: dict[str, Any]) -> dict[str, Any]:
    container = next(c for c in pod["spec"]["containers"] if c["name"] == "tensorflow")
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    config: dict[str, Any] = json.loads(env["TF_CONFIG"])
    return config


async def _assert_counted(operator: OperatorProcess, ns: str, *, pods: int) -> None:
    """The job counted once, its pods and services counted, and what its user waited for
    observed (other tests' jobs count too: at least)."""
    labels = {"job_namespace": ns, "framework": "tensorflow"}
    assert await operator.counter("training_operator_jobs_successful_total", **labels) == 1
    assert await operator.counter("created_pods_total") >= pods
    assert await operator.counter("succeeded_service_creation_total") >= pods
    tf = {"framework": "tensorflow"}
    assert await operator.counter("jobcontroller_job_first_pod_seconds_count", **tf) >= 1
    assert await operator.counter("jobcontroller_job_queue_wait_seconds_count", **tf) >= 1
    done_tf = {**tf, "state": "Succeeded"}
    assert await operator.counter("jobcontroller_job_duration_seconds_count", **done_tf) >= 1
    assert await operator.counter("jobcontroller_jobs", **done_tf) >= 1


async def test_distributed_tensorflow_job_seed_succeeds(
    kube: KubeApi, operator: OperatorProcess, namespace: str
) -> None:
    ns = namespace
    job = yaml.safe_load((SEEDS / "distributed-tensorflow-job.yaml").read_text())
    specs = job["spec"]["tfReplicaSpecs"]
    simulate(specs["Worker"]["template"], 0, run_for="2s")
    done = await _run_to_success(kube, operator, ns, job)

    status = done["status"]
    assert status["replicaStatuses"]["Worker"] == {"active": 0, "succeeded": 4, "failed": 0}
    assert [c["type"] for c in status["conditions"]] == ["Created", "Running", "Succeeded"]
    names = {f"distributed-tensorflow-job-ps-{i}" for i in range(2)} | {
        f"distributed-tensorflow-job-worker-{i}" for i in range(4)
    }
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=ns))[0]}
    assert set(pods) == names
    services = await wait_for_list(
        kube, SERVICES, namespace=ns, until=lambda items: len(items) == 6, timeout=30
    )
    assert {s["metadata"]["name"] for s in services} == names
    # The seed's own annotation is kept next to the simulation's.
    ps0 = pods["distributed-tensorflow-job-ps-0"]
    assert ps0["metadata"]["annotations"]["sidecar.istio.io/inject"] == "false"
    config = _tf_config(pods["distributed-tensorflow-job-worker-3"])
    assert config["task"] == {"type": "worker", "index": 3}
    assert config["cluster"]["ps"] == [
        f"distributed-tensorflow-job-ps-{i}.{ns}.svc:2222" for i in range(2)
    ]
    assert len(config["cluster"]["worker"]) == 4
    # cleanPodPolicy defaults to None: the parameter servers are left as they were.
    assert ps0["status"]["phase"] == "Running"
    await _assert_counted(operator, ns, pods=6)


async def test_multi_worker_lab_job_succeeds(
    kube: KubeApi, operator: OperatorProcess, namespace: str
) -> None:
    ns = namespace
    job = yaml.safe_load(MULTI_WORKER)
    simulate(job["spec"]["tfReplicaSpecs"]["Worker"]["template"], 0, run_for="2s")
    done = await _run_to_success(kube, operator, ns, job)

    assert done["status"]["replicaStatuses"]["Worker"] == {
        "active": 0,
        "succeeded": 3,
        "failed": 0,
    }
    pods = {p["metadata"]["name"]: p for p in (await kube.list(PODS, namespace=ns))[0]}
    # The lab reads worker 0's logs as `kubectl logs multi-worker-worker-0`.
    assert set(pods) == {f"multi-worker-worker-{i}" for i in range(3)}
    worker2 = pods["multi-worker-worker-2"]
    container = worker2["spec"]["containers"][0]
    assert container["image"] == "gcr.io/my-project/mnist-train"
    assert container["args"][-1] == "--checkpoint_path=gs://my-project-bucket/checkpoints"
    config = _tf_config(worker2)
    assert config["task"] == {"type": "worker", "index": 2}
    assert config["cluster"] == {
        "worker": [f"multi-worker-worker-{i}.{ns}.svc:2222" for i in range(3)]
    }
    assert config["environment"] == "cloud"
    await _assert_counted(operator, ns, pods=3)


async def test_the_seed_jobs_story_is_in_the_log_at_info(
    kube: KubeApi, operator: OperatorProcess, namespace: str
) -> None:
    """One line per thing that happened to the job, each carrying the job (namespace, name,
    kind, uid) and the reconcile id, in keys log stacks read (msg, level, ts, logger);
    creations counted per pass, not one line per pod."""
    job = yaml.safe_load((SEEDS / "distributed-tensorflow-job.yaml").read_text())
    job["metadata"]["name"] = "story"
    simulate(job["spec"]["tfReplicaSpecs"]["Worker"]["template"], 0, run_for="2s")
    done = await _run_to_success(kube, operator, namespace, job)
    uid = done["metadata"]["uid"]
    lines = [json.loads(line) for line in operator.log.read_text().splitlines() if line[:1] == "{"]
    story = [e for e in lines if e.get("namespace") == namespace and e.get("name") == "story"]
    assert story, operator.logs()
    for entry in story:
        assert {"msg", "level", "ts", "logger", "reconcile_id"} <= entry.keys(), entry
        assert entry["kind"] == "TFJob" and entry["uid"] == uid, entry
        assert entry["ts"].endswith("Z") and "T" in entry["ts"], entry
        assert entry["level"] in ("info", "warning"), entry
    messages = [e["msg"] for e in story]
    created = [e["created"] for e in story if "created" in e]
    assert sum(c.get("Pod", 0) for c in created) == 6, messages
    assert sum(c.get("Service", 0) for c in created) == 6, messages
    assert not [m for m in messages if m.startswith(("Created pod", "Created service"))]
    for condition in ("Created", "Running", "Succeeded"):
        assert f"condition {condition}: absent -> True" in messages, messages
    exits = [e for e in story if e.get("reason") == "ExitedWithCode"]
    assert exits, messages  # a worker that exited, with its code
    print("\n".join(json.dumps(e) for e in story))
