"""Training progress on a real API server: the TrainJob controller in-process serves the
progress endpoint (HTTPS, its own CA), JobSet's controller makes the pods (kwok runs them), a
pod-bound service-account token minted by the API server (TokenRequest, as the kubelet mints
the projected one) reports with the stdlib helper, and ``status.trainerStatus`` shows it.
Refused: no token, another TrainJob's pod's token, another TrainJob's audience, an oversized
body, a malformed report.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio
from bound_tokens import SA, bound_token
from trainer_fixtures import TRAINJOBS
from trainjob_helpers import TIMEOUT, example, finishing, is_true, shipped_runtimes

from jobcontroller import MAX_BODY_BYTES, ProgressSettings
from jobcontroller.controller.progressserver import ProgressServer
from jobcontroller.runtime.kube import CONFIGMAPS, PODS, KubeApi
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.waiting import wait_for
from kfjob.progress_report import ProgressReporter
from trainer_operator.controller import TrainJobController
from trainer_operator.progress import status_path, token_audience

__all__ = ["shipped_runtimes"]  # a fixture this module's tests use

Obj = dict[str, Any]


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, jobset: JobSetController, shipped_runtimes: list[str], namespace: str
) -> AsyncIterator[RunningController]:
    settings = ProgressSettings(
        port=0,
        bind_address="127.0.0.1",
        namespace=namespace,
        service="op",
        extra_hosts=("localhost",),
        min_interval=1.0,
    )
    controller = TrainJobController(progress=settings)
    async with running(kubeconfig, controller, namespace=namespace) as op:
        server = controller.progress_server
        assert server is not None
        for _ in range(600):
            if server.port is not None:
                break
            await asyncio.sleep(0.05)
        assert server.port is not None, "the progress endpoint did not start"
        yield op


def _server(op: RunningController) -> ProgressServer:
    controller = op.controller
    assert isinstance(controller, TrainJobController) and controller.progress_server is not None
    return controller.progress_server


def _long_running(name: str) -> Obj:
    """upstream's 01-multi-node example, its pods running until deleted, as service account
    ``trainer`` (a pod-bound token needs the pod's own service account)."""
    body = finishing(example("01-multi-node.yaml"), exit_code=None)
    body["metadata"]["name"] = name
    rjob = body["spec"]["runtimePatches"][-1]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"
    ][0]
    rjob["template"]["spec"]["template"]["spec"] = {"serviceAccountName": SA}
    return body


async def _pod_of(kube: KubeApi, namespace: str, trainjob: str) -> Obj:
    async def first() -> Obj | None:
        pods, _ = await kube.list(
            PODS, namespace=namespace, label_selector=f"jobset.sigs.k8s.io/jobset-name={trainjob}"
        )
        return pods[0] if pods else None

    for _ in range(int(TIMEOUT / 0.2)):
        pod = await first()
        if pod is not None:
            return pod
        await asyncio.sleep(0.2)
    raise AssertionError(f"no pod of TrainJob {trainjob}")


def _env(tmp_path: Path, op: RunningController, namespace: str, name: str, token: str) -> Obj:
    server = _server(op)
    assert server.cert is not None
    (tmp_path / "ca.crt").write_text(server.cert.ca_pem)
    (tmp_path / "token").write_text(token)
    return {
        "KUBEFLOW_TRAINER_SERVER_URL": f"https://localhost:{server.port}"
        + status_path(namespace, name),
        "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(tmp_path / "ca.crt"),
        "KUBEFLOW_TRAINER_SERVER_TOKEN": str(tmp_path / "token"),
    }


async def _post(
    op: RunningController, namespace: str, name: str, body: bytes, token: str | None
) -> tuple[int, Obj]:
    server = _server(op)
    assert server.cert is not None
    context = ssl.create_default_context(cadata=server.cert.ca_pem)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    url = f"https://localhost:{server.port}{status_path(namespace, name)}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers, ssl=context) as resp,
    ):
        return resp.status, json.loads(await resp.read() or b"{}")


async def _setup(kube: KubeApi, namespace: str, *names: str) -> dict[str, Obj]:
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}},
    )
    for name in names:
        await kube.create(TRAINJOBS, _long_running(name), namespace=namespace)
    return {name: await _pod_of(kube, namespace, name) for name in names}


async def test_a_pod_reports_progress_and_the_trainjob_shows_it(
    kube: KubeApi, operator: RunningController, namespace: str, tmp_path: Path
) -> None:
    pods = await _setup(kube, namespace, "reporting")
    # What the pods were given: upstream's env and token volume, the CA beside them.
    jobset = await kube.get(JOBSETS, "reporting", namespace=namespace)
    pod_spec = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    [node] = pod_spec["containers"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert env["KUBEFLOW_TRAINER_SERVER_URL"].endswith(status_path(namespace, "reporting"))
    [volume] = [v for v in pod_spec["volumes"] if v["name"] == "kubeflow-trainer-token"]
    audience = volume["projected"]["sources"][0]["serviceAccountToken"]["audience"]
    assert audience == token_audience(namespace, "reporting")
    ca = await kube.get(CONFIGMAPS, "reporting-tls-config", namespace=namespace)
    server = _server(operator)
    assert server.cert is not None and ca["data"]["ca.crt"] == server.cert.ca_pem

    token = await bound_token(kube, namespace, pods["reporting"], audience)
    reporter = ProgressReporter(env=_env(tmp_path, operator, namespace, "reporting", token))
    # The helper blocks (it is for training scripts): off the loop the operator runs on.
    assert await asyncio.to_thread(
        reporter.report,
        progress_percentage=40,
        estimated_remaining_seconds=300,
        metrics={"loss": 0.25},
    ), reporter.last_status
    assert reporter.last_status == 200

    def progress(t: Obj | None) -> Any:
        return ((t or {}).get("status") or {}).get("trainerStatus")

    shown = await wait_for(
        kube,
        TRAINJOBS,
        "reporting",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: (progress(t) or {}).get("progressPercentage") == 40,
        what="trainerStatus 40%",
    )
    status = progress(shown)
    assert status["estimatedRemainingSeconds"] == 300
    assert status["metrics"] == [{"name": "loss", "value": "0.25"}]
    assert status["lastUpdatedTime"]

    # Within the interval, reports are coalesced: the last one is written when it ends.
    for percent in (50, 60, 70):
        assert await asyncio.to_thread(reporter.report, progress_percentage=percent, force=True)
        assert reporter.last_status == 202
    shown = await wait_for(
        kube,
        TRAINJOBS,
        "reporting",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda t: (progress(t) or {}).get("progressPercentage") == 70,
        what="the coalesced 70%",
    )
    # The later report said nothing of the time left: it is gone, as upstream's apply drops it.
    assert "estimatedRemainingSeconds" not in progress(shown)
    assert server.coalescer.coalesced == 3
    # What Prometheus sees: the reports by code, two writes, and the progress (from the cache).
    assert operator.counter("trainjob_status_reports_total", code="200") == 1
    assert operator.counter("trainjob_status_reports_total", code="202") == 3
    assert await operator.settled_counter("trainjob_status_writes_total", 2) == 2
    gauge = {"namespace": namespace, "trainjob": "reporting"}
    for _ in range(100):  # the informer may not have brought the last write yet
        if operator.counter("trainjob_progress_percentage", **gauge) == 70:
            break
        await asyncio.sleep(0.05)
    assert operator.counter("trainjob_progress_percentage", **gauge) == 70


async def test_reports_not_from_the_trainjobs_pods_are_refused(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    pods = await _setup(kube, namespace, "alpha", "beta")
    good = json.dumps({"trainerStatus": {"progressPercentage": 10}}).encode()
    # No token: 401.
    code, body = await _post(operator, namespace, "alpha", good, None)
    assert (code, body["reason"]) == (401, "Unauthorized")
    # beta's pod with a token for alpha's audience: a valid token, but not alpha's pod.
    beta_as_alpha = await bound_token(
        kube, namespace, pods["beta"], token_audience(namespace, "alpha")
    )
    code, body = await _post(operator, namespace, "alpha", good, beta_as_alpha)
    assert (code, body["reason"]) == (403, "Forbidden"), body
    assert "is not a pod of TrainJob" in body["message"]
    # alpha's own token at beta's endpoint: the audience is alpha's.
    alpha = await bound_token(kube, namespace, pods["alpha"], token_audience(namespace, "alpha"))
    code, body = await _post(operator, namespace, "beta", good, alpha)
    assert code == 403, body
    # Oversized: refused before the token is even looked at, and with it.
    huge = b'{"trainerStatus": {"metrics": [' + b" " * MAX_BODY_BYTES + b"]}}"
    assert (await _post(operator, namespace, "alpha", huge, None))[0] == 413
    code, body = await _post(operator, namespace, "alpha", huge, alpha)
    assert (code, body["reason"]) == (413, "RequestEntityTooLarge")
    # Malformed: 422 naming the field.
    bad = json.dumps({"trainerStatus": {"progressPercentage": 150}}).encode()
    code, body = await _post(operator, namespace, "alpha", bad, alpha)
    assert code == 422 and "progressPercentage must be between 0 and 100" in body["message"]
    # None of it reached the status; alpha's own valid report does.
    code, _ = await _post(operator, namespace, "alpha", good, alpha)
    assert code == 200
    for name, want in (("alpha", 10), ("beta", None)):
        trainjob = await kube.get(TRAINJOBS, name, namespace=namespace)
        got = (trainjob.get("status") or {}).get("trainerStatus") or {}
        assert got.get("progressPercentage") == want, (name, got)


async def test_a_busy_port_never_stops_training(
    kube: KubeApi,
    kubeconfig: str,
    jobset: JobSetController,
    shipped_runtimes: list[str],
    namespace: str,
) -> None:
    """Two operators on one host (a test, a misconfigured flag): the endpoint that cannot
    listen says so and retries; the operator runs on and TrainJobs complete. The runtime names
    no service account, and this API server has no ServiceAccount admission plugin to name
    one: the pods, with their projected token, are created all the same."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        settings = ProgressSettings(
            port=busy.getsockname()[1],
            bind_address="127.0.0.1",
            namespace=namespace,
            service="op",
        )
        controller = TrainJobController(progress=settings)
        async with running(kubeconfig, controller, namespace=namespace) as op:
            body = finishing(example("01-multi-node.yaml"))
            body["metadata"]["name"] = "busy-port"
            await kube.create(TRAINJOBS, body, namespace=namespace)
            done = await wait_for(
                kube,
                TRAINJOBS,
                "busy-port",
                namespace=namespace,
                timeout=TIMEOUT,
                until=lambda t: is_true(t, "Complete"),
                what="TrainJob Complete",
            )
            assert done is not None
            server = controller.progress_server
            assert server is not None and server.port is None  # never listened
            assert server.cert is not None  # the pods got the env regardless
            assert op.manager.healthy
