"""Jobs whose writes wait for the operator's client to have a request to spare.

While the client's rate limiter has no request to spare, the writes that only inform wait
(``StatusWriter.wait``, ``Executor.hold_patches``). Each such job used to be planned again on
its own timer, once a second, to see whether the queue ahead had drained: in a burst of 50
MPIJobs at QPS 20, a sixth of all passes were those looks, each a whole plan that found the
client still busy. :class:`SpareWaiters` looks once for all of them: one timer, which asks the
client once the queue ahead should have drained and no sooner than ``recheck`` (or at a bound
that comes first), and queues the jobs whose hold reached its bound and as many others as the
client has requests to spare, the earliest bound first. A job that no longer waits (its write
went out with a pass an event brought, or it was deleted) is dropped and not queued for
nothing.

One per controller: in the all-in-one, each kind's waiters read the same client, so a drain
may queue up to that many jobs of each kind; a pass that finds the client busy again holds
its job again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["SpareWaiters"]


class SpareWaiters:
    """Keys waiting for the client to have a request to spare, or for their bound."""

    def __init__(
        self,
        *,
        backlog: Callable[[], float],
        spare: Callable[[], int],
        requeue: Callable[[str], None],
        recheck: float,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``backlog``: seconds a request sent now would wait for its token (0: none);
        ``spare``: requests the client could send now without waiting; ``requeue``: queues a
        key; ``recheck``: the shortest time between two looks at the client; ``clock``:
        monotonic seconds (``time.monotonic`` by default, looked up at each call)."""
        self._backlog = backlog
        self._spare = spare
        self._requeue = requeue
        self._recheck = recheck
        self._clock = clock or (lambda: time.monotonic())
        self._due: dict[str, float] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0

    def __len__(self) -> int:
        return len(self._due)

    def due(self, key: str) -> float | None:
        """When ``key`` is queued at the latest (``clock`` seconds; None: it is not waiting)."""
        return self._due.get(key)

    @property
    def next_look(self) -> float | None:
        """When the timer looks at the client next (``clock`` seconds; None: nothing waits)."""
        return None if self._timer is None else self._timer_at

    def wait(self, key: str, within: float) -> None:
        """Queue ``key`` once the client has a request to spare, or in ``within`` seconds if
        it has none by then. A later call replaces the bound."""
        due = self._due[key] = self._clock() + within
        if self._timer is None or due < self._timer_at:
            self._arm()

    def drop(self, key: str) -> None:
        """``key`` waits no more (its writes went out, or are wanted no more)."""
        if self._due.pop(key, None) is not None and not self._due:
            self._disarm()

    def fire(self) -> list[str]:
        """Look at the client now: queue the keys due, and as many others as it has requests
        to spare (one if none was due, once it has room), earliest bound first. Returns those
        queued."""
        self._disarm()  # called early (a test, a caller), the armed look is this one
        now = self._clock()
        woken = [key for key, due in self._due.items() if due <= now]
        if self._backlog() <= 0:
            rest = sorted(
                (key for key, due in self._due.items() if due > now), key=self._due.__getitem__
            )
            woken += rest[: max(0 if woken else 1, self._spare() - len(woken))]
        for key in woken:
            del self._due[key]
            self._requeue(key)
        if self._due:
            self._arm()
        return woken

    def close(self) -> None:
        self._due.clear()
        self._disarm()

    def _arm(self) -> None:
        self._disarm()
        now = self._clock()
        delay = min(min(self._due.values()) - now, max(self._backlog(), self._recheck))
        delay = max(delay, 0.0)
        self._timer_at = now + delay
        self._timer = asyncio.get_running_loop().call_later(delay, self.fire)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
