"""WorkQueue: dedup, one worker per key, delays, backoff, shutdown, statistics and metrics.

Every test runs on a virtual-time loop (tests/unit/vtime.py): delays are exact and free.
"""

from __future__ import annotations

import asyncio
import random

import pytest
import vtime
from prometheus_client import CollectorRegistry

from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.ratelimit import ItemExponentialFailureRateLimiter
from jobcontroller.runtime.workqueue import QueueShutDown, WorkQueue


def backoff_queue(*, base: float = 1.0, max_delay: float = 1000.0) -> WorkQueue[str]:
    """A queue with only per-item backoff, so delays are predictable."""
    limiter = ItemExponentialFailureRateLimiter[str](base=base, max_delay=max_delay)
    return WorkQueue[str](name="test", rate_limiter=limiter)


async def nothing_ready(queue: WorkQueue[str], *, within: float = 3600.0) -> bool:
    """True if no key can be taken within ``within`` (virtual) seconds."""
    try:
        key = await asyncio.wait_for(queue.get(), timeout=within)
    except TimeoutError:
        return True
    queue.done(key)
    return False


def test_duplicate_adds_are_coalesced() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        for key in ["ns/a", "ns/a", "ns/b", "ns/a"]:
            queue.add(key)
        assert len(queue) == 2
        assert [await queue.get(), await queue.get()] == ["ns/a", "ns/b"]
        stats = queue.statistics()
        assert (stats.adds_total, stats.coalesced_total, stats.gets_total) == (2, 2, 2)

    vtime.run(main())


def test_key_added_while_processing_waits_for_done() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        queue.add("ns/a")
        key = await queue.get()
        queue.add("ns/a")
        queue.add("ns/a")
        assert len(queue) == 0
        assert queue.statistics().requeued_on_done == 1
        assert await nothing_ready(queue)
        queue.done(key)
        assert len(queue) == 1
        assert await queue.get() == "ns/a"
        queue.done("ns/a")
        assert await nothing_ready(queue)

    vtime.run(main())


def test_done_without_readd_does_not_requeue_and_double_done_fails() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        queue.add("ns/a")
        queue.done(await queue.get())
        assert len(queue) == 0
        with pytest.raises(ValueError, match="not processing"):
            queue.done("ns/a")

    vtime.run(main())


def test_concurrent_workers_never_share_a_key_and_see_every_add() -> None:
    rng = random.Random(7)
    keys = [f"ns/job-{i}" for i in range(5)]

    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str]()
        active: set[str] = set()
        last_add: dict[str, float] = {}
        last_start: dict[str, float] = {}
        overlaps: list[str] = []

        async def worker() -> None:
            while True:
                try:
                    key = await queue.get()
                except QueueShutDown:
                    return
                if key in active:
                    overlaps.append(key)
                active.add(key)
                last_start[key] = loop.time()
                await asyncio.sleep(rng.uniform(0, 0.05))
                active.discard(key)
                queue.done(key)

        workers = [asyncio.create_task(worker()) for _ in range(8)]
        for _ in range(2000):
            key = rng.choice(keys)
            queue.add(key)
            last_add[key] = loop.time()
            await asyncio.sleep(rng.uniform(0, 0.01))
        await asyncio.sleep(1)  # let the workers finish
        await queue.shutdown_with_drain()
        await asyncio.gather(*workers)

        assert overlaps == []
        # Coalescing may skip intermediate adds, but never the last one of a key.
        for key, added in last_add.items():
            assert last_start[key] >= added
        stats = queue.statistics()
        assert stats.gets_total < 2000 and stats.coalesced_total > 0

    vtime.run(main())


def test_add_after_orders_by_ready_time() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str]()
        start = loop.time()
        queue.add_after("ns/c", 3)
        queue.add_after("ns/a", 1)
        queue.add_after("ns/b", 2)
        assert (len(queue), queue.statistics().waiting_delayed) == (0, 3)
        got = []
        for _ in range(3):
            key = await queue.get()
            got.append((key, loop.time() - start))
            queue.done(key)
        assert got == [("ns/a", 1), ("ns/b", 2), ("ns/c", 3)]
        assert queue.statistics().waiting_delayed == 0

    vtime.run(main())


def test_add_after_only_moves_sooner() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str]()
        start = loop.time()
        queue.add_after("ns/a", 10)
        queue.add_after("ns/a", 20)  # later: ignored
        assert queue.statistics().waiting_delayed == 1
        assert await queue.get() == "ns/a"
        assert loop.time() - start == 10
        queue.done("ns/a")

        queue.add_after("ns/a", 10)
        queue.add_after("ns/a", 5)  # sooner: replaces the 10 s timer
        assert queue.statistics().waiting_delayed == 1
        assert await queue.get() == "ns/a"
        assert loop.time() - start == 15
        queue.done("ns/a")
        assert await nothing_ready(queue)  # neither the 10 s nor the 20 s request comes back

    vtime.run(main())


def test_add_after_zero_or_negative_adds_now() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        queue.add_after("ns/a", 0)
        queue.add_after("ns/b", -1)
        assert len(queue) == 2
        assert queue.statistics().waiting_delayed == 0

    vtime.run(main())


def test_plain_add_keeps_a_pending_delayed_add() -> None:
    """As client-go: a RequeueAfter (say, a TTL) must survive an unrelated event."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str]()
        start = loop.time()
        queue.add_after("ns/a", 30)
        queue.add("ns/a")
        queue.done(await queue.get())
        assert loop.time() == start
        assert await queue.get() == "ns/a"
        assert loop.time() - start == 30

    vtime.run(main())


def test_rate_limited_backoff_doubles_and_forget_resets() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str](name="q", rate_limiter=ItemExponentialFailureRateLimiter[str]())
        queue.add("ns/a")
        waits = []
        for _ in range(4):
            key = await queue.get()
            failed_at = loop.time()
            queue.add_rate_limited(key)  # the reconcile failed
            queue.done(key)
            await queue.get()
            waits.append(loop.time() - failed_at)
            queue.done(key)
            queue.add(key)
        assert waits == pytest.approx([0.005, 0.01, 0.02, 0.04])
        assert queue.num_requeues("ns/a") == 4
        assert queue.statistics().retries_total == 4
        queue.forget("ns/a")
        assert queue.num_requeues("ns/a") == 0

    vtime.run(main())


def test_rate_limited_backoff_is_capped() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = backoff_queue(base=1.0, max_delay=8.0)
        waits = []
        for _ in range(6):
            before = loop.time()
            queue.add_rate_limited("ns/a")
            queue.done(await queue.get())
            waits.append(loop.time() - before)
        assert waits == [1, 2, 4, 8, 8, 8]

    vtime.run(main())


def test_default_limiter_spaces_a_retry_storm_at_ten_per_second() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        loop = asyncio.get_running_loop()
        start = loop.time()
        for i in range(110):
            queue.add_rate_limited(f"ns/job-{i}")
        ready = []
        for _ in range(110):
            queue.done(await queue.get())
            ready.append(loop.time() - start)
        # 100 keys after their 5 ms backoff, then the bucket's 10 per second.
        assert ready[:100] == pytest.approx([0.005] * 100, abs=1e-6)
        assert ready[100:] == pytest.approx([0.1 * n for n in range(1, 11)], rel=1e-3)

    vtime.run(main())


def test_shutdown_wakes_getters_and_drops_pending_work() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        queue.add("ns/held")
        held = await queue.get()
        idle = [asyncio.create_task(queue.get()) for _ in range(2)]
        await asyncio.sleep(0)
        assert queue.statistics().idle_workers == 2
        queue.add("ns/held")  # re-added while processing
        queue.add_after("ns/later", 5)
        queue.add_rate_limited("ns/failed")
        queue.shutdown()
        for task in idle:
            with pytest.raises(QueueShutDown):
                await task
        stats = queue.statistics()
        assert (stats.depth, stats.waiting_delayed, stats.processing) == (0, 0, 1)
        assert stats.shutting_down
        queue.add("ns/new")
        queue.add_after("ns/new", 1)
        queue.done(held)  # still allowed, but no longer re-queues
        assert len(queue) == 0
        with pytest.raises(QueueShutDown):
            await queue.get()
        await asyncio.sleep(10)  # the cancelled timers must not fire
        assert len(queue) == 0

    vtime.run(main())


def test_shutdown_with_drain_waits_for_keys_in_flight() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str]()
        for key in ["ns/a", "ns/b"]:
            queue.add(key)
        a, b = await queue.get(), await queue.get()
        drain = asyncio.create_task(queue.shutdown_with_drain())
        loop.call_later(2, queue.done, a)
        loop.call_later(5, queue.done, b)
        start = loop.time()
        await drain
        assert loop.time() - start == 5
        assert queue.statistics().processing == 0

    vtime.run(main())


def test_shutdown_with_drain_returns_at_once_when_idle() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        queue = WorkQueue[str]()
        queue.add("ns/queued")  # dropped, not drained
        start = loop.time()
        await queue.shutdown_with_drain()
        assert loop.time() == start

    vtime.run(main())


def test_cancelled_getter_passes_its_wakeup_on() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        first = asyncio.create_task(queue.get())
        second = asyncio.create_task(queue.get())
        await asyncio.sleep(0)
        queue.add("ns/a")  # wakes `first`...
        first.cancel()  # ...which leaves before taking the key
        assert await asyncio.wait_for(second, timeout=1) == "ns/a"
        assert first.cancelled()

    vtime.run(main())


def test_statistics_track_running_processors() -> None:
    async def main() -> None:
        queue = WorkQueue[str]()
        assert queue.statistics().longest_running_processor_seconds == 0
        queue.add("ns/a")
        queue.add("ns/b")
        await queue.get()
        await asyncio.sleep(5)
        await queue.get()
        await asyncio.sleep(2)
        stats = queue.statistics()
        assert stats.longest_running_processor_seconds == 7
        assert stats.unfinished_work_seconds == 9
        assert (stats.processing, stats.depth) == (2, 0)

    vtime.run(main())


def test_metrics_are_reported_under_the_queue_name() -> None:
    metrics = Metrics(CollectorRegistry())

    def sample(name: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"name": "jobs", "controller": "jobs"})

    async def main() -> None:
        limiter = ItemExponentialFailureRateLimiter[str](base=1.0)
        queue = WorkQueue[str](name="jobs", metrics=metrics, rate_limiter=limiter)
        queue.add("ns/a")
        queue.add("ns/b")
        queue.add("ns/a")
        assert sample("workqueue_depth") == 2
        await asyncio.sleep(3)
        key = await queue.get()
        assert sample("workqueue_depth") == 1
        await asyncio.sleep(4)
        queue.add_rate_limited(key)
        queue.done(key)

    vtime.run(main())
    assert sample("workqueue_adds_total") == 2
    assert sample("workqueue_retries_total") == 1
    assert sample("workqueue_queue_duration_seconds_count") == 1
    assert sample("workqueue_queue_duration_seconds_sum") == 3
    assert sample("workqueue_work_duration_seconds_sum") == 4


def test_queue_is_bound_to_one_loop() -> None:
    queue = WorkQueue[str]()

    async def use() -> None:
        queue.add_after("ns/a", 1)

    vtime.run(use())
    with pytest.raises(RuntimeError, match="second event loop"):
        vtime.run(use())
