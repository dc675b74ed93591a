"""Rate limiters for re-queues and API calls, with client-go's semantics.

Two kinds of limiting meet in a controller:

* **Per-key backoff** for a key whose reconcile failed: retrying it at once would hammer the API
  with the same failing request. :class:`ItemExponentialFailureRateLimiter` doubles the delay per
  failure (5 ms, 10 ms, 20 ms, ... capped) until :meth:`~RateLimiter.forget` after a success.
* **Overall throughput**, so a mass failure (the API server restarts, every job errors) does not
  turn into a retry storm: :class:`BucketRateLimiter` is one token bucket shared by all keys.

:func:`default_controller_rate_limiter` combines both with :class:`MaxOfRateLimiter`, as client-go's
``DefaultTypedControllerRateLimiter`` does: the delay is the larger of the two.

:class:`TokenBucket` is the same bucket in awaitable form, used as the client-side QPS/burst limit
of the API client.
"""

from __future__ import annotations

import asyncio
import math
import sys
import weakref
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from msgspec import Struct

from jobcontroller.runtime.clock import Clock, monotonic

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

__all__ = [
    "BucketRateLimiter",
    "ItemExponentialFailureRateLimiter",
    "MaxOfRateLimiter",
    "RateLimiter",
    "TokenBucket",
    "TokenBucketStatistics",
    "default_controller_rate_limiter",
]


class RateLimiter(Protocol[K_contra]):
    """What the work queue needs from a limiter (client-go's ``TypedRateLimiter``)."""

    def when(self, item: K_contra) -> float:
        """Seconds to wait before ``item`` may be processed again; records one more failure."""
        ...

    def forget(self, item: K_contra) -> None:
        """Stop tracking ``item`` (it succeeded), so its next failure starts from the base delay."""
        ...

    def num_requeues(self, item: K_contra) -> int:
        """Failures recorded for ``item`` since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-item exponential backoff: ``base * 2**failures``, capped at ``max_delay`` seconds.

    Memory grows with the number of distinct failing items until they are forgotten, which is why
    the work queue's canonical loop calls ``forget`` after every success.
    """

    def __init__(self, *, base: float = 0.005, max_delay: float = 1000.0) -> None:
        if base <= 0 or max_delay < base:
            raise ValueError(f"need 0 < base <= max_delay, got {base=} {max_delay=}")
        self._base = base
        self._max_delay = max_delay
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        exp = self._failures.get(item, 0)
        self._failures[item] = exp + 1
        # 2.0**exp overflows a float past 1023; the cap is reached long before that anyway.
        if exp >= 1023:
            return self._max_delay
        return min(self._base * 2.0**exp, self._max_delay)

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class _Reservoir:
    """Token arithmetic shared by both bucket flavours (golang.org/x/time/rate's model).

    Tokens may go negative: each reservation is granted at once, and the debt tells the caller how
    long to wait. That keeps reservations in FIFO order without a queue of waiters.
    """

    __slots__ = ("_burst", "_last", "_qps", "_tokens")

    def __init__(self, *, qps: float, burst: int) -> None:
        if not qps > 0:
            raise ValueError(f"qps must be > 0 (math.inf for no limit), got {qps}")
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self._qps = qps
        self._burst = float(burst)
        self._tokens = float(burst)
        # Set on first use, so a clock that needs a running loop can be passed at construction.
        self._last: float | None = None

    def _advance(self, now: float) -> None:
        if self._last is None:
            self._last = now
        elif now > self._last:
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now

    def available(self, now: float) -> float:
        self._advance(now)
        return self._tokens

    def reserve(self, now: float, tick: float = 0.0) -> float:
        """Take one token; returns the seconds until it is really ours (0 if available now).

        With ``tick``, a token that is not available now is ours on the first multiple of
        ``tick`` at or after the instant it would be: the tokens the bucket would refill in
        between are taken too, so the caller's request leaves no earlier room for the next."""
        if math.isinf(self._qps):
            return 0.0
        self._advance(now)
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        due = now - self._tokens / self._qps
        if tick:
            # Less a ten-thousandth of a tick: a due instant on a tick (in floating point, a
            # hair past it, as every saturated reservation after the first is) stays on it.
            on_tick = math.ceil(due / tick - 1e-4) * tick
            if on_tick > due:
                self._tokens -= (on_tick - due) * self._qps
                due = on_tick
        return due - now

    def refund(self, now: float) -> None:
        """Give back a reservation that was abandoned (its waiter was cancelled)."""
        self._advance(now)
        self._tokens = min(self._burst, self._tokens + 1.0)


class BucketRateLimiter(Generic[K]):
    """One global token bucket: ``burst`` immediate retries, then ``qps`` per second.

    Every :meth:`when` consumes a token whether or not the caller acts on it, like client-go's
    ``Reserve().Delay()``; the item is ignored, so ``forget`` and ``num_requeues`` are no-ops.
    """

    def __init__(self, *, qps: float = 10.0, burst: int = 100, clock: Clock = monotonic) -> None:
        self._clock = clock
        self._reservoir = _Reservoir(qps=qps, burst=burst)

    def when(self, item: K) -> float:
        return self._reservoir.reserve(self._clock())

    def forget(self, item: K) -> None:
        return None

    def num_requeues(self, item: K) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The strictest of several limiters.

    ``when`` asks *every* limiter (so the bucket is charged even when the backoff dominates) and
    returns the largest delay; ``num_requeues`` is the largest count; ``forget`` forgets on all.
    """

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: K) -> float:
        return max([limiter.when(item) for limiter in self._limiters])

    def forget(self, item: K) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(*, clock: Clock = monotonic) -> MaxOfRateLimiter[Hashable]:
    """client-go's default: per-key backoff 5 ms..1000 s, overall 10 qps with a burst of 100.

    Typed over ``Hashable`` so it fits a queue of any key type (the protocol is contravariant).
    """
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter(base=0.005, max_delay=1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )


class TokenBucketStatistics(Struct, frozen=True):
    """A snapshot of a :class:`TokenBucket`."""

    qps: float
    burst: int
    #: Tokens available now; negative while reservations are queued behind the refill.
    tokens: float
    #: ``acquire`` calls that got a token (cancelled waits excluded).
    acquired_total: int
    #: Of those, how many had to wait.
    delayed_total: int
    #: Sum of the waits, in seconds.
    wait_seconds_total: float
    #: Callers currently sleeping for their token.
    waiting: int


#: The longest tick of a :class:`TokenBucket` (see there).
MAX_TICK = 0.05


class _Ticks:
    """One timer per tick of a loop, for every bucket whose waiters wake on it: its waiters
    wake in one callback, whatever the loop's timers round to (uvloop's to whole ms)."""

    def __init__(self) -> None:
        self._due: dict[tuple[Clock, float, int], list[asyncio.Future[None]]] = {}

    def wait(
        self, loop: asyncio.AbstractEventLoop, clock: Clock, tick: float, at: float, delay: float
    ) -> asyncio.Future[None]:
        """A future done on the tick ``at`` of ``clock`` (a multiple of ``tick``), ``delay``
        seconds on. Only buckets reading the same clock share a tick's timer."""
        key = (clock, tick, round(at / tick))
        waiters = self._due.get(key)
        if waiters is None:
            waiters = self._due[key] = []
            loop.call_later(delay, self._fire, key)
        fut: asyncio.Future[None] = loop.create_future()
        waiters.append(fut)
        return fut

    def _fire(self, key: tuple[Clock, float, int]) -> None:
        for fut in self._due.pop(key, ()):
            if not fut.done():  # a cancelled waiter's is
                fut.set_result(None)


# By loop, held weakly; a loop closed with waiters still queued is kept (their futures hold it).
_TICKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Ticks] = weakref.WeakKeyDictionary()


class TokenBucket:
    """An awaitable QPS/burst limiter for outgoing API calls (client-go's ``--kube-api-qps``).

    Callers are served in call order: a reservation is taken at once and the caller sleeps for
    its share of the debt. A cancelled waiter returns its token. ``qps=math.inf`` disables limiting
    while keeping the statistics. Not thread-safe; use it from one event loop.

    A caller that must wait gets its token on a tick of ``clock``: ticks divide the token
    interval ``1/qps`` evenly, none longer than :data:`MAX_TICK` (one interval at QPS 20 and
    above), and are counted from the clock's zero. Every bucket of one QPS in the process
    (the main client's and the Events client's) thus wakes its waiters on the same instants,
    from one timer, in one turn of the loop instead of one each (docs/performance.md measures
    the CPU it saves). A wait grows by less than one tick, and only the first of a run of
    waits: the refill it skips is charged to the bucket, so the rate never exceeds ``qps``, in
    any window, and the order is kept.
    """

    def __init__(self, qps: float, burst: int, clock: Clock = monotonic) -> None:
        self._qps = qps
        self._burst = burst
        self._clock = clock
        self._reservoir = _Reservoir(qps=qps, burst=burst)
        interval = 1.0 / qps if 0 < qps < math.inf else MAX_TICK
        self._tick = interval / math.ceil(interval / MAX_TICK - 1e-9)
        self._acquired = 0
        self._delayed = 0
        self._wait_total = 0.0
        self._waiting = 0

    async def acquire(self) -> float:
        """Wait for a token; returns the seconds waited, for the caller's latency metric.

        The wait is the reserved delay, measured on ``clock``; the sleep itself runs on the
        event loop's clock, which is the same clock unless a test injects a different one.
        """
        now = self._clock()
        delay = self._reservoir.reserve(now, self._tick)
        if delay > 0:
            loop = asyncio.get_running_loop()
            ticks = _TICKS.get(loop)
            if ticks is None:
                ticks = _TICKS[loop] = _Ticks()
            woken = ticks.wait(loop, self._clock, self._tick, now + delay, delay)
            self._waiting += 1
            try:
                await woken
            except asyncio.CancelledError:
                self._reservoir.refund(self._clock())
                raise
            finally:
                self._waiting -= 1
            self._delayed += 1
            self._wait_total += delay
        self._acquired += 1
        return delay

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    def backlog(self, keep: int = 0) -> float:
        """Seconds a caller asking now would wait for its token (0: one is free); with
        ``keep``, until its token would leave ``keep`` more in the bucket."""
        if math.isinf(self._qps):
            return 0.0
        need = 1.0 + keep
        tokens = self._reservoir.available(self._clock())
        return 0.0 if tokens >= need else (need - tokens) / self._qps

    def spare(self, keep: int = 0) -> int:
        """Requests that could be sent now without waiting for a token, and leave ``keep``
        tokens in the bucket."""
        if math.isinf(self._qps):
            return sys.maxsize
        return max(0, math.floor(self._reservoir.available(self._clock()) - keep))

    def statistics(self) -> TokenBucketStatistics:
        return TokenBucketStatistics(
            qps=self._qps,
            burst=self._burst,
            tokens=self._reservoir.available(self._clock()),
            acquired_total=self._acquired,
            delayed_total=self._delayed,
            wait_seconds_total=self._wait_total,
            waiting=self._waiting,
        )


class Slots:
    """At most ``n`` holders at once, waiters served first come first served.

    What ``asyncio.Semaphore`` does, but entering costs O(1): 3.11's ``Semaphore.acquire``
    asks ``locked()``, which scans every waiter, so with hundreds of creations queued behind
    the client's QPS each entry cost a scan (3.3% of the operator's CPU in the 100-TFJob bench
    profile). A released slot goes straight to the oldest waiter still waiting; cancelled
    waiters are skipped when reached.
    """

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"Slots needs n >= 1, got {n}")
        self._free = n
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def free(self) -> int:
        return self._free

    async def __aenter__(self) -> None:
        if self._free > 0 and not self._waiters:
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self._release()  # handed a slot, then cancelled before running: pass it on
            raise

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                return
        self._free += 1
