"""Informer throughput and store memory against a real kube-apiserver.

Starts its own control plane (etcd + kube-apiserver), then:

1. watch throughput: an informer is synced on an empty namespace, N ConfigMaps are created
   concurrently, and we time until the informer's handlers have seen all N (events/second;
   bounded by the create rate);
2. drain throughput: the informer is held while N more are created, then released (the rate at
   which it applies a backlog);
3. list throughput: a fresh informer lists the 2N objects from scratch (objects/second);
4. store memory: bytes per stored object (tracemalloc), with and without the default
   ``strip_managed_fields`` transform.

Usage: ``uv run python bench/bench_informer.py [--count 2000] [--concurrency 50]``
"""

from __future__ import annotations

import argparse
import asyncio
import time
import tracemalloc
from typing import Any

from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.kube import CONFIGMAPS, NAMESPACES, KubeApi
from jobcontroller.testing.controlplane import ControlPlane

NAMESPACE = "bench"


def configmap(i: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"cm-{i:05d}",
            "labels": {"app": "bench", "training.kubeflow.org/job-name": f"job-{i // 8}"},
            "annotations": {"bench/index": str(i)},
        },
        "data": {"config": "x" * 200},
    }


async def create_all(api: KubeApi, *, count: int, concurrency: int) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(count):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            i = queue.get_nowait()
            await api.create(CONFIGMAPS, configmap(i), namespace=NAMESPACE)

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - started


async def watch_throughput(api: KubeApi, *, count: int, concurrency: int) -> None:
    informer = Informer(api, CONFIGMAPS, namespace=NAMESPACE)
    seen = 0
    all_seen = asyncio.Event()

    def on_add(obj: dict[str, Any]) -> None:
        nonlocal seen
        seen += 1
        if seen == count:
            all_seen.set()

    informer.add_handlers(on_add=on_add)
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()
    started = time.perf_counter()
    create_seconds = await create_all(api, count=count, concurrency=concurrency)
    await asyncio.wait_for(all_seen.wait(), 300)
    total = time.perf_counter() - started
    informer.stop()
    await task
    print(f"create:  {count} ConfigMaps in {create_seconds:.2f}s ({count / create_seconds:.0f}/s)")
    print(
        f"watch:   informer saw all {count} in {total:.2f}s after the first create "
        f"({count / total:.0f} events/s; lag behind the last create {total - create_seconds:.3f}s)"
    )


async def drain_throughput(api: KubeApi, *, count: int, concurrency: int) -> None:
    """Hold the informer in a handler while N more objects are created, then time the catch-up.

    The server may drop the held watch as too slow; the informer then resumes from its last
    resourceVersion and the watch cache replays the rest, so this is the rate at which the
    informer can apply a backlog (decode, transform, store, indexes, handlers).
    """
    informer = Informer(api, CONFIGMAPS, namespace=NAMESPACE, label_selector="phase=drain")
    gate = asyncio.Event()
    seen = 0
    all_seen = asyncio.Event()

    async def on_add(obj: dict[str, Any]) -> None:
        nonlocal seen
        await gate.wait()
        seen += 1
        if seen == count:
            all_seen.set()

    informer.add_handlers(on_add=on_add)
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()

    async def create(i: int) -> None:
        body = configmap(i)
        body["metadata"]["name"] = f"drain-{i:05d}"
        body["metadata"]["labels"]["phase"] = "drain"
        await api.create(CONFIGMAPS, body, namespace=NAMESPACE)

    for start in range(0, count, concurrency):
        await asyncio.gather(*(create(i) for i in range(start, min(count, start + concurrency))))
    released = time.perf_counter()
    gate.set()
    await asyncio.wait_for(all_seen.wait(), 300)
    total = time.perf_counter() - released
    informer.stop()
    await task
    stats = informer.statistics()
    print(
        f"drain:   a backlog of {count} events applied in {total:.2f}s ({count / total:.0f} "
        f"events/s; {stats.watch_restarts} watch restarts, {stats.lists} lists)"
    )


async def list_throughput(api: KubeApi, *, count: int) -> None:
    informer = Informer(api, CONFIGMAPS, namespace=NAMESPACE)
    task = asyncio.create_task(informer.run())
    started = time.perf_counter()
    await informer.wait_synced()
    elapsed = time.perf_counter() - started
    informer.stop()
    await task
    objects = len(informer.store)
    print(
        f"list:    initial sync of {objects} objects in {elapsed:.2f}s ({objects / elapsed:.0f}/s)"
    )


async def store_bytes_per_object(api: KubeApi, *, strip: bool) -> float:
    kwargs: dict[str, Any] = {} if strip else {"transform": None}
    informer = Informer(api, CONFIGMAPS, namespace=NAMESPACE, **kwargs)
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    task = asyncio.create_task(informer.run())
    await informer.wait_synced()
    informer.stop()
    await task
    after = tracemalloc.take_snapshot()
    tracemalloc.stop()
    # Only what is still referenced after the sync: the store and its indexes.
    grown = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
    return grown / max(1, len(informer.store))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    args = parser.parse_args()

    plane = ControlPlane()
    print("starting etcd + kube-apiserver ...")
    await asyncio.to_thread(plane.start)
    try:
        api = await KubeApi.from_config(kubeconfig=str(plane.kubeconfig), qps=5000, burst=5000)
        async with api:
            await api.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
            await watch_throughput(api, count=args.count, concurrency=args.concurrency)
            await drain_throughput(api, count=args.count, concurrency=args.concurrency)
            await list_throughput(api, count=args.count)
            stripped = await store_bytes_per_object(api, strip=True)
            raw = await store_bytes_per_object(api, strip=False)
            print(
                f"memory:  {stripped:.0f} B/object in the store with strip_managed_fields, "
                f"{raw:.0f} B/object without ({1 - stripped / raw:.0%} saved)"
            )
    finally:
        await asyncio.to_thread(plane.stop)


if __name__ == "__main__":
    asyncio.run(main())
