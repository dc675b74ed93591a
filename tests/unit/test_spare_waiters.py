"""The jobs whose writes wait for the client: one timer looks for them all (controller/spare.py).

- A key is queued once the client has a request to spare, or at its bound if it never has.
- At a drain, as many keys are queued as the client has requests to spare (at least one),
  the earliest bound first; the others wait on.
- The client is asked no more often than the recheck interval, however many keys wait.
- A dropped key is never queued, and the timer stops when no key waits.
"""

from __future__ import annotations

import asyncio

import pytest

from jobcontroller.controller.spare import SpareWaiters


class Client:
    def __init__(self) -> None:
        self.backlog_seconds = 0.0
        self.spare_requests = 0

    def backlog(self) -> float:
        return self.backlog_seconds

    def spare(self) -> int:
        return self.spare_requests


def _waiters(client: Client, clock: list[float], queued: list[str]) -> SpareWaiters:
    return SpareWaiters(
        backlog=client.backlog,
        spare=client.spare,
        requeue=queued.append,
        recheck=1.0,
        clock=lambda: clock[0],
    )


async def test_a_key_is_queued_once_the_client_has_room_or_at_its_bound() -> None:
    client, clock, queued = Client(), [100.0], []
    waiters = _waiters(client, clock, queued)
    client.backlog_seconds = 0.2
    waiters.wait("a", 30.0)
    waiters.wait("b", 5.0)
    assert waiters.fire() == [] and queued == []  # still saturated
    clock[0] += 5.0
    assert waiters.fire() == ["b"]  # its bound, saturated or not
    client.backlog_seconds, client.spare_requests = 0.0, 3
    assert waiters.fire() == ["a"]
    assert queued == ["b", "a"] and len(waiters) == 0 and waiters.next_look is None


async def test_a_drain_queues_as_many_as_the_client_can_send_earliest_bound_first() -> None:
    client, clock, queued = Client(), [100.0], []
    waiters = _waiters(client, clock, queued)
    client.backlog_seconds = 0.5
    for key, bound in (("late", 30.0), ("soon", 5.0), ("mid", 10.0)):
        waiters.wait(key, bound)
    client.backlog_seconds, client.spare_requests = 0.0, 2
    assert waiters.fire() == ["soon", "mid"]
    assert waiters.due("late") == pytest.approx(130.0)
    client.spare_requests = 0  # a token is about to be free, none is yet: one goes
    assert waiters.fire() == ["late"]


async def test_keys_past_their_bound_take_the_spare_requests_first() -> None:
    client, clock, queued = Client(), [100.0], []
    waiters = _waiters(client, clock, queued)
    client.backlog_seconds = 0.5
    waiters.wait("bound", 1.0)
    waiters.wait("other", 30.0)
    clock[0] += 1.0
    client.backlog_seconds, client.spare_requests = 0.0, 1
    assert waiters.fire() == ["bound"]  # the one request to spare is its
    assert waiters.due("other") is not None


async def test_the_client_is_asked_once_a_second_at_most_however_many_wait() -> None:
    client, clock, queued = Client(), [100.0], []
    waiters = _waiters(client, clock, queued)
    client.backlog_seconds = 0.05  # one request ahead at QPS 20
    for i in range(100):
        waiters.wait(f"job-{i}", 30.0)
    assert waiters.next_look == pytest.approx(101.0)
    client.backlog_seconds = 4.0  # a longer queue: looked at once it has drained
    waiters.fire()
    assert waiters.next_look == pytest.approx(104.0)
    waiters.wait("soon", 0.5)  # a bound before that look: the timer moves up
    assert waiters.next_look == pytest.approx(100.5)


async def test_a_dropped_key_is_never_queued_and_the_timer_stops() -> None:
    client, clock, queued = Client(), [100.0], []
    waiters = _waiters(client, clock, queued)
    client.backlog_seconds = 2.0
    waiters.wait("a", 30.0)
    waiters.wait("b", 30.0)
    waiters.drop("a")
    client.backlog_seconds, client.spare_requests = 0.0, 5
    assert waiters.fire() == ["b"] and queued == ["b"]
    waiters.wait("c", 30.0)
    waiters.drop("c")
    assert waiters.next_look is None
    waiters.drop("never-waited")  # harmless


async def test_a_look_taken_early_leaves_no_second_timer_behind() -> None:
    """On the event loop's own clock: once every key is dropped, nothing looks again."""
    client, queued = Client(), []
    looks = []

    def backlog() -> float:
        looks.append(1)
        return client.backlog_seconds

    waiters = SpareWaiters(backlog=backlog, spare=client.spare, requeue=queued.append, recheck=0.02)
    client.backlog_seconds = 0.02
    waiters.wait("a", 30.0)  # armed for 0.02 s from now
    waiters.fire()  # looked at early (still busy): armed again
    waiters.drop("a")
    assert waiters.next_look is None
    counted = len(looks)
    await asyncio.sleep(0.1)
    assert len(looks) == counted and queued == []


async def test_the_timer_queues_the_keys_by_itself() -> None:
    """On the event loop's own clock: no pass is needed to bring a waiting job back."""
    client, queued = Client(), []
    waiters = SpareWaiters(
        backlog=client.backlog, spare=client.spare, requeue=queued.append, recheck=0.01
    )
    client.backlog_seconds = 0.02
    waiters.wait("a", 30.0)
    await asyncio.sleep(0.05)
    assert queued == []
    client.backlog_seconds, client.spare_requests = 0.0, 1
    for _ in range(100):
        if queued:
            break
        await asyncio.sleep(0.01)
    assert queued == ["a"] and waiters.next_look is None
    waiters.close()
