"""Work queue throughput: add+get+done cycles per second on a real asyncio loop.

Run with ``uv run python bench/bench_workqueue.py``; takes a few seconds. Numbers only, no
assertions: compare them between changes on the same machine.

Scenarios:
* unique keys: every add is a new key, so every add costs one get+done (pure queue overhead);
* heavy duplicates: a producer adds keys from a small set much faster than workers finish them,
  as an informer does when many pods of few jobs change; most adds coalesce;
* delayed: add_after with small random delays, i.e. one loop timer per key;
* each with and without Prometheus metrics, since every add/get/done touches them.

The "reconcile" is ``await asyncio.sleep(0)``: one loop turn, so workers interleave as real
reconciles do, without measuring anything but the queue and the loop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry

from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.workqueue import QueueShutDown, WorkQueue


@dataclass
class Result:
    adds: int
    reconciles: int
    seconds: float


def _idle(queue: WorkQueue[str]) -> bool:
    if len(queue):
        return False
    stats = queue.statistics()
    return stats.depth == 0 and stats.processing == 0 and stats.waiting_delayed == 0


async def _worker(
    queue: WorkQueue[str], counter: list[int], produced: asyncio.Event, idle: asyncio.Event
) -> None:
    while True:
        try:
            key = await queue.get()
        except QueueShutDown:
            return
        await asyncio.sleep(0)
        counter[0] += 1
        queue.done(key)
        if produced.is_set() and _idle(queue):
            idle.set()


async def _run(*, workers: int, keys: list[str], adds: int, delayed: bool, metrics: bool) -> Result:
    queue = WorkQueue[str](name="bench", metrics=Metrics(CollectorRegistry()) if metrics else None)
    counter = [0]
    rng = random.Random(1)
    produced, idle = asyncio.Event(), asyncio.Event()
    tasks = [asyncio.create_task(_worker(queue, counter, produced, idle)) for _ in range(workers)]
    start = time.perf_counter()
    for i in range(adds):
        key = keys[i % len(keys)]
        if delayed:
            queue.add_after(key, rng.uniform(0, 0.01))
        else:
            queue.add(key)
        if i % 100 == 99:  # let workers run between bursts, as informer events arrive
            await asyncio.sleep(0)
    produced.set()
    if not _idle(queue):
        await idle.wait()
    seconds = time.perf_counter() - start
    await queue.shutdown_with_drain()
    await asyncio.gather(*tasks)
    return Result(adds=adds, reconciles=counter[0], seconds=seconds)


def main() -> None:
    # The queue logs its shutdown at debug level; keep the table readable.
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    unique = [f"ns/job-{i}" for i in range(50_000)]
    few = [f"ns/job-{i}" for i in range(100)]
    cases = [
        ("unique keys", 1, unique, 50_000, False),
        ("unique keys", 8, unique, 50_000, False),
        ("unique keys", 64, unique, 50_000, False),
        ("100 keys, 2000x dup", 8, few, 200_000, False),
        ("100 keys, 2000x dup", 64, few, 200_000, False),
        ("add_after 0-10 ms", 8, unique[:20_000], 20_000, True),
    ]
    header = f"{'scenario':<22}{'workers':>8}{'metrics':>8}{'adds/s':>12}{'reconciles/s':>14}"
    print(header + f"{'coalesced':>11}")
    for label, workers, keys, adds, delayed in cases:
        for metrics in (False, True):
            result = asyncio.run(
                _run(workers=workers, keys=keys, adds=adds, delayed=delayed, metrics=metrics)
            )
            coalesced = 1 - result.reconciles / result.adds
            print(
                f"{label:<22}{workers:>8}{'on' if metrics else 'off':>8}"
                f"{result.adds / result.seconds:>12,.0f}"
                f"{result.reconciles / result.seconds:>14,.0f}{coalesced:>11.1%}"
            )


if __name__ == "__main__":
    main()
