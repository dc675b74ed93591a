"""The three operators behind a fault-injecting proxy, at 10% and at 30% of their requests.

Each operator talks to the API server through a proxy of its own (testing/faultproxy.py) that
drops connections before or after forwarding (after: the server acted, the operator never heard),
answers 429, 500 and 503 in the server's place, stalls requests, and leaves one watch silent.
The proxy connects upstream with the operator's own client certificate, so the audit log still
attributes every write. The suite's invariants must hold at either rate.
"""

from __future__ import annotations

import base64
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml
from harness import (
    KINDS,
    AuditedPlane,
    PodHistory,
    check,
    supervised,
    wait_terminal,
    workload,
)

from jobcontroller.runtime.kube import NAMESPACES, KubeApi
from jobcontroller.testing.faultproxy import FaultProxy
from jobcontroller.testing.processes import OperatorProcess

JOBS = 45


def _kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path) -> Path:
    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "proxy",
                        "cluster": {"server": server, "certificate-authority-data": b64(ca)},
                    }
                ],
                "users": [
                    {
                        "name": "op",
                        "user": {"client-certificate-data": b64(cert), "client-key-data": b64(key)},
                    }
                ],
                "contexts": [{"name": "proxy", "context": {"cluster": "proxy", "user": "op"}}],
                "current-context": "proxy",
            }
        )
    )
    return path


@pytest.mark.parametrize("rate", [0.1, 0.3])
async def test_operators_behind_a_faulty_network(
    audited: AuditedPlane, chaos_kube: KubeApi, rate: float
) -> None:
    kube, plane = chaos_kube, audited.plane
    ns = f"proxy-{uuid.uuid4().hex[:6]}"
    await kube.create(NAMESPACES, {"metadata": {"name": ns}})
    cases = workload(JOBS, seed=int(rate * 100))
    history = PodHistory(kube, ns)
    await history.start()
    workdir = audited.workdir / f"proxy-{int(rate * 100)}"
    workdir.mkdir()
    ca = plane.ca  # the cluster's CA: serving and client certificates for the proxies
    serving_cert, serving_key = ca.serving().write(workdir, "proxy-serving")
    proxies: list[FaultProxy] = []
    ops: list[OperatorProcess] = []
    for i, kind in enumerate(KINDS):
        replica = f"{kind.lower()}-p{int(rate * 100)}"
        cert, key = ca.client(user=f"chaos:{replica}", groups=["system:masters"]).write(
            workdir, replica
        )
        proxy = FaultProxy(
            upstream_host="127.0.0.1",
            upstream_port=plane.apiserver_port,
            ca_file=plane.ca_file,
            serving_cert=serving_cert,
            serving_key=serving_key,
            client_cert=cert,
            client_key=key,
            rate=rate,
            seed=i,
        )
        await proxy.start()
        proxies.append(proxy)
        op = audited.operator(kind, replica, fast_lease=False)
        op.kubeconfig = _kubeconfig(
            workdir / f"{replica}.kubeconfig", proxy.url, plane.ca_file, cert, key
        )
        ops.append(op)
    try:
        async with supervised(ops):
            for op in ops:
                await op.wait_leading(timeout=120)
            for case in cases:
                await kube.create(case.resource, case.body, namespace=ns)
            jobs = await wait_terminal(kube, ns, cases, timeout=240)
            restarts = sum(op.starts - 1 for op in ops)
        verdict = await check(kube, ns, cases, history, jobs, audit_log=audited.audit_log)
        faults: Counter[str] = Counter()
        for proxy in proxies:
            faults.update(proxy.injected)
        requests = sum(proxy.requests for proxy in proxies)
        print(
            f"\nchaos/proxy {rate:.0%}: {sum(faults.values())} faults in {requests} requests "
            f"({dict(sorted(faults.items()))}); operator restarts {restarts}; "
            f"{verdict.figures()}"
        )
        verdict.assert_clean()
    finally:
        for proxy in proxies:
            await proxy.stop()
        await history.stop()
