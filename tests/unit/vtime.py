"""A virtual-time asyncio loop for unit tests (the idea of nolar's looptime, in 40 lines).

The loop's ``time()`` is a counter. When the loop would block in ``select`` waiting for its next
timer, the selector polls without blocking and, if nothing is ready, jumps the counter forward to
that timer instead. Sleeps of hours finish at once, timers fire in their real order, and every
duration the code under test measures with ``loop.time()`` is exact.

If the loop would wait with no timer at all, nothing can ever wake it (no threads, no real I/O in
unit tests): that is a deadlock, reported as :class:`VirtualDeadlock` instead of a hanging test.

Usage, from a plain (synchronous) test::

    def test_something() -> None:
        async def main() -> None: ...
        vtime.run(main())

A fresh loop per test keeps pytest-asyncio's session loop out of it.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

#: Where virtual time starts: not zero, so code that confuses "0" with "unset" shows up.
START = 1_000.0


class VirtualDeadlock(RuntimeError):
    """The loop had nothing ready and no timer: in virtual time it would sleep forever."""


class _JumpingSelector(selectors.SelectSelector):
    def __init__(self) -> None:
        super().__init__()
        self.now = START

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None:
            raise VirtualDeadlock("event loop idle with no timer scheduled")
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(self._jumping)

    def time(self) -> float:
        return self._jumping.now


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run ``main`` on a fresh virtual-time loop and close it."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)


class FakeClock:
    """A monotonic clock that moves only when told to, for code that takes ``clock=``."""

    def __init__(self, start: float = START) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a monotonic clock does not go back"
        self.now += seconds
