"""Training progress for the v1 kinds against the real API server: a PyTorchJob's pods get
the same env as a TrainJob's trainer (so one script reports from either), a pod's own
projected token reports to the operator's endpoint and the PyTorchJob shows it in
``status.trainerStatus``; a missing token, another job's pod or token, and an oversized body
are refused and change nothing. The operator's own status writes keep what was reported."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from bound_tokens import SA, bound_token

from jobcontroller import MAX_BODY_BYTES, ProgressSettings, ProgressTarget
from jobcontroller.controller import progressserver
from jobcontroller.controller.progressserver import ProgressServer
from jobcontroller.runtime.kube import (
    CONFIGMAPS,
    NAMESPACES,
    PODS,
    SECRETS,
    ApiError,
    KubeApi,
    Resource,
)
from jobcontroller.runtime.servingcert import ServingCert
from jobcontroller.testing.operator import RunningController, running
from jobcontroller.testing.waiting import wait_for
from kfjob.progress_report import ProgressReporter
from pytorch_operator.controller import PyTorchJobController

Obj = dict[str, Any]
TIMEOUT = 60.0
PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
TARGET = ProgressTarget(group="kubeflow.org", version="v1", plural="pytorchjobs", kind="PyTorchJob")
TRAINJOB_AUDIENCE = "trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status"


@pytest_asyncio.fixture(loop_scope="session")
async def operator(
    kubeconfig: str, kubeflow_crds: list[str], namespace: str
) -> AsyncIterator[RunningController]:
    settings = ProgressSettings(
        port=0,
        bind_address="127.0.0.1",
        namespace=namespace,
        service="op",
        extra_hosts=("localhost",),
        min_interval=1.0,
    )
    controller = PyTorchJobController()
    controller.enable_progress(settings)
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
    server = op.controller.progress_server
    assert server is not None and server.cert is not None
    return server


def _pytorchjob(name: str) -> Obj:
    template = {
        "spec": {
            "serviceAccountName": SA,
            "containers": [{"name": "pytorch", "image": "torch:latest", "command": ["train"]}],
        }
    }
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {"replicas": 1, "restartPolicy": "Never", "template": template},
            }
        },
    }


async def _setup(kube: KubeApi, namespace: str, *names: str) -> dict[str, Obj]:
    await kube.request(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts",
        body={"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": SA}},
    )
    pods = {}
    for name in names:
        await kube.create(PYTORCHJOBS, _pytorchjob(name), namespace=namespace)
        pod = await wait_for(
            kube,
            PODS,
            f"{name}-master-0",
            namespace=namespace,
            timeout=TIMEOUT,
            until=lambda o: o is not None,
        )
        assert pod is not None
        pods[name] = pod
    return pods


async def _post(
    op: RunningController, namespace: str, name: str, body: bytes, token: str | None
) -> tuple[int, Obj]:
    server = _server(op)
    assert server.cert is not None
    context = ssl.create_default_context(cadata=server.cert.ca_pem)
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    url = f"https://localhost:{server.port}{TARGET.path(namespace, name)}"
    async with (
        aiohttp.ClientSession() as session,
        session.post(url, data=body, headers=headers, ssl=context) as resp,
    ):
        return resp.status, json.loads(await resp.read() or b"{}")


def _progress(job: Obj | None) -> Obj:
    return ((job or {}).get("status") or {}).get("trainerStatus") or {}


async def test_a_pytorchjob_pod_reports_progress_and_the_job_shows_it(
    kube: KubeApi, operator: RunningController, namespace: str, tmp_path: Path
) -> None:
    pods = await _setup(kube, namespace, "reporting")
    pod = pods["reporting"]
    # What the pod was given: the TrainJob's env names, a URL and audience of its own kind.
    [container] = pod["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    url = env["KUBEFLOW_TRAINER_SERVER_URL"]
    assert url.endswith(
        f"/apis/kubeflow.org/v1/namespaces/{namespace}/pytorchjobs/reporting/status"
    )
    [volume] = [v for v in pod["spec"]["volumes"] if v["name"] == "kubeflow-trainer-token"]
    audience = volume["projected"]["sources"][0]["serviceAccountToken"]["audience"]
    assert audience == TARGET.audience(namespace, "reporting")
    server = _server(operator)
    # The pod carries the endpoint's CA (the downward API writes it as ca.crt): no ConfigMap.
    assert server.cert is not None
    annotations = pod["metadata"].get("annotations") or {}
    assert annotations["training.kubeflow.org/progress-ca"] == server.cert.ca_pem
    source = volume["projected"]["sources"][1]["downwardAPI"]["items"][0]
    assert source["fieldRef"]["fieldPath"] == (
        "metadata.annotations['training.kubeflow.org/progress-ca']"
    )
    configmaps, _ = await kube.list(CONFIGMAPS, namespace=namespace)
    assert not [c for c in configmaps if c["metadata"]["name"].endswith("tls-config")]

    # kfjob's helper, unchanged, with what the kubelet would mount (the URL at this host).
    token = await bound_token(kube, namespace, pod, audience)
    (tmp_path / "ca.crt").write_text(server.cert.ca_pem)
    (tmp_path / "token").write_text(token)
    reporter = ProgressReporter(
        env={
            "KUBEFLOW_TRAINER_SERVER_URL": f"https://localhost:{server.port}"
            + TARGET.path(namespace, "reporting"),
            "KUBEFLOW_TRAINER_SERVER_CA_CERT": str(tmp_path / "ca.crt"),
            "KUBEFLOW_TRAINER_SERVER_TOKEN": str(tmp_path / "token"),
        }
    )
    assert await asyncio.to_thread(
        reporter.report,
        progress_percentage=40,
        estimated_remaining_seconds=300,
        metrics={"loss": 0.25},
    ), reporter.last_status
    assert reporter.last_status == 200
    shown = await wait_for(
        kube,
        PYTORCHJOBS,
        "reporting",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda j: _progress(j).get("progressPercentage") == 40,
        what="trainerStatus 40%",
    )
    status = _progress(shown)
    assert status["estimatedRemainingSeconds"] == 300
    assert status["metrics"] == [{"name": "loss", "value": "0.25"}]
    assert status["lastUpdatedTime"]

    # The operator's own status writes (a pod that changes phase) keep the progress.
    await kube.merge_patch(
        PODS,
        "reporting-master-0",
        {"status": {"phase": "Running"}},
        namespace=namespace,
        subresource="status",
    )
    running_job = await wait_for(
        kube,
        PYTORCHJOBS,
        "reporting",
        namespace=namespace,
        timeout=TIMEOUT,
        until=lambda j: any(
            c.get("type") == "Running" and c.get("status") == "True"
            for c in ((j or {}).get("status") or {}).get("conditions") or ()
        ),
        what="Running",
    )
    assert _progress(running_job).get("progressPercentage") == 40


async def test_reports_not_from_the_jobs_own_pods_are_refused(
    kube: KubeApi, operator: RunningController, namespace: str
) -> None:
    pods = await _setup(kube, namespace, "alpha", "beta")
    good = json.dumps({"trainerStatus": {"progressPercentage": 10}}).encode()
    code, body = await _post(operator, namespace, "alpha", good, None)
    assert (code, body["reason"]) == (401, "Unauthorized")
    # beta's pod with a token for alpha's audience: a valid token, but not alpha's pod.
    beta_as_alpha = await bound_token(
        kube, namespace, pods["beta"], TARGET.audience(namespace, "alpha")
    )
    code, body = await _post(operator, namespace, "alpha", good, beta_as_alpha)
    assert (code, body["reason"]) == (403, "Forbidden"), body
    assert "is not a pod of PyTorchJob" in body["message"]
    # alpha's own token at beta's endpoint: the audience is alpha's.
    alpha = await bound_token(kube, namespace, pods["alpha"], TARGET.audience(namespace, "alpha"))
    code, body = await _post(operator, namespace, "beta", good, alpha)
    assert code == 403, body
    # A token minted for a TrainJob of the same name is not a PyTorchJob's.
    as_trainjob = await bound_token(
        kube, namespace, pods["alpha"], TRAINJOB_AUDIENCE.format(ns=namespace, name="alpha")
    )
    code, body = await _post(operator, namespace, "alpha", good, as_trainjob)
    assert code == 403, body
    # Oversized: refused before the token is looked at, and with it.
    huge = b'{"trainerStatus": {"metrics": [' + b" " * MAX_BODY_BYTES + b"]}}"
    assert (await _post(operator, namespace, "alpha", huge, None))[0] == 413
    code, body = await _post(operator, namespace, "alpha", huge, alpha)
    assert (code, body["reason"]) == (413, "RequestEntityTooLarge")
    # A kind this operator does not serve: 404, whoever asks.
    server = _server(operator)
    assert server.cert is not None
    context = ssl.create_default_context(cadata=server.cert.ca_pem)
    url = f"https://localhost:{server.port}/apis/kubeflow.org/v1/namespaces/{namespace}/tfjobs/alpha/status"
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            url, data=good, headers={"Authorization": f"Bearer {alpha}"}, ssl=context
        ) as r,
    ):
        assert r.status == 404
    # None of it reached the status; alpha's own valid report does.
    code, _ = await _post(operator, namespace, "alpha", good, alpha)
    assert code == 200
    for name, want in (("alpha", 10), ("beta", None)):
        job = await wait_for(
            kube,
            PYTORCHJOBS,
            name,
            namespace=namespace,
            timeout=TIMEOUT,
            until=lambda j, want=want: _progress(j).get("progressPercentage") == want,  # type: ignore[misc]  # a default binds the loop's value
            what=f"{name} at {want}",
        )
        assert _progress(job).get("progressPercentage") == want


async def test_the_certificate_is_made_once_while_its_secret_cannot_be_stored(
    kube: KubeApi, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Secret that cannot be created yet (here: its namespace does not exist) is retried;
    the pair made for the first attempt is the one stored once it can be, not a new key per
    retry (each is a child process)."""
    made: list[ServingCert] = []
    real = progressserver.serving_cert_from_child

    async def counted(**kwargs: Any) -> ServingCert:
        made.append(await real(**kwargs))
        return made[-1]

    monkeypatch.setattr(progressserver, "serving_cert_from_child", counted)
    later = f"{namespace}-later"
    settings = ProgressSettings(port=0, bind_address="127.0.0.1", namespace=later, service="op")
    server = ProgressServer(settings=settings, api=kube)
    with pytest.raises(ApiError) as refused:
        await server._ensure_cert()
    assert refused.value.status == 404
    await kube.create(NAMESPACES, {"metadata": {"name": later}})
    try:
        cert = await server._ensure_cert()
        secret = await kube.get(SECRETS, settings.secret_name, namespace=later)
        again = await server._ensure_cert()  # the next start: read from the Secret
    finally:
        await kube.delete(NAMESPACES, later)
    assert len(made) == 1 and cert == made[0] == again
    assert base64.b64decode(secret["data"]["tls.key"]).decode() == cert.key_pem
