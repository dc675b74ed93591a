"""How fast an informer is back after its API server was away (virtual time).

An API server restarted a few times in a row used to leave the operator blind for 16-59 s: the
backoff had reached its 30 s cap and a 410 after reconnecting waited a further full backoff
before relisting. Now the delay is capped at 5 s, resets as soon as a LIST succeeds or a watch
delivers a line, and the first 410 relists at once.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

import vtime
from test_informer_loop import LISTING, ScriptedApi, bookmark, cm, ev, make, run_until_idle

from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.kube import PODS, ApiError, WatchInactive

GONE = ApiError(status=410, reason="Expired", message="too old resource version")


class TimedApi(ScriptedApi):
    """Notes the virtual time of every LIST and WATCH."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[str, float]] = []

    async def list(self, resource: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        self.times.append(("list", asyncio.get_running_loop().time() - vtime.START))
        return await super().list(resource, **kwargs)

    async def watch(self, resource: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        self.times.append(("watch", asyncio.get_running_loop().time() - vtime.START))
        async for event in super().watch(resource, **kwargs):
            yield event


def gaps(api: TimedApi) -> list[float]:
    times = [t for _, t in api.times]
    return [round(b - a, 3) for a, b in itertools.pairwise(times)]


def test_a_long_outage_never_waits_more_than_five_seconds_between_attempts() -> None:
    api = TimedApi()
    api.lists = [([], "1")]
    refused = ConnectionRefusedError("connect failed")
    api.watches = [[refused] for _ in range(12)] + [[ev("ADDED", cm("a", "2"))]]
    informer, rec, _ = make(api)
    run_until_idle(api, informer)
    assert rec.calls == [("add", "a")]
    # Nothing answers at all: a reconnect costs nothing, so at most 2 s apart.
    assert max(gaps(api)) <= 2.0


def test_a_working_stream_resets_the_backoff() -> None:
    api = TimedApi()
    api.lists = [([], "1")]
    refused = ConnectionRefusedError("connect failed")
    api.watches = [
        *([refused] for _ in range(6)),  # grown to the cap
        [ev("ADDED", cm("a", "2")), refused],  # back, then the next restart
        [ev("ADDED", cm("b", "3"))],
    ]
    informer, _, _ = make(api)
    run_until_idle(api, informer)
    # The failure right after a working stream waits the first delay again, not the cap.
    assert gaps(api)[-1] < 1.3


def test_gone_after_reconnecting_relists_at_once() -> None:
    api = TimedApi()
    api.lists = [([cm("a", "1")], "1"), ([cm("a", "5")], "6")]
    api.watches = [[ConnectionResetError("reset")], [GONE]]
    informer, rec, _ = make(api)
    run_until_idle(api, informer)
    kinds = [kind for kind, _ in api.times]
    assert kinds == ["list", "watch", "watch", "list", "watch"]
    (relisted_after_gone,) = [gaps(api)[2]]
    assert relisted_after_gone == 0.0
    assert rec.calls[-1] == ("update", "a", "1", "5")


def test_gone_twice_in_a_row_backs_off() -> None:
    api = TimedApi()
    api.lists = [([], "1"), ([], "2"), ([], "3")]
    api.watches = [[GONE], [GONE], [ev("ADDED", cm("a", "4"))]]
    informer, _, _ = make(api)
    run_until_idle(api, informer)
    kinds = [kind for kind, _ in api.times]
    assert kinds[:6] == ["list", "watch", "list", "watch", "list", "watch"]
    assert gaps(api)[1] == 0.0  # the first relist is immediate
    assert gaps(api)[3] >= 0.6  # the second waits a backoff


def test_once_bookmarks_flow_a_silent_stream_is_given_up_sooner() -> None:
    """A half-open stream (a proxy holding a dead connection) is noticed after 75 s, not 120 s,
    once the server has shown it sends bookmarks for this resource."""
    api = TimedApi()
    api.lists = [([], "1")]
    api.watches = [[bookmark("2"), WatchInactive("silent")], [ev("ADDED", cm("a", "3"))]]
    informer, _, _ = make(api)
    run_until_idle(api, informer)
    timeouts = [call["inactivity_timeout"] for call in api.watch_calls]
    assert timeouts == [120.0, 75.0, 75.0]


def test_a_list_refused_with_gone_reads_a_quorum_at_once() -> None:
    """After a restart the server's cache may not have our version even for a LIST: the
    quorum read that follows cannot fail that way, so it is not delayed."""
    api = TimedApi()
    api.lists = [([], "1"), GONE, ([cm("a", "9")], "9")]
    api.watches = [[GONE]]
    informer, rec, _ = make(api)
    run_until_idle(api, informer)
    kinds = [kind for kind, _ in api.times]
    assert kinds == ["list", "watch", "list", "list", "watch"]
    assert gaps(api)[1:3] == [0.0, 0.0]
    assert api.list_calls[2]["resource_version"] == ""
    assert rec.calls == [("add", "a")]


def test_the_servers_retry_after_is_obeyed_even_when_our_backoff_is_longer() -> None:
    api = TimedApi()
    api.lists = [([], "1")]
    refused = ConnectionRefusedError("connect failed")
    starting = ApiError(status=429, reason="TooManyRequests", retry_after=1.0)
    api.watches = [*([refused] for _ in range(6)), [starting], [ev("ADDED", cm("a", "2"))]]
    informer, _, _ = make(api)
    run_until_idle(api, informer)
    assert gaps(api)[-2] == 1.0  # from the 429 to the next watch


def test_a_name_taken_by_a_new_object_during_the_gap_is_a_delete_and_an_add() -> None:
    """A pod deleted and created again under its name while the watch was down shows up in the
    relist under the same key. Seen as an update, the controller's expectations for its own
    deletion and creation were never met, and the job stalled until they expired."""
    old = cm("w-0", "1") | {
        "metadata": {"name": "w-0", "namespace": "ns", "uid": "old", "resourceVersion": "1"}
    }
    new = {"metadata": {"name": "w-0", "namespace": "ns", "uid": "new", "resourceVersion": "7"}}
    api = TimedApi()
    api.lists = [([old], "1"), ([new], "8")]
    api.watches = [[GONE]]
    informer = Informer(api, PODS, settings=LISTING, namespace="ns")  # type: ignore[arg-type]
    calls: list[tuple[str, str]] = []
    informer.add_handlers(
        on_add=lambda o: calls.append(("add", o["metadata"]["uid"])),
        on_update=lambda a, b: calls.append(("update", b["metadata"]["uid"])),
        on_delete=lambda o: calls.append(("delete", o["metadata"]["uid"])),
    )
    run_until_idle(api, informer)
    assert calls == [("add", "old"), ("delete", "old"), ("add", "new")]
