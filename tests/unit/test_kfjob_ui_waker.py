"""The waker a live page's stream sleeps on: woken by news (a burst is one wake-up), or by the
browser closing the connection, which must end the stream at once (and with it the watches
behind the page)."""

from __future__ import annotations

import socket
import threading

from kfjob.ui.watch import Waker


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
