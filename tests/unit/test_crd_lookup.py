"""The CRD lookup an operator makes before it starts (``jobcontroller.operator.lookup_crds``):
every CRD asked at once on one client, each answered on its own."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import jobcontroller.operator as operator
from jobcontroller.operator import all_installed, lookup_crds
from jobcontroller.runtime.flags import Settings
from jobcontroller.runtime.kube import ApiError


class FakeApi:
    """Answers GETs of CRDs by name; counts the clients made and the GETs in flight at once."""

    made = 0

    def __init__(self, replies: dict[str, object]) -> None:
        self.replies = replies
        self.in_flight = 0
        self.most_in_flight = 0
        self.closed = False

    async def get(self, resource: Any, name: str) -> dict[str, Any]:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.01)
            reply = self.replies[name]
            if isinstance(reply, BaseException):
                raise reply
            return {"metadata": {"name": name}}
        finally:
            self.in_flight -= 1

    async def close(self) -> None:
        self.closed = True


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeApi:
    fake = FakeApi(
        {
            "here.example.com": True,
            "gone.example.com": ApiError(status=404, reason="NotFound"),
            "forbidden.example.com": ApiError(status=403, reason="Forbidden"),
            "reset.example.com": ConnectionResetError("reset by peer"),
            "slow.example.com": TimeoutError("no answer"),
        }
    )

    async def from_config(**kwargs: Any) -> FakeApi:
        FakeApi.made += 1
        return fake

    FakeApi.made = 0
    monkeypatch.setattr(operator.KubeApi, "from_config", from_config)
    return fake


def test_each_crd_is_answered_on_its_own_from_one_client_in_parallel(api: FakeApi) -> None:
    names = [
        "here.example.com",
        "gone.example.com",
        "forbidden.example.com",
        "reset.example.com",
        "slow.example.com",
    ]
    answers = lookup_crds(Settings(), names)
    # A GET that failed (refused, reset, timed out) is unanswered; it does not take the
    # others' answers with it: a CRD found missing stays missing.
    assert answers == {
        "here.example.com": True,
        "gone.example.com": False,
        "forbidden.example.com": None,
        "reset.example.com": None,
        "slow.example.com": None,
    }
    assert FakeApi.made == 1
    assert api.most_in_flight == len(names)
    assert api.closed


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
