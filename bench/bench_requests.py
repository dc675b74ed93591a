"""CPU per API request of :class:`KubeApi`, against a real kube-apiserver.

The operator's CPU per job is mostly its request path: encode a body, send it over TLS, read
and decode the answer, then decode the watch events the write causes. This drives exactly that
path, nothing else, so a change to it shows in the figures: one watch on the namespace's pods
(decoded line by line, as the informers' watches are), then per round ``--pods`` pods created
(bodies the size of a TFJob worker's: env, labels, owner reference), each one's status merge-
patched, one list of them all, and each deleted; until the watch has seen every event.

CPU is the process's (``time.process_time()``: user + system of this process only), so the API
server and etcd on the same cores, and other load on the machine, do not count; each round's
CPU is divided by its requests (``creates + patches + 1 list + deletes``), and the median over
``--rounds`` rounds (after one warm-up) is printed. ``--loop asyncio`` runs the standard event
loop instead of the operator's.

Usage: ``uv run python bench/bench_requests.py [--pods 200] [--rounds 7] [--json PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from jobcontroller.runtime.kube import NAMESPACES, PODS, KubeApi
from jobcontroller.testing.controlplane import ControlPlane

NS = "bench"
CONCURRENCY = 20


def pod(name: str) -> dict[str, Any]:
    hosts = [f"job-worker-{i}.{NS}.svc:2222" for i in range(8)]
    tf_config = json.dumps({"cluster": {"worker": hosts}, "task": {"type": "worker", "index": 0}})
    return {
        "metadata": {
            "name": name,
            "labels": {
                "training.kubeflow.org/job-name": "job",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
                "training.kubeflow.org/operator-name": "tfjob-controller",
            },
            "annotations": {"bench/seq": name},
        },
        "spec": {
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "tensorflow",
                    "image": "tensorflow/tensorflow:2.16.1",
                    "command": ["python", "/opt/model.py", "--steps=1000"],
                    "env": [{"name": "TF_CONFIG", "value": tf_config}]
                    + [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(6)],
                    "ports": [{"name": "tfjob-port", "containerPort": 2222}],
                    "resources": {"limits": {"cpu": "1", "memory": "1Gi"}},
                }
            ],
        },
    }


async def bounded(calls: list[Callable[[], Coroutine[Any, Any, Any]]]) -> None:
    queue = list(reversed(calls))

    async def worker() -> None:
        while queue:
            await queue.pop()()

    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def one_round(api: KubeApi, prefix: str, count: int) -> tuple[float, int, int]:
    """(CPU seconds, requests, watch events) of one round."""
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    _, rv = await api.list(PODS, namespace=NS, limit=1)
    expected = 4 * count  # ADDED, MODIFIED (status), MODIFIED (deletion), DELETED
    seen = 0
    all_seen = asyncio.Event()

    async def watch() -> None:
        nonlocal seen
        async for event in api.watch(
            PODS, namespace=NS, resource_version=rv, timeout_seconds=300, inactivity_timeout=120
        ):
            if event.get("type") != "BOOKMARK" and (
                event["object"]["metadata"]["name"].startswith(prefix)
            ):
                seen += 1
                if seen >= expected:
                    all_seen.set()
                    return

    status = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    started = time.process_time()
    watcher = asyncio.create_task(watch())

    def create(n: str) -> Callable[[], Coroutine[Any, Any, Any]]:
        return lambda: api.create(PODS, pod(n), namespace=NS)

    def patch(n: str) -> Callable[[], Coroutine[Any, Any, Any]]:
        return lambda: api.merge_patch(PODS, n, status, namespace=NS, subresource="status")

    def delete(n: str) -> Callable[[], Coroutine[Any, Any, Any]]:
        return lambda: api.delete(PODS, n, namespace=NS, grace_period_seconds=0)

    await bounded([create(n) for n in names])
    await bounded([patch(n) for n in names])
    await api.list(PODS, namespace=NS)
    await bounded([delete(n) for n in names])
    await asyncio.wait_for(all_seen.wait(), 120)
    await watcher
    return time.process_time() - started, 3 * count + 1, seen


async def bench(kubeconfig: Path, count: int, rounds: int) -> list[tuple[float, int, int]]:
    async with await KubeApi.from_config(kubeconfig=str(kubeconfig), qps=0) as api:
        await api.create(NAMESPACES, {"metadata": {"name": NS}})
        await one_round(api, "warm", min(count, 50))
        return [await one_round(api, f"r{r}", count) for r in range(rounds)]


def run(coro: Coroutine[Any, Any, Any], loop: str) -> Any:
    if loop == "asyncio":
        return asyncio.run(coro)
    from jobcontroller.runtime.runner import run_loop

    return run_loop(coro)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--loop", choices=["operator", "asyncio"], default="operator")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    with ControlPlane() as plane:
        results = run(bench(plane.kubeconfig, args.pods, args.rounds), args.loop)
    per_request = [cpu * 1000 / requests for cpu, requests, _ in results]
    for r, (cpu, requests, events) in enumerate(results):
        print(f"round {r}: {cpu:.3f} s CPU, {requests} requests, {events} watch events, ", end="")
        print(f"{per_request[r]:.3f} ms CPU per request", flush=True)
    median = statistics.median(per_request)
    print(f"median: {median:.3f} ms CPU per request (with its watch events)")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "label": args.label,
                    "loop": args.loop,
                    "pods_per_round": args.pods,
                    "ms_cpu_per_request": [round(x, 3) for x in per_request],
                    "median_ms_cpu_per_request": round(median, 3),
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
