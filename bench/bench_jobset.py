"""The JobSet controller on the local cluster: start-to-ready time, footprint, and a batch of
JobSets run to completion on kwok's simulated pods.

Starts a control plane with kwok, then the JobSet controller (``testing/jobset.py``) STARTS
times in a row, printing each start's time from exec to ready (``/readyz`` and a dry-run
JobSet through both webhooks) and its idle RSS; then, with the last one, creates COUNT JobSets
of a 1-pod launcher and a 2-pod worker job (each pod succeeding after 1 s) at once and prints
how long until every one is Completed, and the controller's RSS and CPU after it.

    uv run python bench/bench_jobset.py [COUNT] [STARTS]
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from jobcontroller.runtime.kube import NAMESPACES, KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.jobset import JOBSETS, JobSetController
from jobcontroller.testing.pods import simulate


def _proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a live process."""
    rss_kib = 0
    for line in open(f"/proc/{pid}/status"):  # noqa: SIM115 - read once, closed on exit
        if line.startswith("VmRSS:"):
            rss_kib = int(line.split()[1])
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()  # noqa: SIM115
    ticks = int(fields[11]) + int(fields[12])
    return rss_kib / 1024, ticks / 100


def _jobset(name: str) -> dict[str, Any]:
    def job(job_name: str, pods: int) -> dict[str, Any]:
        template = simulate(
            {"spec": {"restartPolicy": "Never", "containers": [{"name": "m", "image": "x"}]}},
            0,
            run_for="1s",
        )
        spec = {"parallelism": pods, "completions": pods, "template": template}
        return {"name": job_name, "replicas": 1, "template": {"spec": spec}}

    return {
        "apiVersion": JOBSETS.api_version,
        "kind": "JobSet",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [job("launcher", 1), job("worker", 2)]},
    }


async def _run_batch(cp: ControlPlane, count: int) -> float:
    kube = await KubeApi.from_config(kubeconfig=str(cp.kubeconfig), qps=500.0, burst=1000)
    try:
        await kube.create(NAMESPACES, {"metadata": {"name": "bench"}})
        started = time.monotonic()
        await asyncio.gather(
            *(kube.create(JOBSETS, _jobset(f"js-{i}"), namespace="bench") for i in range(count))
        )
        while True:
            items, _ = await kube.list(JOBSETS, namespace="bench")
            done = sum(
                1
                for js in items
                if any(
                    c["type"] == "Completed" and c["status"] == "True"
                    for c in (js.get("status") or {}).get("conditions") or []
                )
            )
            if done == count:
                return time.monotonic() - started
            await asyncio.sleep(0.5)
    finally:
        await kube.close()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    starts = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    with ControlPlane(controller_manager=True, scheduler=True, kwok=True, nodes=4) as cp:
        controller: JobSetController | None = None
        for i in range(starts):
            if controller is not None:
                controller.stop()
            controller = JobSetController(cp)
            controller.start()
            assert controller.popen is not None
            time.sleep(5)
            rss, cpu = _proc_stats(controller.popen.pid)
            print(
                f"start {i + 1}: ready in {controller.ready_seconds:.2f} s; "
                f"idle after 5 s: RSS {rss:.0f} MiB, CPU {cpu:.2f} s"
            )
        assert controller is not None and controller.popen is not None
        elapsed = asyncio.run(_run_batch(cp, count))
        rss, cpu = _proc_stats(controller.popen.pid)
        print(
            f"{count} JobSets (3 simulated pods each) Completed in {elapsed:.1f} s; "
            f"controller RSS {rss:.0f} MiB, CPU {cpu:.2f} s since its start"
        )
        controller.stop()


if __name__ == "__main__":
    main()
