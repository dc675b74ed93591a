"""Helpers for tests of real pods: placement on the real node, logs, terminal states."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp

from jobcontroller.runtime.apitypes import CONFIGMAPS, PODS, SERVICE_ACCOUNTS
from jobcontroller.runtime.kube import ApiError, KubeApi
from jobcontroller.testing.images import TOOLS_REF, TRAINER_REF
from jobcontroller.testing.realnode import on_real_node

__all__ = [
    "CONFIGMAPS",
    "PODS",
    "TOOLS_REF",
    "TRAINER_REF",
    "logs",
    "on_real_node",
    "real_template",
    "wait_default_service_account",
]


async def wait_default_service_account(kube: KubeApi, namespace: str, timeout: float = 30) -> None:
    """Pods need the namespace's ``default`` ServiceAccount (admission), which the controller
    manager makes a moment after the namespace."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            await kube.get(SERVICE_ACCOUNTS, "default", namespace=namespace)
            return
        except ApiError as exc:
            if exc.status != 404 or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


async def logs(kube: KubeApi, namespace: str, pod: str, container: str | None = None) -> str:
    """A pod's log, through the API server and the kubelet (as ``kubectl logs``)."""
    resp = await kube._send(
        "GET",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
        query={"container": container} if container else None,
        client_timeout=aiohttp.ClientTimeout(total=30),
        verb="GET",
    )
    async with resp:
        text = await resp.text()
        if resp.status != 200:
            raise AssertionError(f"logs of {namespace}/{pod}: {resp.status} {text}")
        return text


def real_template(
    container: str,
    command: list[str],
    *,
    image: str = TRAINER_REF,
    env: dict[str, str] | None = None,
    scripts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A pod template for the real node: ``command`` in ``image``, optionally with the
    ConfigMap ``scripts`` mounted at /scripts."""
    c: dict[str, Any] = {
        "name": container,
        "image": image,
        "imagePullPolicy": "Never",
        "command": command,
    }
    if env:
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec: dict[str, Any] = {"containers": [c], **extra}
    if scripts:
        c["volumeMounts"] = [{"name": "scripts", "mountPath": "/scripts"}]
        spec["volumes"] = [{"name": "scripts", "configMap": {"name": scripts}}]
    return {"spec": on_real_node(spec)}
