"""The waker a live page's stream sleeps on: woken by news (a burst is one wake-up), or by the
browser closing the connection, which must end the stream at once (and with it the watches
behind the page). And the reflector's one rule a real API server will not show on demand: a
410 on every watch is not a hot loop of LISTs (its other rules, against the real API server:
tests/integration/test_kfjob_ui_hub.py)."""

from __future__ import annotations

import socket
import threading
from typing import Any

from kfjob.client import ApiFailure
from kfjob.ui.watch import Reflector, Waker


def test_news_wakes_once_per_burst() -> None:
    server, client = socket.socketpair()
    waker = Waker(server)
    try:
        assert waker.wait(0) == "timeout"
        for _ in range(100):
            waker.notify()
        assert waker.wait(5) == "woken"
        assert waker.wait(0) == "timeout"  # the burst was one wake-up
        threading.Timer(0.05, waker.notify).start()
        assert waker.wait(30) == "woken"  # from another thread, while asleep
    finally:
        waker.close()
        server.close()
        client.close()


def test_the_client_hanging_up_wakes_the_stream() -> None:
    server, client = socket.socketpair()
    waker = Waker(server)
    try:
        threading.Timer(0.05, client.close).start()
        assert waker.wait(30) == "hangup"
        waker.notify()
        assert waker.wait(0) == "hangup"  # news or not, the stream is over
    finally:
        waker.close()
        server.close()


class Expiring:
    """An API server that lists fine and answers every watch 410 Gone (it stops the test's
    reflector after 20 LISTs, so a hot loop ends too, and fails the test)."""

    def __init__(self, stop: threading.Event) -> None:
        self.lists = 0
        self.stop = stop

    def list(self, path: str, **selectors: str) -> tuple[list[Any], str]:
        self.lists += 1
        if self.lists >= 20:
            self.stop.set()
        return [], str(self.lists)

    def watch(self, path: str, **kwargs: str) -> Any:
        raise ApiFailure(410, "too old resource version")


class Recorded(threading.Event):
    """A stop event that records the reflector's pauses and stops it after ``limit``."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit
        self.pauses: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.pauses.append(timeout)
        if len(self.pauses) >= self.limit:
            self.set()
        return self.is_set()


def test_a_watch_that_always_expires_is_not_relisted_in_a_hot_loop() -> None:
    stop = Recorded(limit=4)
    server = Expiring(stop)
    reflector = Reflector(
        server,  # type: ignore[arg-type]  # list and watch are all it calls
        path="/api/v1/pods",
        on_reset=lambda items: None,
        on_event=lambda etype, obj: None,
        on_denied=lambda exc: None,
        stop=stop,
        backoff=0.5,
    )
    reflector.run()
    # The first 410 lists again at once; each next one, with no event between, after a
    # pause that doubles.
    assert stop.pauses == [0.5, 1.0, 2.0, 4.0]
    assert server.lists == 5 and reflector.stats.gone == 5
