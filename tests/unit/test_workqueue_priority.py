"""WorkQueue priorities: levels served highest first, FIFO within one, dedup across levels, a
delayed add's priority kept, no starvation of a lower level, and the metrics still counting keys.

Every test runs on a virtual-time loop (tests/unit/vtime.py): delays are exact and free.
"""

from __future__ import annotations

import asyncio

import pytest
import vtime
from prometheus_client import CollectorRegistry

from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.workqueue import LOW, NORMAL, WorkQueue


async def drain(queue: WorkQueue[str]) -> list[str]:
    """Every key ready now, in the order workers would get them (each done at once)."""
    out = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        out.append(key)
    return out


def test_higher_level_first_and_fifo_within_a_level() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=100)
        for key in ["new/1", "new/2"]:
            queue.add(key, priority=LOW)
        queue.add("started/1")
        queue.add("new/3", priority=LOW)
        queue.add("started/2", priority=NORMAL)
        queue.add("urgent", priority=5)
        assert await drain(queue) == ["urgent", "started/1", "started/2", "new/1", "new/2", "new/3"]

    vtime.run(main())


def test_raising_a_queued_key_moves_it_to_the_end_of_its_new_level_once() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=100)
        for key in ["a", "b", "c"]:
            queue.add(key, priority=LOW)
        queue.add("x")
        queue.add("b")  # b's children changed: it joins the normal level, behind x
        queue.add("b", priority=LOW)  # a lower add changes nothing
        assert len(queue) == 4
        stats = queue.statistics()
        assert (stats.adds_total, stats.coalesced_total) == (4, 2)
        assert stats.depth_by_priority == ((NORMAL, 2), (LOW, 2))
        assert await drain(queue) == ["x", "b", "a", "c"]
        assert len(queue) == 0

    vtime.run(main())


def test_a_key_added_higher_while_held_is_queued_at_that_level_on_done() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=100)
        queue.add("a", priority=LOW)
        key, priority = await queue.get_with_priority()
        assert (key, priority) == ("a", LOW)
        queue.add("b", priority=LOW)
        queue.add("a", priority=LOW)
        queue.add("a")  # its pods were created while its first pass ran
        assert len(queue) == 1
        queue.done("a")
        assert await queue.get_with_priority() == ("a", NORMAL)
        queue.done("a")
        assert await drain(queue) == ["b"]

    vtime.run(main())


def test_a_delayed_add_keeps_the_higher_priority_and_the_sooner_time() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=100)
        queue.add("early", priority=LOW)
        queue.add_after("a", 2, priority=LOW)
        queue.add_after("a", 5)  # later, but normal: a fires at 2 as normal
        queue.add_after("b", 3)
        queue.add_after("b", 1, priority=LOW)  # sooner, and keeps b normal
        await asyncio.sleep(2.5)
        assert await drain(queue) == ["b", "a", "early"]
        queue.add_rate_limited("c", priority=LOW)
        queue.add("d", priority=LOW)
        await asyncio.sleep(1)
        assert await drain(queue) == ["d", "c"]

    vtime.run(main())


def test_a_stream_of_changes_cannot_starve_new_keys() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=3)
        queue.add("new/1", priority=LOW)
        queue.add("new/2", priority=LOW)
        served = []
        for i in range(12):
            queue.add(f"started/{i}")  # a change arrives before every get
            key = await queue.get()
            queue.done(key)
            served.append(key)
        # One get in limit + 1 goes to the key that waited longest.
        assert served.index("new/1") == 3
        assert served.index("new/2") == 7
        assert [k for k in served if k.startswith("started")] == [f"started/{i}" for i in range(10)]

    vtime.run(main())


def test_an_idle_lower_level_does_not_count_as_passed_over() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=2)
        for i in range(5):
            queue.add(f"started/{i}")
        assert len(await drain(queue)) == 5
        queue.add("new/1", priority=LOW)
        queue.add("started/5")
        queue.add("started/6")
        assert await drain(queue) == ["started/5", "started/6", "new/1"]

    vtime.run(main())


def test_many_moves_keep_order_and_size() -> None:
    async def main() -> None:
        queue = WorkQueue[str](passed_over_limit=10_000)
        keys = [f"k/{i}" for i in range(50)]
        for _ in range(20):  # each round: every key queued low, then raised, then taken
            for key in keys:
                queue.add(key, priority=LOW)
            for key in reversed(keys):
                queue.add(key, priority=1)
            queue.add("last", priority=LOW)
            assert len(queue) == 51
            assert await drain(queue) == [*reversed(keys), "last"]
        # A key raised level by level leaves an entry per level behind until compacted.
        queue.add("b", priority=LOW)
        for priority in range(1, 1000):
            queue.add("a", priority=priority)
        entries = sum(len(level) for level in queue._levels.values())  # bounded memory
        assert entries < 100
        assert await drain(queue) == ["a", "b"]

    vtime.run(main())


def test_depth_metric_counts_keys_not_moves() -> None:
    metrics = Metrics(CollectorRegistry())

    def sample(name: str) -> float | None:
        return metrics.registry.get_sample_value(name, {"name": "jobs", "controller": "jobs"})

    async def main() -> None:
        queue = WorkQueue[str](name="jobs", metrics=metrics)
        queue.add("a", priority=LOW)
        queue.add("b", priority=LOW)
        queue.add("a")
        assert sample("workqueue_depth") == 2
        await asyncio.sleep(3)
        assert await queue.get() == "a"
        assert sample("workqueue_depth") == 1
        queue.done("a")

    vtime.run(main())
    assert sample("workqueue_adds_total") == 2
    # The queue duration runs from the first add, not from the move.
    assert sample("workqueue_queue_duration_seconds_sum") == 3


def test_passed_over_limit_must_be_positive() -> None:
    with pytest.raises(ValueError, match="passed_over_limit"):
        WorkQueue[str](passed_over_limit=0)
