"""Two replicas of the tf-operator on one Lease while 60 TFJobs run; the leader is SIGKILLed,
then frozen (SIGSTOP) past the lease duration and thawed, then stopped with SIGTERM.

Every write each replica sends is attributed by the API server's audit log: none may come
from a replica that does not hold the Lease at that instant (a frozen leader that wakes must
not finish the reconcile it was in), and the suite's invariants must hold throughout.
"""

from __future__ import annotations

import asyncio
import signal

from harness import AuditedPlane, PodHistory, check, wait_terminal, workload, writes_by

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.processes import OperatorProcess

SEED = 7
JOBS = 60


async def _leader(pair: list[OperatorProcess], *, timeout: float = 40.0) -> OperatorProcess:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while loop.time() < deadline:
        for op in pair:
            ready = op.readiness() if op.alive else None
            if ready is not None and ready.get("leader"):
                return op
        await asyncio.sleep(0.2)
    raise AssertionError("no leader:\n" + "\n".join(op.tail(15) for op in pair))


async def test_leader_failover_by_sigkill_sigstop_and_sigterm(
    audited: AuditedPlane, chaos_kube: KubeApi, chaos_namespace: str
) -> None:
    kube, ns = chaos_kube, chaos_namespace
    cases = workload(JOBS, seed=SEED, kinds=("TFJob",))
    history = PodHistory(kube, ns)
    await history.start()
    pair = [audited.operator("TFJob", "tf-a"), audited.operator("TFJob", "tf-b")]
    for op in pair:
        op.start()
    handovers: list[str] = []
    try:
        await _leader(pair)
        for case in cases:
            await kube.create(case.resource, case.body, namespace=ns)

        await asyncio.sleep(2)
        leader = await _leader(pair)
        leader.kill()
        successor = await _leader(pair)
        assert successor is not leader
        handovers.append("SIGKILL")
        leader.start()  # as its Deployment would

        await asyncio.sleep(2)
        leader = await _leader(pair)
        leader.signal(signal.SIGSTOP)
        successor = await _leader([op for op in pair if op is not leader])
        await asyncio.sleep(1)
        leader.signal(signal.SIGCONT)
        handovers.append("SIGSTOP")
        # Thawed, it finds the Lease taken: it stands by (rejoining the election), alive.
        await asyncio.sleep(3)
        assert leader.alive, leader.tail()
        assert not (leader.readiness() or {}).get("leader")

        await asyncio.sleep(1)
        leader = await _leader(pair)
        status = await leader.terminate(grace=30)
        assert status == 0, leader.tail()
        successor = await _leader([op for op in pair if op is not leader])
        handovers.append("SIGTERM")
        leader.start()

        jobs = await wait_terminal(kube, ns, cases, timeout=180)
        verdict = await check(kube, ns, cases, history, jobs, audit_log=audited.audit_log)
        print(
            f"\nchaos/failover: handovers by {', '.join(handovers)}; writes attributed "
            f"{writes_by(audited.audit_log)}; {verdict.figures()}"
        )
        verdict.assert_clean()
    finally:
        for op in pair:
            if op.alive:
                op.signal(signal.SIGCONT)
            op.close()
        await history.stop()
