"""The informer's list/watch loop against a scripted API, on a virtual-time loop.

What is pinned here: which LIST and WATCH requests are made (resourceVersion, paging, timeouts),
the handler calls for each event and for a relist, and recovery from every kind of failure.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import vtime

from jobcontroller.runtime.informer import Informer, InformerSettings
from jobcontroller.runtime.kube import PODS, ApiError, WatchInactive
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.projection import project_pod

END = object()  # a watch script item: the server closes the stream


def cm(name: str, rv: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}, **extra}


def ev(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    return {"type": kind, "object": obj}


def bookmark(rv: str) -> dict[str, Any]:
    return {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": rv}}}


LISTING = InformerSettings(watch_list=False)
"""Informers on a :class:`ScriptedApi` read their initial state with LISTs (the path for servers
that cannot stream one); test_informer_watch_list.py covers the streamed lists."""


class ScriptedApi:
    """``list`` and ``watch`` answer from scripts; a watch without script waits forever. A
    callable in a watch script is called between the events around it."""

    def __init__(self) -> None:
        self.lists: list[tuple[list[dict[str, Any]], str] | Exception] = []
        self.watches: list[list[Any]] = []
        self.list_calls: list[dict[str, Any]] = []
        self.watch_calls: list[dict[str, Any]] = []
        self.idle = asyncio.Event()

    async def list(self, resource: Any, **kwargs: Any) -> tuple[list[dict[str, Any]], str]:
        self.list_calls.append(kwargs)
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        items, rv = answer
        each = kwargs.get("each")
        fresh = copy.deepcopy(items)
        return ([each(item) for item in fresh] if each is not None else fresh), rv

    async def watch(self, resource: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        self.watch_calls.append(kwargs)
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()
        for item in self.watches.pop(0):
            if item is END:
                return
            if callable(item):  # something the process does between two events
                item()
                continue
            if isinstance(item, Exception):
                raise item
            yield copy.deepcopy(item)


class Recorder:
    def __init__(self, informer: Informer) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.informer = informer
        informer.add_handlers(on_add=self.add, on_update=self.update, on_delete=self.delete)

    def add(self, obj: dict[str, Any]) -> None:
        # The store is updated before handlers run.
        assert self.informer.store.get("ns", obj["metadata"]["name"]) is obj
        self.calls.append(("add", obj["metadata"]["name"]))

    def update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        old_rv, new_rv = old["metadata"]["resourceVersion"], new["metadata"]["resourceVersion"]
        self.calls.append(("update", new["metadata"]["name"], old_rv, new_rv))

    def delete(self, obj: dict[str, Any]) -> None:
        assert self.informer.store.get("ns", obj["metadata"]["name"]) is None
        self.calls.append(("delete", obj["metadata"]["name"]))


def run_until_idle(
    api: ScriptedApi,
    informer: Informer,
    check: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Run the informer until it waits on a watch with no script left, then stop it."""

    async def main() -> None:
        task = asyncio.create_task(informer.run())
        await api.idle.wait()
        if check is not None:
            await check()
        informer.stop()
        await task  # stop() makes run() return normally

    vtime.run(main())


def make(api: ScriptedApi, **kwargs: Any) -> tuple[Informer, Recorder, Metrics]:
    metrics = Metrics()
    kwargs.setdefault("settings", LISTING)
    informer = Informer(api, PODS, namespace="ns", metrics=metrics, **kwargs)  # type: ignore[arg-type]
    return informer, Recorder(informer), metrics


def restarts(metrics: Metrics, reason: str) -> float:
    value = metrics.registry.get_sample_value(
        "informer_watch_restarts_total", {"resource": "pods", "reason": reason}
    )
    return value or 0.0


def test_list_then_watch_tracks_every_event_and_bookmark() -> None:
    api = ScriptedApi()
    api.lists = [([cm("a", "10"), cm("b", "11")], "12")]
    api.watches = [
        [
            ev("ADDED", cm("c", "13")),
            ev("MODIFIED", cm("a", "14")),
            ev("DELETED", cm("b", "15")),
            bookmark("20"),
            END,
        ]
    ]
    informer, rec, metrics = make(api)
    run_until_idle(api, informer)

    assert rec.calls == [
        ("add", "a"),
        ("add", "b"),
        ("add", "c"),
        ("update", "a", "10", "14"),
        ("delete", "b"),
    ]
    assert informer.has_synced
    assert sorted(informer.store.keys()) == ["ns/a", "ns/c"]
    (call,) = api.list_calls
    assert call.pop("each") is informer._transform  # applied page by page, as decoded
    # A consistent read in pages: the watch cache would ignore the limit of an "0" read.
    assert call == {
        "namespace": "ns",
        "label_selector": None,
        "field_selector": None,
        "resource_version": "",
        "resource_version_match": None,
        "limit": 500,
    }
    first, second = api.watch_calls
    assert first["resource_version"] == "12"
    assert 300 <= first["timeout_seconds"] <= 600
    assert first["inactivity_timeout"] == 120.0
    assert second["resource_version"] == "20"  # resumed from the bookmark
    assert restarts(metrics, "closed") == 1
    stats = informer.statistics()
    assert (stats.events, stats.bookmarks, stats.lists, stats.objects) == (3, 1, 1, 2)
    gauge = metrics.registry.get_sample_value("informer_store_objects", {"resource": "pods"})
    assert gauge == 2


def test_an_event_older_than_our_own_stored_write_does_not_take_the_store_back() -> None:
    # The status writer stores the job its PUT returned (controller/status.py). Two passes in
    # a row can write twice before the watch brings the first write: that event is older than
    # what is stored, and storing it would show the next pass a failed job as still running.
    api = ScriptedApi()
    api.lists = [([cm("job", "10", status="Created")], "10")]
    informer, rec, _ = make(api)
    seen: list[str] = []

    def own_writes() -> None:
        informer.store.upsert(cm("job", "12", status="Failed"))

    def look() -> None:
        seen.append(informer.store.get("ns", "job")["status"])  # type: ignore[index]

    api.watches = [
        [
            own_writes,
            ev("MODIFIED", cm("job", "11", status="Running")),  # our first write
            look,
            ev("MODIFIED", cm("job", "12", status="Failed")),  # our second
            look,
            END,
        ]
    ]
    run_until_idle(api, informer)
    assert seen == ["Failed", "Failed"]
    # The second is the version stored already: no handler runs for it (its reconcile would
    # plan from what the last one planned from), see the test below.
    assert rec.calls == [("add", "job")]
    assert informer.statistics().events == 2  # both counted, and the watch resumes after them
    assert api.watch_calls[-1]["resource_version"] == "12"


def test_the_version_stored_already_is_skipped_and_any_other_is_applied() -> None:
    # Our status write's own event (the writer cached its PUT's answer) changes nothing; an
    # object recreated under the same name with the same resourceVersion string, a newer
    # version, and a delete are all applied and handled.
    api = ScriptedApi()
    api.lists = [([cm("job", "10", status="Created")], "10")]
    informer, rec, _ = make(api)

    def own_write() -> None:
        informer.store.upsert(cm("job", "11", status="Running"))

    recreated = cm("job", "11", status="Created")
    recreated["metadata"]["uid"] = "another"
    api.watches = [
        [
            own_write,
            ev("MODIFIED", cm("job", "11", status="Running")),  # its echo: skipped
            ev("MODIFIED", cm("job", "12", status="Failed")),  # a change: handled
            ev("MODIFIED", cm("job", "12", status="Failed")),  # the same event again: skipped
            ev("DELETED", cm("job", "12", status="Failed")),  # a delete: handled
            ev("ADDED", recreated),  # same name and version string, another uid: handled
            END,
        ]
    ]
    run_until_idle(api, informer)
    assert rec.calls == [
        ("add", "job"),
        ("update", "job", "11", "12"),
        ("delete", "job"),
        ("add", "job"),
    ]
    assert informer.store.get("ns", "job")["metadata"]["uid"] == "another"  # type: ignore[index]
    assert api.watch_calls[-1]["resource_version"] == "11"


def test_gone_relists_once_and_emits_only_real_changes() -> None:
    api = ScriptedApi()
    api.lists = [
        ([cm("keep", "1"), cm("change", "2"), cm("vanish", "3")], "5"),
        ([cm("keep", "1"), cm("change", "8"), cm("new", "9")], "10"),
    ]
    gone = ApiError(status=410, reason="Expired", message="too old resource version")
    api.watches = [[ev("MODIFIED", cm("keep", "6")), gone]]
    informer, rec, metrics = make(api)
    run_until_idle(api, informer)

    assert rec.calls[3:] == [
        ("update", "keep", "1", "6"),
        ("delete", "vanish"),
        ("add", "new"),
        ("update", "keep", "6", "1"),  # the list is the truth, even if it looks older
        ("update", "change", "2", "8"),
    ]
    relist = api.list_calls[1]
    assert (relist["resource_version"], relist["resource_version_match"]) == ("6", "NotOlderThan")
    assert relist["limit"] == 500
    assert api.watch_calls[-1]["resource_version"] == "10"
    assert restarts(metrics, "gone") == 1
    lists = metrics.registry.get_sample_value("informer_relists_total", {"resource": "pods"})
    assert lists == 2


def test_list_gone_falls_back_to_a_consistent_read() -> None:
    api = ScriptedApi()
    api.lists = [
        ([cm("a", "1")], "5"),
        ApiError(status=410, reason="Expired"),
        ([cm("a", "1")], "50"),
    ]
    api.watches = [[ApiError(status=410, reason="Expired")]]
    informer, rec, _ = make(api)
    run_until_idle(api, informer)

    assert [(c["resource_version"], c["resource_version_match"]) for c in api.list_calls] == [
        ("", None),
        ("5", "NotOlderThan"),
        ("", None),
    ]
    assert {c["limit"] for c in api.list_calls} == {500}
    assert rec.calls == [("add", "a")]  # nothing changed: no handler calls on the relist
    assert informer.resource_version == "50"


def test_too_large_resource_version_also_falls_back() -> None:
    api = ScriptedApi()
    too_large = ApiError(
        status=504,
        reason="Timeout",
        message="Too large resource version",
        body={"details": {"causes": [{"reason": "ResourceVersionTooLarge"}]}},
    )
    api.lists = [([], "5"), too_large, ([], "7")]
    api.watches = [[ApiError(status=410, reason="Expired")]]
    informer, _, _ = make(api)
    run_until_idle(api, informer)
    assert [c["resource_version"] for c in api.list_calls] == ["", "5", ""]
    assert informer.resource_version == "7"


def test_failing_handler_is_logged_and_the_watch_goes_on() -> None:
    api = ScriptedApi()
    api.lists = [([], "1")]
    api.watches = [[ev("ADDED", cm("bad", "2")), ev("ADDED", cm("good", "3"))]]
    informer, rec, _ = make(api)

    def explode(obj: dict[str, Any]) -> None:
        if obj["metadata"]["name"] == "bad":
            raise RuntimeError("handler bug")

    informer._on_add.insert(0, explode)  # the recorder must still see both
    run_until_idle(api, informer)
    assert rec.calls == [("add", "bad"), ("add", "good")]
    assert informer.statistics().handler_errors == 1
    assert informer.resource_version == "3"


def test_async_handlers_are_awaited_in_order() -> None:
    api = ScriptedApi()
    api.lists = [([cm("a", "1")], "1")]
    api.watches = [[ev("DELETED", cm("a", "2"))]]
    informer = Informer(api, PODS, settings=LISTING, namespace="ns")  # type: ignore[arg-type]
    seen: list[str] = []

    async def on_add(obj: dict[str, Any]) -> None:
        await asyncio.sleep(5)
        seen.append("add")

    async def on_delete(obj: dict[str, Any]) -> None:
        seen.append("delete")

    informer.add_handlers(on_add=on_add, on_delete=on_delete)
    run_until_idle(api, informer)
    assert seen == ["add", "delete"]


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (ConnectionResetError("reset"), "error"),
        (ApiError(status=500, reason="InternalError"), "error"),
    ],
)
def test_stream_failures_rewatch_from_the_last_version_after_backoff(
    failure: Exception, reason: str
) -> None:
    api = ScriptedApi()
    api.lists = [([], "1")]
    api.watches = [[ev("ADDED", cm("a", "4")), failure]]
    informer, _, metrics = make(api)
    started: list[float] = []

    async def check() -> None:
        started.append(asyncio.get_running_loop().time())

    run_until_idle(api, informer, check)
    assert len(api.list_calls) == 1  # no relist
    assert api.watch_calls[-1]["resource_version"] == "4"
    assert restarts(metrics, reason) == 1
    assert started[0] - vtime.START >= 0.6  # the backoff was slept (virtual time)


def test_a_throttled_watch_waits_at_least_the_servers_retry_after() -> None:
    # 429 on the watch itself: priority-and-fairness asked for a pause longer than our backoff.
    api = ScriptedApi()
    api.lists = [([], "1")]
    api.watches = [[ApiError(status=429, reason="TooManyRequests", retry_after=20.0)]]
    informer, _, metrics = make(api)
    started: list[float] = []

    async def check() -> None:
        started.append(asyncio.get_running_loop().time())

    run_until_idle(api, informer, check)
    assert restarts(metrics, "error") == 1
    assert started[0] - vtime.START >= 20.0  # virtual time


def test_silent_stream_is_reopened_at_once() -> None:
    # Idle resource types get no bookmarks, so inactivity is routine, not a failure.
    api = ScriptedApi()
    api.lists = [([], "1")]
    api.watches = [[ev("ADDED", cm("a", "4")), WatchInactive("silent")]]
    informer, _, metrics = make(api)

    async def check() -> None:
        assert asyncio.get_running_loop().time() == vtime.START

    run_until_idle(api, informer, check)
    assert len(api.list_calls) == 1
    assert api.watch_calls[-1]["resource_version"] == "4"
    assert restarts(metrics, "inactive") == 1


def test_list_errors_back_off_and_retry() -> None:
    api = ScriptedApi()
    api.lists = [ApiError(status=503, reason="ServiceUnavailable"), ([cm("a", "1")], "2")]
    informer, rec, _ = make(api)
    run_until_idle(api, informer)
    assert len(api.list_calls) == 2
    assert rec.calls == [("add", "a")]


def test_short_empty_streams_are_not_a_busy_loop() -> None:
    api = ScriptedApi()
    api.lists = [([], "1")]
    api.watches = [[END], [END], [END]]
    informer, _, metrics = make(api)

    async def check() -> None:
        assert asyncio.get_running_loop().time() - vtime.START >= 3 * 0.6

    run_until_idle(api, informer, check)
    assert restarts(metrics, "short") == 3


def test_transform_applies_before_store_and_handlers() -> None:
    api = ScriptedApi()
    container = {
        "name": "main",
        "env": [{"name": "X", "value": "1"}],
        "ports": [{"containerPort": 1}],
    }
    pod = cm("p", "1", spec={"containers": [container], "volumes": [{"name": "v"}]})
    pod["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    api.lists = [([pod], "1")]
    informer = Informer(api, PODS, settings=LISTING, namespace="ns", transform=project_pod)  # type: ignore[arg-type]
    handled: list[dict[str, Any]] = []
    informer.add_handlers(on_add=handled.append)
    run_until_idle(api, informer)
    stored = informer.store.get("ns", "p")
    assert stored is handled[0]
    assert stored is not None
    assert "managedFields" not in stored["metadata"]
    assert stored["spec"] == {"containers": [{"name": "main"}]}


def test_default_transform_drops_managed_fields_only() -> None:
    api = ScriptedApi()
    obj = cm("a", "1", data={"k": "v"})
    obj["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    api.lists = [([obj], "1")]
    informer = Informer(api, PODS, settings=LISTING, namespace="ns")  # type: ignore[arg-type]
    run_until_idle(api, informer)
    assert informer.store.get("ns", "a") == cm("a", "1", data={"k": "v"})


def test_handlers_cannot_be_added_after_start() -> None:
    api = ScriptedApi()
    api.lists = [([], "1")]
    informer = Informer(api, PODS, settings=LISTING)  # type: ignore[arg-type]

    async def check() -> None:
        with pytest.raises(RuntimeError):
            informer.add_handlers(on_add=lambda obj: None)

    run_until_idle(api, informer, check)


def test_cancel_from_outside_propagates() -> None:
    api = ScriptedApi()
    api.lists = [([], "1")]
    informer = Informer(api, PODS, settings=LISTING)  # type: ignore[arg-type]

    async def main() -> None:
        task = asyncio.create_task(informer.run())
        await api.idle.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    vtime.run(main())


def test_wait_synced_returns_after_the_initial_handlers() -> None:
    api = ScriptedApi()
    api.lists = [([cm("a", "1"), cm("b", "1")], "1")]
    informer, rec, _ = make(api)

    async def main() -> None:
        task = asyncio.create_task(informer.run())
        await informer.wait_synced()
        assert [c[1] for c in rec.calls] == ["a", "b"]
        informer.stop()
        await task

    vtime.run(main())


def test_an_update_keeps_the_cached_versions_parts_it_did_not_change() -> None:
    """A job's status write changes its status and resourceVersion, not its spec: the new
    version holds the cached version's spec (and unchanged conditions) instead of a copy, and
    what changed is the new version's, equal to what the server sent."""
    api = ScriptedApi()
    spec = {"replicas": 2, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
    created = {"type": "Created", "status": "True"}
    api.lists = [([cm("job", "10", spec=spec, status={"conditions": [created]})], "10")]
    running = {"type": "Running", "status": "True"}
    new_status = {"conditions": [created, running]}
    api.watches = [[ev("MODIFIED", cm("job", "11", spec=spec, status=new_status)), END]]
    informer, rec, _ = make(api)
    first: dict[str, Any] = {}

    def keep_first(obj: dict[str, Any]) -> None:
        first.update(obj)

    informer.add_handlers(on_add=keep_first)
    run_until_idle(api, informer)
    assert rec.calls == [("add", "job"), ("update", "job", "10", "11")]
    now = informer.store.get("ns", "job")
    assert now is not None and now["status"] == new_status and now["spec"] == spec
    assert now["spec"] is first["spec"]
    assert now["status"]["conditions"][0] is first["status"]["conditions"][0]
    assert now["status"] is not first["status"]
