"""SIGKILL the operators at random points of 120 running jobs, clean-ups included.

Each kill is followed by a restart, as a Deployment's would be; the new process waits out the
dead one's Lease. Whatever instant the kill lands on (a creation pass, a status write, a
clean-up), no job may run twice, no slot may hold two pods, no pod may be recreated unless its
predecessor failed, and every job must end as its spec says.
"""

from __future__ import annotations

import asyncio
import random

from harness import KINDS, AuditedPlane, PodHistory, check, terminal, wait_terminal, workload

from jobcontroller.runtime.kube import KubeApi

SEED = 20261124
JOBS = 120
KILLS = 10


async def test_operators_killed_at_random_points(
    audited: AuditedPlane, chaos_kube: KubeApi, chaos_namespace: str
) -> None:
    kube, ns = chaos_kube, chaos_namespace
    rng = random.Random(SEED)
    cases = workload(JOBS, seed=SEED)
    history = PodHistory(kube, ns)
    await history.start()
    ops = [audited.operator(kind, f"{kind.lower()}-a") for kind in KINDS]
    for op in ops:
        op.start()
    try:
        for op in ops:
            await op.wait_leading()
        for case in cases:
            await kube.create(case.resource, case.body, namespace=ns)
        kills, during_cleanup = 0, 0
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 240
        while kills < KILLS and loop.time() < deadline:
            await asyncio.sleep(rng.uniform(0.5, 3.0))
            if any(life.terminating and not life.gone for life in history.lives.values()):
                during_cleanup += 1
            victim = rng.choice(ops)
            victim.kill()
            kills += 1
            await asyncio.sleep(rng.uniform(0.0, 1.0))
            victim.start()
        jobs = await wait_terminal(kube, ns, cases, timeout=240)
        finished = sum(1 for c in cases if terminal(jobs.get(c.name)))
        verdict = await check(kube, ns, cases, history, jobs, audit_log=audited.audit_log)
        print(
            f"\nchaos/kills: {kills} SIGKILLs ({during_cleanup} while pods were terminating), "
            f"{finished}/{len(cases)} finished; {verdict.figures()}"
        )
        verdict.assert_clean()
    finally:
        for op in ops:
            op.close()
        await history.stop()
