"""Jobs held at start for the progress endpoint's certificate are queued again the moment the
server has asked for it once (had or not), or at the deadline: not on a retry timer per job,
which held a burst that came with the operator's start half a second after the certificate
was there."""

from __future__ import annotations

import asyncio
from typing import Any

from jobcontroller.controller.progress import CertWait
from jobcontroller.controller.progressserver import ProgressServer
from jobcontroller.runtime.kube import ApiError
from jobcontroller.runtime.progressflags import ProgressSettings

SETTINGS = ProgressSettings(port=0, bind_address="127.0.0.1", namespace="ns", service="op")


class _RefusingApi:
    """The certificate's Secret cannot be read: the server's first attempt fails at once."""

    def __init__(self) -> None:
        self.gets = 0

    async def get(self, *args: Any, **kwargs: Any) -> Any:
        self.gets += 1
        raise ApiError(status=503, reason="ServiceUnavailable")

    async def close(self) -> None:
        pass


async def _tried(server: ProgressServer) -> None:
    """Until the server's certificate task has made its first attempt (a second at most)."""
    for _ in range(100):
        if server.first_attempt_done:
            return
        await asyncio.sleep(0.01)


async def test_held_jobs_are_queued_once_the_first_attempt_is_done() -> None:
    api = _RefusingApi()
    server = ProgressServer(settings=SETTINGS, api=api)  # type: ignore[arg-type]
    queued: list[str] = []
    wait = CertWait(server, queued.append)
    assert wait.holds("ns/b") and wait.holds("ns/a") and wait.holds("ns/b")
    assert queued == [] and len(wait) == 2
    task = asyncio.create_task(server._certificate())  # fails, then retries in 10 s
    try:
        await _tried(server)
        assert api.gets == 1 and server.first_attempt_done
        assert queued == ["ns/b", "ns/a"]  # at once, in arrival order, each once
        assert not wait.holds("ns/c")  # planned without the certificate from now on
        assert len(wait) == 0
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_a_server_that_already_tried_holds_nothing() -> None:
    server = ProgressServer(settings=SETTINGS, api=_RefusingApi())  # type: ignore[arg-type]
    task = asyncio.create_task(server._certificate())
    try:
        await _tried(server)
        queued: list[str] = []
        wait = CertWait(server, queued.append)
        assert not wait.holds("ns/a") and queued == []
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_held_jobs_are_queued_at_the_deadline_if_the_server_never_tries() -> None:
    server = ProgressServer(settings=SETTINGS, api=_RefusingApi())  # type: ignore[arg-type]
    queued: list[str] = []
    wait = CertWait(server, queued.append, within=0.05)  # its task never runs here
    assert wait.holds("ns/a")
    await asyncio.sleep(0.2)
    assert queued == ["ns/a"]
    assert not wait.holds("ns/b")  # past the deadline: planned without it
