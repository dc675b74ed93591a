"""The informer's error backoff: 0.8 s doubling to 30 s, jittered, reset after 2 healthy minutes."""

from __future__ import annotations

import pytest
import vtime

from jobcontroller.runtime.informer import Backoff


def test_schedule_without_jitter_doubles_to_the_cap() -> None:
    clock = vtime.FakeClock()
    backoff = Backoff(clock=clock, rng=lambda: 0.5)  # rng 0.5 = no jitter
    delays = []
    for _ in range(8):
        delays.append(backoff.next_delay())
        clock.advance(delays[-1])
    assert delays == pytest.approx([0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30.0, 30.0])


def test_jitter_spreads_around_the_base_but_never_beyond_the_cap() -> None:
    low = Backoff(clock=vtime.FakeClock(), rng=lambda: 0.0)
    high = Backoff(clock=vtime.FakeClock(), rng=lambda: 0.999999)
    assert low.next_delay() == pytest.approx(0.6)
    assert high.next_delay() == pytest.approx(1.0, rel=1e-5)
    for _ in range(10):
        assert high.next_delay() <= 30.0


def test_two_healthy_minutes_reset_the_schedule() -> None:
    clock = vtime.FakeClock()
    backoff = Backoff(clock=clock, rng=lambda: 0.5)
    for _ in range(5):
        backoff.next_delay()
    assert backoff.failures == 5
    clock.advance(119.0)
    assert backoff.next_delay() == pytest.approx(25.6)  # still within the window
    clock.advance(120.0)
    assert backoff.next_delay() == pytest.approx(0.8)
    assert backoff.failures == 1
