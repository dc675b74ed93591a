"""The clock seam of the runtime.

Everything in the runtime that measures time takes a :data:`Clock`: a callable returning
monotonic seconds. Production code passes nothing and gets :func:`time.monotonic`, which is also
what the default asyncio loop uses for ``loop.time()``. Tests pass a fake (or the virtual loop's
``time``) so timeouts, token refills and expiries can be exercised without sleeping.

Wall-clock time (``time.time``) is deliberately not used: it jumps with NTP and would make a
five-minute expiry fire early or never.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

#: Monotonic seconds; only differences between two readings are meaningful.
Clock = Callable[[], float]

#: The default clock, shared with asyncio's default loop so delays and timestamps agree.
monotonic: Clock = time.monotonic


def loop_clock() -> Clock:
    """The running loop's clock: agrees with ``loop.call_at`` timers, virtual or not."""
    return asyncio.get_running_loop().time
