"""Rate limiters: per-item backoff, the global bucket, their max, and the awaitable TokenBucket."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
import uvloop
import vtime

from jobcontroller.runtime.ratelimit import (
    MAX_TICK,
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    Slots,
    TokenBucket,
    default_controller_rate_limiter,
)


class TestItemExponential:
    def test_doubles_from_base_per_failure(self) -> None:
        limiter = ItemExponentialFailureRateLimiter[str]()
        delays = [limiter.when("ns/a") for _ in range(5)]
        assert delays == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
        assert limiter.num_requeues("ns/a") == 5

    def test_caps_at_max_delay(self) -> None:
        limiter = ItemExponentialFailureRateLimiter[str](base=0.005, max_delay=1000.0)
        delays = [limiter.when("k") for _ in range(25)]
        # 0.005 * 2**17 = 655 s is the last uncapped step; the 19th failure hits the cap.
        assert delays[17] == pytest.approx(655.36)
        assert delays[18:] == [1000.0] * 7

    def test_many_failures_do_not_overflow(self) -> None:
        limiter = ItemExponentialFailureRateLimiter[str](base=1.0, max_delay=60.0)
        for _ in range(1100):
            last = limiter.when("k")
        assert last == 60.0
        assert limiter.num_requeues("k") == 1100

    def test_items_are_independent_and_forget_resets(self) -> None:
        limiter = ItemExponentialFailureRateLimiter[str](base=1.0, max_delay=100.0)
        assert [limiter.when("a") for _ in range(3)] == [1.0, 2.0, 4.0]
        assert limiter.when("b") == 1.0
        limiter.forget("a")
        assert limiter.num_requeues("a") == 0
        assert limiter.when("a") == 1.0
        assert limiter.num_requeues("b") == 1

    def test_rejects_bad_parameters(self) -> None:
        with pytest.raises(ValueError):
            ItemExponentialFailureRateLimiter[str](base=0.0)
        with pytest.raises(ValueError):
            ItemExponentialFailureRateLimiter[str](base=2.0, max_delay=1.0)


class TestBucket:
    def test_burst_then_one_over_qps_spacing(self) -> None:
        clock = vtime.FakeClock()
        limiter = BucketRateLimiter[str](qps=10.0, burst=100, clock=clock)
        burst = [limiter.when(f"k{i}") for i in range(100)]
        assert burst == [0.0] * 100
        after = [limiter.when(f"x{i}") for i in range(3)]
        assert after == pytest.approx([0.1, 0.2, 0.3])

    def test_refills_at_qps_and_never_beyond_burst(self) -> None:
        clock = vtime.FakeClock()
        limiter = BucketRateLimiter[str](qps=10.0, burst=5, clock=clock)
        for _ in range(5):
            limiter.when("k")
        clock.advance(0.3)  # three tokens back
        assert [limiter.when("k") for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.1])
        clock.advance(3600)
        assert [limiter.when("k") for _ in range(6)] == pytest.approx([0, 0, 0, 0, 0, 0.1])

    def test_is_global_not_per_item(self) -> None:
        limiter = BucketRateLimiter[str](qps=1.0, burst=1, clock=vtime.FakeClock())
        assert limiter.when("a") == 0.0
        assert limiter.when("b") == pytest.approx(1.0)
        limiter.forget("b")
        assert limiter.num_requeues("b") == 0
        assert limiter.when("c") == pytest.approx(2.0)

    def test_rejects_bad_parameters(self) -> None:
        with pytest.raises(ValueError):
            BucketRateLimiter[str](qps=0.0)
        with pytest.raises(ValueError):
            BucketRateLimiter[str](burst=0)


class TestMaxOf:
    def test_backoff_until_bucket_runs_dry_then_bucket_spacing(self) -> None:
        clock = vtime.FakeClock()
        limiter = default_controller_rate_limiter(clock=clock)
        first = [limiter.when(f"ns/job-{i}") for i in range(100)]
        assert first == pytest.approx([0.005] * 100)
        # The bucket is empty now: new items wait for tokens even though their backoff is 5 ms.
        assert [limiter.when(f"ns/late-{i}") for i in range(2)] == pytest.approx([0.1, 0.2])

    def test_every_limiter_is_charged_and_the_largest_wins(self) -> None:
        clock = vtime.FakeClock()
        bucket = BucketRateLimiter[str](qps=1.0, burst=3, clock=clock)
        limiter = MaxOfRateLimiter[str](
            ItemExponentialFailureRateLimiter(base=1.0, max_delay=100.0), bucket
        )
        assert [limiter.when("k") for _ in range(4)] == pytest.approx([1.0, 2.0, 4.0, 8.0])
        # Four tokens were taken although backoff always won: the bucket is in debt by one.
        assert bucket.when("other") == pytest.approx(2.0)

    def test_num_requeues_is_max_and_forget_forgets_everywhere(self) -> None:
        slow = ItemExponentialFailureRateLimiter[str](base=1.0, max_delay=100.0)
        fast = ItemExponentialFailureRateLimiter[str](base=0.1, max_delay=100.0)
        limiter = MaxOfRateLimiter[str](slow, fast)
        fast.when("k")
        limiter.when("k")
        assert limiter.num_requeues("k") == 2
        limiter.forget("k")
        assert (slow.num_requeues("k"), fast.num_requeues("k")) == (0, 0)
        assert limiter.when("k") == 1.0

    def test_needs_a_limiter(self) -> None:
        with pytest.raises(ValueError):
            MaxOfRateLimiter[str]()


class TestTokenBucket:
    def test_burst_is_free_then_waits_are_spaced_by_one_over_qps(self) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            bucket = TokenBucket(qps=2.0, burst=3, clock=loop.time)
            start = loop.time()
            finished: list[float] = []

            async def call() -> float:
                waited = await bucket.acquire()
                finished.append(loop.time() - start)
                return waited

            waits = await asyncio.gather(*(call() for _ in range(5)))
            assert waits == pytest.approx([0.0, 0.0, 0.0, 0.5, 1.0])
            assert finished == pytest.approx([0.0, 0.0, 0.0, 0.5, 1.0])
            stats = bucket.statistics()
            assert stats.acquired_total == 5
            assert stats.delayed_total == 2
            assert stats.wait_seconds_total == pytest.approx(1.5)
            assert stats.waiting == 0
            assert stats.tokens == pytest.approx(0.0)

        vtime.run(main())

    def test_buckets_of_one_qps_wake_their_waiters_on_the_same_ticks(self) -> None:
        """The main client's and the Events client's buckets, out of phase by 13 ms: their
        waiters wake together, on ticks of 1/qps, never before their reservation, still one
        token interval apart."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            start = loop.time()  # a multiple of 50 ms: vtime.START
            woke: dict[str, list[float]] = {"main": [], "events": []}

            async def saturate(name: str, bucket: TokenBucket) -> None:
                async def call() -> None:
                    await bucket.acquire()
                    woke[name].append(round(loop.time() - start, 6))

                await asyncio.gather(*(call() for _ in range(4)))

            main_bucket = TokenBucket(qps=20.0, burst=1, clock=loop.time)
            events_bucket = TokenBucket(qps=20.0, burst=1, clock=loop.time)
            first = asyncio.create_task(saturate("main", main_bucket))
            await asyncio.sleep(0.013)
            await saturate("events", events_bucket)
            await first
            # Reserved at 0.05, 0.10, 0.15 and 0.063, 0.113, 0.163.
            assert woke["main"] == [0.0, 0.05, 0.1, 0.15]
            assert woke["events"] == [0.013, 0.1, 0.15, 0.2]

        vtime.run(main())

    def test_a_wait_grows_by_less_than_max_tick_at_a_low_qps(self) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            bucket = TokenBucket(qps=2.0, burst=1, clock=loop.time)
            await asyncio.sleep(0.013)
            assert await bucket.acquire() == 0.0
            waited = await bucket.acquire()  # reserved 0.5 s on, at 0.513: woken at 0.55
            assert waited == pytest.approx(0.537)
            assert 0.5 <= waited < 0.5 + MAX_TICK
            assert bucket.statistics().wait_seconds_total == pytest.approx(0.537)

        vtime.run(main())

    def test_the_skipped_refill_is_charged_so_no_window_exceeds_qps(self) -> None:
        """A wait moved to its tick takes the refill it skips: a caller that comes after the
        moved request gets no earlier room than one token interval after it."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            start = loop.time()
            bucket = TokenBucket(qps=10.0, burst=1, clock=loop.time)
            sent: list[float] = []

            async def send() -> None:
                await bucket.acquire()
                sent.append(round(loop.time() - start, 6))

            await asyncio.sleep(0.013)
            await asyncio.gather(send(), send())  # the second due at 113 ms, sent at 150
            await asyncio.sleep(0.07)
            await send()  # without the charge, the bucket is full again at 213 ms
            assert sent == [0.013, 0.15, 0.25]

        vtime.run(main())

    def test_buckets_on_different_clocks_do_not_share_a_tick(self) -> None:
        """A bucket whose clock runs 13 ms ahead has its ticks 13 ms earlier in the loop's
        time: each of its waiters wakes after its own wait, not on the other bucket's timer
        of the same tick number."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            ours = TokenBucket(qps=20.0, burst=1, clock=loop.time)
            ahead = TokenBucket(qps=20.0, burst=1, clock=lambda: loop.time() + 0.013)
            late: list[float] = []

            async def call(bucket: TokenBucket) -> None:
                asked = loop.time()
                waited = await bucket.acquire()
                late.append(round(loop.time() - asked - waited, 6))

            await asyncio.gather(*(call(ours) for _ in range(3)), *(call(ahead) for _ in range(3)))
            assert late == [0.0] * 6

        vtime.run(main())

    def test_two_buckets_waiters_wake_in_one_turn_of_a_uvloop(self) -> None:
        """In production: uvloop, whose timers round to whole milliseconds, the monotonic
        clock, and QPS 400, whose tick (2.5 ms) is not a whole millisecond. Every tick's
        waiters of both buckets wake in the same turn of the loop."""

        async def main() -> None:
            loop = asyncio.get_running_loop()
            turns = [0]

            def count() -> None:  # once per turn of the loop
                turns[0] += 1
                loop.call_soon(count)

            loop.call_soon(count)
            a, b = TokenBucket(qps=400.0, burst=1), TokenBucket(qps=400.0, burst=1)
            woke: dict[int, list[int]] = {}  # tick: the turn each of its waiters woke in

            async def call(bucket: TokenBucket) -> None:
                asked = time.monotonic()
                waited = await bucket.acquire()
                if waited > 0:
                    woke.setdefault(round((asked + waited) / 0.0025), []).append(turns[0])

            first = asyncio.gather(*(call(a) for _ in range(100)))
            await asyncio.sleep(0.001)
            await asyncio.gather(*(call(b) for _ in range(100)), first)
            shared = [turn for turn in woke.values() if len(turn) == 2]
            assert len(shared) >= 50, woke  # 99 waits each, 1 ms out of phase: 98 ticks shared
            assert all(len(set(turn)) == 1 for turn in woke.values()), woke

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main())

    def test_cancelled_waiter_returns_its_token(self) -> None:
        async def main() -> None:
            loop = asyncio.get_running_loop()
            bucket = TokenBucket(qps=1.0, burst=1, clock=loop.time)
            await bucket.acquire()
            waiter = asyncio.create_task(bucket.acquire())
            await asyncio.sleep(0.25)
            assert bucket.statistics().waiting == 1
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            # Without the refund this caller would queue behind the abandoned reservation (1.75 s).
            assert await bucket.acquire() == pytest.approx(0.75)
            assert bucket.statistics().acquired_total == 2

        vtime.run(main())

    def test_infinite_qps_never_waits(self) -> None:
        async def main() -> None:
            bucket = TokenBucket(qps=math.inf, burst=1)
            waits = [await bucket.acquire() for _ in range(1000)]
            assert set(waits) == {0.0}
            assert bucket.statistics().acquired_total == 1000

        vtime.run(main())


class TestSlots:
    async def test_at_most_n_hold_and_waiters_enter_in_order(self) -> None:
        slots = Slots(2)
        holding, peak, order = 0, 0, []

        async def one(i: int) -> None:
            nonlocal holding, peak
            async with slots:
                holding += 1
                peak = max(peak, holding)
                order.append(i)
                await asyncio.sleep(0)
                await asyncio.sleep(0)
                holding -= 1

        await asyncio.gather(*(one(i) for i in range(20)))
        assert peak == 2
        assert order == list(range(20))
        assert slots.free == 2

    async def test_a_cancelled_waiter_does_not_keep_a_slot(self) -> None:
        slots = Slots(1)
        release = asyncio.Event()

        async def holder() -> None:
            async with slots:
                await release.wait()

        async def waiter() -> None:
            async with slots:
                pass

        h = asyncio.create_task(holder())
        await asyncio.sleep(0)
        cancelled, later = asyncio.create_task(waiter()), asyncio.create_task(waiter())
        await asyncio.sleep(0)
        cancelled.cancel()
        release.set()
        await asyncio.wait_for(asyncio.gather(h, later), 5)
        assert cancelled.cancelled()
        assert slots.free == 1

    async def test_cancelled_after_being_handed_the_slot_passes_it_on(self) -> None:
        slots = Slots(1)
        entered = []

        async def waiter(name: str) -> None:
            async with slots:
                entered.append(name)

        async with slots:
            first = asyncio.create_task(waiter("first"))
            second = asyncio.create_task(waiter("second"))
            await asyncio.sleep(0)
        # The slot was handed to ``first``, which is cancelled before it runs.
        first.cancel()
        # Without passing it on, ``second`` would wait forever.
        await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 5)
        assert entered == ["second"]
        assert slots.free == 1

    def test_refuses_zero(self) -> None:
        with pytest.raises(ValueError):
            Slots(0)


def test_backlog_is_the_wait_a_new_caller_would_have() -> None:
    now = [0.0]
    bucket = TokenBucket(qps=2.0, burst=2, clock=lambda: now[0])
    assert bucket.backlog() == 0.0
    reservoir_waits = [bucket._reservoir.reserve(now[0]) for _ in range(4)]  # 2 free, 2 owed
    assert reservoir_waits == [0.0, 0.0, 0.5, 1.0]
    assert bucket.backlog() == pytest.approx(1.5)  # the next one waits behind both
    now[0] += 1.5
    assert bucket.backlog() == 0.0
    assert TokenBucket(qps=math.inf, burst=1).backlog() == 0.0


def test_backlog_and_spare_can_keep_tokens_in_the_bucket() -> None:
    """``keep``: the wait (and the room) of a caller that must leave that many tokens behind
    (the client's reserve for the requests that start jobs)."""
    now = [0.0]
    bucket = TokenBucket(qps=10.0, burst=6, clock=lambda: now[0])
    assert (bucket.spare(keep=3), bucket.backlog(keep=3)) == (3, 0.0)
    for _ in range(3):
        bucket._reservoir.reserve(now[0])
    # 3 tokens left: free for anyone, but none beyond the 3 kept.
    assert (bucket.spare(), bucket.backlog()) == (3, 0.0)
    assert bucket.spare(keep=3) == 0
    assert bucket.backlog(keep=3) == pytest.approx(0.1)  # one token to refill
    now[0] += 0.1
    assert (bucket.spare(keep=3), bucket.backlog(keep=3)) == (1, 0.0)
    assert TokenBucket(qps=math.inf, burst=1).backlog(keep=5) == 0.0
