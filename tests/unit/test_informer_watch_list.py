"""Streamed lists: the informer reads its initial state on the watch itself (virtual time).

The scripts are what a server sends for ``sendInitialEvents=true``: an ADDED event per object,
then a bookmark annotated ``k8s.io/initial-events-end``, then the changes. The real API
server's side is in tests/integration/test_informer.py.
"""

from __future__ import annotations

from typing import Any

from test_informer_loop import END, ScriptedApi, bookmark, cm, ev, make, run_until_idle
from test_informer_recovery import TimedApi

from jobcontroller.runtime.informer import InformerSettings
from jobcontroller.runtime.kube import ApiError

STREAMING = InformerSettings()  # the default

GONE = ApiError(status=410, reason="Expired", message="too old resource version")


def end_of_initial_events(rv: str) -> dict[str, Any]:
    event = bookmark(rv)
    event["object"]["metadata"]["annotations"] = {"k8s.io/initial-events-end": "true"}
    return event


def test_the_initial_state_comes_on_the_watch_and_the_stream_goes_on() -> None:
    api = ScriptedApi()
    api.watches = [
        [
            ev("ADDED", cm("a", "10")),
            ev("ADDED", cm("b", "11")),
            end_of_initial_events("12"),
            ev("MODIFIED", cm("a", "13")),
            bookmark("20"),
            END,
        ]
    ]
    informer, rec, metrics = make(api, settings=STREAMING)
    seen_at_first_add: list[bool] = []
    informer.add_handlers(on_add=lambda obj: seen_at_first_add.append(informer.has_synced))
    run_until_idle(api, informer)

    assert api.list_calls == []  # no LIST at all
    assert rec.calls == [("add", "a"), ("add", "b"), ("update", "a", "10", "13")]
    # Handlers ran once the whole initial state was in (as after a LIST), before it counted
    # as synced; the store holds the later change.
    assert seen_at_first_add == [False, False]
    assert informer.has_synced
    assert informer.store.get("ns", "a") == cm("a", "13")
    first, second = api.watch_calls
    assert first["send_initial_events"] is True
    assert first["resource_version"] == ""  # a consistent read
    assert second["send_initial_events"] is False
    assert second["resource_version"] == "20"
    stats = informer.statistics()
    assert (stats.lists, stats.events, stats.objects) == (1, 1, 2)
    relists = metrics.registry.get_sample_value("informer_relists_total", {"resource": "pods"})
    assert relists == 1


def test_nothing_is_stored_or_announced_before_the_bookmark_that_ends_the_initial_events() -> None:
    api = ScriptedApi()
    api.watches = [
        # The stream ends (timeout, a dropped connection) half-way through the initial events.
        [ev("ADDED", cm("a", "10")), END],
        [
            ev("ADDED", cm("b", "11")),
            ev("ADDED", cm("c", "12")),
            ev("DELETED", cm("c", "13")),
            end_of_initial_events("13"),
        ],
    ]
    informer, rec, _ = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "b")]
    assert sorted(informer.store.keys()) == ["ns/b"]
    assert [c["send_initial_events"] for c in api.watch_calls] == [True, True, False]
    assert api.watch_calls[2]["resource_version"] == "13"


def test_a_server_that_cannot_stream_a_list_is_listed_from_then_on() -> None:
    api = TimedApi()
    refused = ApiError(
        status=422, reason="Invalid", message="sendInitialEvents is forbidden for watch"
    )
    api.lists = [([cm("a", "10")], "10"), ([cm("a", "30")], "30")]
    api.watches = [[refused], [ev("MODIFIED", cm("a", "11")), GONE]]
    informer, rec, metrics = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "a"), ("update", "a", "10", "11"), ("update", "a", "11", "30")]
    assert [c["send_initial_events"] for c in api.watch_calls] == [True, False, False]
    # The relist after 410 is a LIST again, and asks for nothing older than what was seen.
    assert [c["resource_version"] for c in api.list_calls] == ["", "11"]
    # The refusal is no failure: no backoff before the LIST.
    restarted = metrics.registry.get_sample_value(
        "informer_watch_restarts_total", {"resource": "pods", "reason": "error"}
    )
    assert restarted is None
    assert api.times[1] == ("list", 0.0)


def test_after_410_the_state_is_streamed_again_from_what_was_seen_or_else_listed() -> None:
    api = ScriptedApi()
    api.watches = [
        [ev("ADDED", cm("a", "10")), ev("ADDED", cm("b", "10")), end_of_initial_events("10"), GONE],
        [ev("ADDED", cm("a", "20")), end_of_initial_events("20"), GONE],
        # Nothing older than 20: compacted too.
        [GONE],
    ]
    # A consistent read: b is gone and a changed while nobody watched.
    api.lists = [([cm("a", "40")], "41")]
    informer, rec, _ = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [
        ("add", "a"),
        ("add", "b"),
        ("delete", "b"),
        ("update", "a", "10", "20"),
        ("update", "a", "20", "40"),
    ]
    streamed = [c["resource_version"] for c in api.watch_calls if c["send_initial_events"]]
    assert streamed == ["", "10", "20"]
    assert [c["resource_version"] for c in api.list_calls] == [""]
    assert api.watch_calls[-1] == api.watch_calls[-1] | {
        "send_initial_events": False,
        "resource_version": "41",
    }


def test_a_cache_still_initializing_is_read_by_a_list_at_once_and_streamed_next_time() -> None:
    api = TimedApi()
    initializing = ApiError(
        status=429, reason="TooManyRequests", message="storage is (re)initializing"
    )
    initializing.retry_after = 1.0
    api.watches = [
        [initializing],
        [ev("MODIFIED", cm("a", "11")), GONE],
        [ev("ADDED", cm("a", "11")), end_of_initial_events("12")],
    ]
    api.lists = [([cm("a", "10")], "10")]
    informer, rec, _ = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "a"), ("update", "a", "10", "11")]
    assert [kind for kind, _ in api.times] == ["watch", "list", "watch", "watch", "watch"]
    assert max(t for _, t in api.times) < 0.5  # no Retry-After waited, no backoff
    assert [c["send_initial_events"] for c in api.watch_calls] == [True, False, True, False]


def test_a_server_error_amid_the_initial_events_gets_a_list_at_once() -> None:
    api = TimedApi()
    broken = ApiError(status=500, reason="InternalError", message="etcd is unhappy")
    api.watches = [[ev("ADDED", cm("a", "10")), broken], [ev("MODIFIED", cm("a", "12"))]]
    api.lists = [([cm("a", "11")], "11")]
    informer, rec, _ = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "a"), ("update", "a", "11", "12")]
    assert [kind for kind, _ in api.times] == ["watch", "list", "watch", "watch"]
    assert api.times[1][1] == 0.0


def test_a_forbidden_stream_is_an_ordinary_failure_backed_off_and_streamed_again() -> None:
    api = TimedApi()
    forbidden = ApiError(status=403, reason="Forbidden", message="cannot watch pods")
    api.watches = [[forbidden], [ev("ADDED", cm("a", "10")), end_of_initial_events("11")]]
    informer, rec, _ = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "a")]
    assert api.list_calls == []  # a LIST would be forbidden as well: no second request for it
    assert [c["send_initial_events"] for c in api.watch_calls] == [True, True, False]
    assert api.times[1][1] >= 0.4  # after the backoff (0.8 s, jittered)


def test_a_stream_that_ends_before_its_state_is_in_twice_in_a_row_is_listed_instead() -> None:
    api = TimedApi()
    api.watches = [
        [ev("ADDED", cm("a", "10")), END],  # e.g. a watcher the server closed for lagging
        [ev("ADDED", cm("a", "10")), ev("ADDED", cm("b", "11")), END],
        [ev("MODIFIED", cm("b", "13"))],  # the watch after the LIST
    ]
    api.lists = [([cm("a", "10"), cm("b", "12")], "12")]
    informer, rec, metrics = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "a"), ("add", "b"), ("update", "b", "12", "13")]
    assert [kind for kind, _ in api.times] == ["watch", "watch", "list", "watch", "watch"]
    # An end before the bookmark backs off: never a hot loop of whole-state streams.
    first, second = (t for _, t in api.times[:2])
    assert second - first >= 0.4
    incomplete = metrics.registry.get_sample_value(
        "informer_watch_restarts_total", {"resource": "pods", "reason": "incomplete"}
    )
    assert incomplete == 2


def test_an_end_bookmark_without_a_version_does_not_count_as_the_state() -> None:
    api = TimedApi()
    api.watches = [
        [ev("ADDED", cm("a", "10")), end_of_initial_events("")],
        [ev("ADDED", cm("a", "10")), end_of_initial_events("11")],
    ]
    informer, rec, _ = make(api, settings=STREAMING)
    run_until_idle(api, informer)

    assert rec.calls == [("add", "a")]  # once, from the second stream
    assert [c["resource_version"] for c in api.watch_calls] == ["", "", "11"]
