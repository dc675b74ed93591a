"""The CRD lookup an operator makes before it starts (``jobcontroller.operator.lookup_crds``):
every CRD asked on one client, each answered on its own, from the API server's cache unless
the cache says it is not there."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobcontroller.operator as operator
from jobcontroller.operator import all_installed, lookup_crds
from jobcontroller.runtime.flags import Settings
from jobcontroller.runtime.kube import ApiError


class FakeApi:
    """Answers metadata GETs of CRDs by name, the cache's (``resource_version="0"``) and the
    reads alike unless told; records them and the GETs in flight at once."""

    made = 0

    def __init__(self, replies: dict[str, object], cached: dict[str, object]) -> None:
        self.replies = replies
        self.cached = cached
        self.asked: list[tuple[str, str | None]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.closed = False

    async def get_metadata(
        self, resource: Any, name: str, *, resource_version: str | None = None
    ) -> dict[str, Any]:
        self.asked.append((name, resource_version))
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            reply = self.replies[name]
            if resource_version == "0":
                reply = self.cached.get(name, reply)
            if isinstance(reply, BaseException):
                raise reply
            return {"metadata": {"name": name}}
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        self.closed = True


NOT_FOUND = ApiError(status=404, reason="NotFound")


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi(
        {
            "here.example.com": True,
            "new.example.com": True,
            "gone.example.com": NOT_FOUND,
            "forbidden.example.com": ApiError(status=403, reason="Forbidden"),
            "reset.example.com": ConnectionResetError("reset by peer"),
            "after.example.com": True,
        },
        # Installed a moment ago: not in the API server's cache yet.
        cached={"new.example.com": NOT_FOUND},
    )

    async def from_config(**kwargs: Any) -> FakeApi:
        FakeApi.made += 1
        return fake

    FakeApi.made = 0
    monkeypatch.setattr(operator.KubeApi, "from_config", from_config)
    return fake


def test_each_crd_is_answered_from_one_client_on_one_connection(api: FakeApi) -> None:
    names = [
        "here.example.com",
        "new.example.com",
        "gone.example.com",
        "forbidden.example.com",
        "reset.example.com",
        "after.example.com",
    ]
    answers = lookup_crds(Settings(), names)
    # Refused: that one unanswered. No connection: it and the rest unanswered (the API server
    # is not answering), the answers before kept: a CRD found missing stays missing.
    assert answers == {
        "here.example.com": True,
        "new.example.com": True,
        "gone.example.com": False,
        "forbidden.example.com": None,
        "reset.example.com": None,
        "after.example.com": None,
    }
    assert FakeApi.made == 1
    assert api.most_in_flight == 1
    assert api.closed
    # The cache first; a read only to confirm that one is not there.
    assert api.asked == [
        ("here.example.com", "0"),
        ("new.example.com", "0"),
        ("new.example.com", None),
        ("gone.example.com", "0"),
        ("gone.example.com", None),
        ("forbidden.example.com", "0"),
        ("reset.example.com", "0"),
    ]


def test_nothing_is_asked_after_a_needed_crd_is_found_missing(api: FakeApi) -> None:
    """What needs the missing CRD is not served: the CRDs after it are not asked for (a
    cluster without JobSet answers the all-in-one's start in two GETs, not nine)."""
    names = ["here.example.com", "gone.example.com", "new.example.com", "after.example.com"]
    answers = lookup_crds(Settings(), names, needed=names[:3])
    assert answers == {
        "here.example.com": True,
        "gone.example.com": False,
        "new.example.com": None,
        "after.example.com": None,
    }
    assert api.asked == [
        ("here.example.com", "0"),
        ("gone.example.com", "0"),
        ("gone.example.com", None),
    ]
    # Missing but not needed: the lookups go on.
    api.asked.clear()
    answers = lookup_crds(Settings(), names, needed=["after.example.com"])
    assert answers == dict.fromkeys(names, True) | {"gone.example.com": False}
    assert len(api.asked) == 6


def test_no_client_when_there_is_nothing_to_ask(api: FakeApi) -> None:
    assert lookup_crds(Settings(), []) == {}
    assert FakeApi.made == 0


def test_no_client_at_all_leaves_every_crd_unanswered(monkeypatch: pytest.MonkeyPatch) -> None:
    async def from_config(**kwargs: Any) -> FakeApi:
        raise OSError("no kubeconfig")

    monkeypatch.setattr(operator.KubeApi, "from_config", from_config)
    assert lookup_crds(Settings(), ["a.example.com", "b.example.com"]) == {
        "a.example.com": None,
        "b.example.com": None,
    }


def test_all_installed_reads_the_answers() -> None:
    answers: dict[str, bool | None] = {"a": True, "b": True, "c": False, "d": None}
    assert all_installed(answers, ["a", "b"]) is True
    assert all_installed(answers, ["a", "c"]) is False
    assert all_installed(answers, ["a", "d"]) is None
    # One missing is enough to know: not installed, whatever was not answered.
    assert all_installed(answers, ["d", "c"]) is False
    # A name never asked counts as unanswered.
    assert all_installed(answers, ["a", "e"]) is None


def test_a_busy_api_server_is_not_asked_crd_after_crd(api: FakeApi) -> None:
    """429 or 5xx after the client's own retries: the rest would fail the same way, each after
    its own retries; unanswered at once, with what was answered before kept."""
    api.replies["busy.example.com"] = ApiError(status=503, reason="ServiceUnavailable")
    answers = lookup_crds(Settings(), ["gone.example.com", "busy.example.com", "here.example.com"])
    assert answers == {
        "gone.example.com": False,
        "busy.example.com": None,
        "here.example.com": None,
    }
    assert [name for name, _ in api.asked] == [
        "gone.example.com",
        "gone.example.com",
        "busy.example.com",
    ]


def test_a_crd_the_cache_misses_and_the_read_cannot_answer_is_unanswered(api: FakeApi) -> None:
    api.cached["forbidden.example.com"] = NOT_FOUND  # the cache: 404; the read: 403
    answers = lookup_crds(Settings(), ["forbidden.example.com", "here.example.com"])
    assert answers == {"forbidden.example.com": None, "here.example.com": True}
