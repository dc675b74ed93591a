"""Leader election between real operator processes sharing one Lease.

Short timings (lease 3 s, renew deadline 2 s, retry 0.5 s) keep failovers quick; the waits allow
the lease duration plus a generous margin for a loaded machine, and assert no timings.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from typing import Any

import pytest
from dummy_operator import SELECTOR, STAMP, OperatorProcess

from jobcontroller.runtime.kube import CONFIGMAPS, LEASES, ApiError, KubeApi
from jobcontroller.testing.waiting import wait_for

LEASE = "dummy-operator-lock"


@pytest.fixture
async def processes() -> AsyncIterator[list[OperatorProcess]]:
    started: list[OperatorProcess] = []
    yield started
    for proc in started:
        await proc.kill()


def replica(kubeconfig: str, namespace: str) -> OperatorProcess:
    return OperatorProcess(
        "run",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        "--bind-address=127.0.0.1",
        "--metrics-port=0",
        "--health-port=0",
        "--leader-elect",
        f"--leader-election-namespace={namespace}",
        f"--leader-election-id={LEASE}",
        "--leader-election-lease-duration=3",
        "--leader-election-renew-deadline=2",
        "--leader-election-retry-period=0.5",
    )


async def start_pair(
    kubeconfig: str, namespace: str, processes: list[OperatorProcess]
) -> tuple[OperatorProcess, OperatorProcess]:
    """Two replicas; returns (leader, follower) once exactly one leads and both are ready."""
    pair = [replica(kubeconfig, namespace), replica(kubeconfig, namespace)]
    processes.extend(pair)
    await asyncio.gather(*(p.start_serving() for p in pair))
    async with asyncio.timeout(30):
        while True:
            states = [await p.readyz() for p in pair]
            if all(s["synced"] for s in states) and sum(s["leader"] for s in states) == 1:
                break
            await asyncio.sleep(0.2)
    leader, follower = pair if states[0]["leader"] else pair[::-1]
    return leader, follower


async def lease_spec(kube: KubeApi, namespace: str) -> dict[str, Any]:
    lease = await kube.get(LEASES, LEASE, namespace=namespace)
    spec: dict[str, Any] = lease["spec"]
    return spec


async def stamped_by(kube: KubeApi, namespace: str, name: str, proc: OperatorProcess) -> None:
    key, value = SELECTOR.split("=")
    cm = {"metadata": {"name": name, "labels": {key: value}}}
    await kube.create(CONFIGMAPS, cm, namespace=namespace)
    await wait_for(
        kube,
        CONFIGMAPS,
        name,
        namespace=namespace,
        until=lambda obj: (
            obj is not None
            and (obj["metadata"].get("annotations") or {}).get(STAMP) == str(proc.pid)
        ),
        timeout=30,
        what=f"configmap {name} stamped by pid {proc.pid}",
    )


def identity_of(proc: OperatorProcess) -> str:
    entry = next(e for e in proc.logs if e.get("msg") == "waiting for leadership")
    return str(entry["identity"])


async def test_one_leader_reconciles_and_the_standby_takes_over_after_sigkill(
    kube: KubeApi, kubeconfig: str, namespace: str, processes: list[OperatorProcess]
) -> None:
    leader, follower = await start_pair(kubeconfig, namespace, processes)
    spec = await lease_spec(kube, namespace)
    assert spec["holderIdentity"] == identity_of(leader)
    assert spec["leaseDurationSeconds"] == 3
    _, metrics = await leader.get("/metrics", port=leader.metrics_port)
    assert f'leader_election_master_status{{name="{LEASE}"}} 1.0' in metrics
    _, metrics = await follower.get("/metrics", port=follower.metrics_port)
    assert f'leader_election_master_status{{name="{LEASE}"}} 0.0' in metrics

    await stamped_by(kube, namespace, "before", leader)
    transitions = spec.get("leaseTransitions", 0)

    await leader.kill()  # SIGKILL: no release, the standby must wait out the lease
    await follower.wait_log(lambda e: e.get("msg") == "became leader", within=3 + 15)
    assert (await follower.readyz())["leader"] is True
    spec = await lease_spec(kube, namespace)
    assert spec["holderIdentity"] == identity_of(follower)
    assert spec["leaseTransitions"] == transitions + 1
    await stamped_by(kube, namespace, "after", follower)
    # The new leader's warm cache saw "before" too and re-reconciled it.
    await wait_for(
        kube,
        CONFIGMAPS,
        "before",
        namespace=namespace,
        until=lambda obj: (
            obj is not None and obj["metadata"]["annotations"][STAMP] == str(follower.pid)
        ),
    )

    follower.signal(signal.SIGTERM)
    assert await follower.wait() == 0, follower.output()
    assert (await lease_spec(kube, namespace))["holderIdentity"] in ("", None)


async def test_graceful_stop_hands_over_without_waiting_for_expiry(
    kube: KubeApi, kubeconfig: str, namespace: str, processes: list[OperatorProcess]
) -> None:
    leader, follower = await start_pair(kubeconfig, namespace, processes)
    leader.signal(signal.SIGTERM)
    assert await leader.wait() == 0, leader.output()
    released = next(e for e in leader.logs if e.get("msg") == "lease released")
    assert released["level"] == "info"
    await follower.wait_log(lambda e: e.get("msg") == "became leader")
    assert (await lease_spec(kube, namespace))["holderIdentity"] == identity_of(follower)
    await stamped_by(kube, namespace, "handed-over", follower)


async def test_a_leader_that_sees_another_holder_stands_by_and_takes_the_lease_back_later(
    kube: KubeApi, kubeconfig: str, namespace: str, processes: list[OperatorProcess]
) -> None:
    """Its workers stop at once and it does not release what is not its own; it stays up as a
    warm standby and leads again once the usurper's lease has expired, without a restart."""
    op = replica(kubeconfig, namespace)
    processes.append(op)
    await op.start_serving()
    await op.wait_log(lambda e: e.get("msg") == "workers started")
    for _ in range(20):  # the leader renews every 0.5 s, so our write may conflict
        lease = await kube.get(LEASES, LEASE, namespace=namespace)
        lease["spec"]["holderIdentity"] = "usurper"
        try:
            await kube.replace(LEASES, lease, namespace=namespace)
            break
        except ApiError as exc:
            if not exc.is_conflict:
                raise
    await op.wait_log(lambda e: e.get("msg") == "workers stopped; rejoining the election")
    lost = next(e for e in op.logs if e.get("msg") == "leadership lost")
    assert "usurper" in lost["why"]
    events = [e.get("msg") for e in op.logs]
    assert "lease released" not in events
    assert "manager stopped" not in events
    # The usurper never renews: after its lease duration the standby takes over again.
    first = [e for e in op.logs if e.get("msg") == "became leader"]
    await op.wait_log(lambda e: e.get("msg") == "became leader" and all(e is not f for f in first))
    assert (await lease_spec(kube, namespace))["holderIdentity"] == identity_of(op)
    await stamped_by(kube, namespace, "after-usurper", op)
