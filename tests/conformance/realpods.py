"""Helpers for tests of real pods: placement on the real node, logs, terminal states."""

from __future__ import annotations

import asyncio
import random
import socket
import struct
import time
from typing import Any

from jobcontroller.runtime.apitypes import CONFIGMAPS, PODS, SERVICE_ACCOUNTS, SERVICES, Resource
from jobcontroller.runtime.kube import ApiError, KubeApi
from jobcontroller.testing.images import TOOLS_REF, TRAINER_REF
from jobcontroller.testing.realnode import NODE_IP, on_real_node

ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices")
_RCODES = {0: "NOERROR", 2: "SERVFAIL", 3: "NXDOMAIN", 5: "REFUSED"}

__all__ = [
    "CONFIGMAPS",
    "PODS",
    "TOOLS_REF",
    "TRAINER_REF",
    "dns_query",
    "dns_state",
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
    resp = await kube.call(
        "GET",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/log",
        query={"container": container} if container else None,
        read_timeout=30,
    )
    text = resp.body.decode("utf-8", "replace")
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


def dns_query(name: str, server: str = NODE_IP, timeout: float = 2.0) -> str:
    """Ask the real node's CoreDNS for ``name``'s A record, as a pod would (no search list):
    ``"NOERROR 1"`` (rcode and answer count), ``"NXDOMAIN 0"``, ``"timeout"``, or the error
    (it describes a failure, so it never raises)."""
    qid = random.randrange(1 << 16)
    question = b"".join(bytes([len(label)]) + label.encode() for label in name.split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(timeout)
            sock.sendto(packet, (server, 53))
            while True:
                reply, _ = sock.recvfrom(4096)
                if reply[:2] == packet[:2]:  # the answer to this question
                    break
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return repr(exc)
    _, flags, _, answers, _, _ = struct.unpack(">HHHHHH", reply[:12])
    return f"{_RCODES.get(flags & 0xF, flags & 0xF)} {answers}"


async def dns_state(kube: KubeApi, namespace: str, names: list[str]) -> dict[str, Any]:
    """What a failed lookup inside ``namespace`` depends on, for a test's failure message:
    CoreDNS's answers (the namespace's own name answers NOERROR only once CoreDNS's cache
    holds the namespace), the Services and the EndpointSlices the API server holds."""
    zone = f"{namespace}.svc.cluster.local"
    loop = asyncio.get_running_loop()
    answers = {}
    for name in [zone, *(f"{n}.{zone}" for n in names)]:
        answers[name] = await loop.run_in_executor(None, dns_query, name)
    services, _ = await kube.list(SERVICES, namespace=namespace)
    slices, _ = await kube.list(ENDPOINT_SLICES, namespace=namespace)
    return {
        "coredns": answers,
        "services": {s["metadata"]["name"]: s.get("spec", {}).get("clusterIP") for s in services},
        "endpointslices": [
            {
                "name": e["metadata"]["name"],
                "service": e["metadata"].get("labels", {}).get("kubernetes.io/service-name"),
                "endpoints": [
                    (p.get("hostname"), p.get("addresses"), p.get("conditions"))
                    for p in e.get("endpoints") or []
                ],
            }
            for e in slices
        ],
    }
