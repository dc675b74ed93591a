"""Training progress, the kind-independent parts (jobcontroller): what a report may say,
when it is written, the per-job write bound (with a fake sleep) and who may report."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
from typing import Any

import pytest

from jobcontroller.controller.progressauth import TokenAuthorizer, bearer_token
from jobcontroller.controller.progresscoalescer import Coalescer
from jobcontroller.core.progress import (
    MAX_BODY_BYTES,
    ProgressTarget,
    ReportError,
    is_stale,
    parse_report,
    same_progress,
    status_patch,
)

Obj = dict[str, Any]

PYTORCHJOBS = ProgressTarget(
    group="kubeflow.org", version="v1", plural="pytorchjobs", kind="PyTorchJob"
)
NOW = dt.datetime(2026, 8, 10, 12, 0, tzinfo=dt.UTC)


def token_audience(namespace: str, name: str) -> str:
    return PYTORCHJOBS.audience(namespace, name)


def _report(**status: Any) -> bytes:
    return json.dumps({"trainerStatus": status}).encode()


# -- reports -----------------------------------------------------------------------------


def test_a_full_report_is_kept_as_sent_and_stamped_when_untimed() -> None:
    metrics = [{"name": "loss", "value": "0.25"}, {"name": "accuracy", "value": "0.9"}]
    got = parse_report(
        _report(progressPercentage=45, estimatedRemainingSeconds=120, metrics=metrics), now=NOW
    )
    assert got == {
        "progressPercentage": 45,
        "estimatedRemainingSeconds": 120,
        "metrics": metrics,
        "lastUpdatedTime": "2026-08-10T12:00:00Z",
    }


def test_the_reporters_time_is_kept_in_utc() -> None:
    got = parse_report(_report(lastUpdatedTime="2026-08-10T14:00:00+02:00"), now=NOW)
    assert got == {"lastUpdatedTime": "2026-08-10T12:00:00Z"}


def test_a_report_without_trainer_status_stores_nothing() -> None:
    assert parse_report(b"{}", now=NOW) is None
    assert parse_report(b'{"trainerStatus": null}', now=NOW) is None


@pytest.mark.parametrize(
    ("body", "says"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "must be a JSON object"),
        (b'{"progressPercentage": 5}', 'wrap them: {"trainerStatus"'),
        (_report(progress=5), "unknown field(s) in trainerStatus: progress"),
        (_report(progressPercentage=101), "progressPercentage must be between 0 and 100"),
        (_report(progressPercentage=-1), "between 0 and 100, got -1"),
        (_report(progressPercentage=50.5), "progressPercentage must be an integer"),
        (_report(progressPercentage=True), "must be an integer, got true"),
        (_report(estimatedRemainingSeconds=-3), "estimatedRemainingSeconds must be between"),
        (_report(estimatedRemainingSeconds=2**31), "between 0 and 2147483647"),
        (_report(metrics={"loss": "1"}), "metrics must be a list"),
        (_report(metrics=[{"name": "loss", "value": 0.5}]), "metrics[0].value must be a string"),
        (_report(metrics=[{"name": "", "value": "1"}]), "metrics[0].name must be 1 to 64"),
        (_report(metrics=[{"name": "x" * 65, "value": "1"}]), "1 to 64 characters, got 65"),
        (_report(metrics=[{"name": "a", "value": "1", "step": 3}]), "only name and value"),
        (
            _report(metrics=[{"name": f"m{i}", "value": "1"} for i in range(257)]),
            "257 items, at most 256",
        ),
        (_report(lastUpdatedTime="yesterday"), "not an RFC 3339 time"),
        (_report(lastUpdatedTime="2026-08-10T12:00:00"), "needs a time zone"),
    ],
)
def test_a_bad_report_is_refused_with_the_field_named(body: bytes, says: str) -> None:
    with pytest.raises(ReportError) as caught:
        parse_report(body, now=NOW)
    assert caught.value.code == 422
    assert says in caught.value.message


def test_the_largest_valid_report_fits_the_body_bound() -> None:
    """256 metrics of 64-character names and values: what the CRD allows must be sendable."""
    metrics = [{"name": f"{i:064d}", "value": "v" * 64} for i in range(256)]
    body = _report(progressPercentage=1, estimatedRemainingSeconds=1, metrics=metrics)
    assert len(body) <= MAX_BODY_BYTES
    assert parse_report(body, now=NOW) is not None


def test_only_a_change_beyond_the_time_is_a_change() -> None:
    have = {"progressPercentage": 10, "lastUpdatedTime": "2026-08-10T11:00:00Z"}
    assert same_progress(have, {**have, "lastUpdatedTime": "2026-08-10T12:00:00Z"})
    assert not same_progress(have, {**have, "progressPercentage": 11})
    assert not same_progress(have, {**have, "metrics": [{"name": "a", "value": "1"}]})
    assert not same_progress(None, have)


def test_a_held_back_report_never_undoes_a_newer_one() -> None:
    """Two replicas each bound their own writes: the one holding an older report must not
    write it over the newer one the other replica wrote meanwhile."""
    newer = {"progressPercentage": 60, "lastUpdatedTime": "2026-08-10T12:00:03Z"}
    older = {"progressPercentage": 50, "lastUpdatedTime": "2026-08-10T12:00:01Z"}
    assert is_stale(newer, older)
    assert not is_stale(older, newer)
    assert not is_stale(older, {**older, "progressPercentage": 51})  # same second: written
    assert not is_stale(None, older)


def test_the_patch_drops_what_the_last_report_left_out() -> None:
    patch = status_patch({"progressPercentage": 3, "lastUpdatedTime": "t"})
    assert patch == {
        "status": {
            "trainerStatus": {
                "progressPercentage": 3,
                "estimatedRemainingSeconds": None,
                "metrics": None,
                "lastUpdatedTime": "t",
            }
        }
    }


# -- the write bound -----------------------------------------------------------------------


class _Clock:
    """A sleep that returns when the test says time has passed."""

    def __init__(self) -> None:
        self.ticks: asyncio.Queue[None] = asyncio.Queue()
        self.sleeping = 0

    async def sleep(self, _: float) -> None:
        self.sleeping += 1
        await self.ticks.get()

    async def tick(self) -> None:
        self.ticks.put_nowait(None)
        for _ in range(5):
            await asyncio.sleep(0)


async def test_a_chatty_reporter_gets_one_write_per_interval_the_last_report_winning() -> None:
    written: list[tuple[str, str, Obj]] = []

    async def write(ns: str, name: str, status: Obj) -> bool:
        written.append((ns, name, status))
        return True

    clock = _Clock()
    bound = Coalescer(interval=5.0, write=write, sleep=clock.sleep)
    assert await bound.submit("ns", "a", {"progressPercentage": 0}) is True
    for p in range(1, 101):
        assert await bound.submit("ns", "a", {"progressPercentage": p}) is False
    # Another TrainJob is not held back by the first one's reports.
    assert await bound.submit("ns", "b", {"progressPercentage": 7}) is True
    assert [s["progressPercentage"] for _, _, s in written] == [0, 7]
    await clock.tick()  # a's interval ends: its latest report goes out
    assert [s["progressPercentage"] for _, _, s in written] == [0, 7, 100]
    assert bound.coalesced == 100
    await clock.tick()
    await clock.tick()  # quiet intervals: the slots are dropped
    assert bound.tracked == 0
    assert await bound.submit("ns", "a", {"progressPercentage": 101}) is True
    await bound.close()


async def test_a_failed_deferred_write_is_not_retried_in_a_loop() -> None:
    calls = 0

    async def write(ns: str, name: str, status: Obj) -> bool:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise ReportError(404, "NotFound", "gone")
        return True

    clock = _Clock()
    bound = Coalescer(interval=5.0, write=write, sleep=clock.sleep)
    await bound.submit("ns", "a", {"progressPercentage": 1})
    await bound.submit("ns", "a", {"progressPercentage": 2})
    await clock.tick()
    await clock.tick()
    assert calls == 2
    assert bound.tracked == 0


# -- tokens ---------------------------------------------------------------------------------


def test_bearer_tokens_are_read_as_upstream_reads_them() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("  bearer   abc ") == "abc"
    assert bearer_token("Basic abc") == ""
    assert bearer_token("Bearer a b") == ""
    assert bearer_token(None) == ""


def _jwt(claims: Obj) -> str:
    enc = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{enc({'alg': 'RS256'})}.{enc(claims)}.sig"


async def test_junk_tokens_are_refused_without_asking_the_api_server() -> None:
    """The API client is never touched (None here): junk costs no TokenReview."""
    auth = TokenAuthorizer(api=None, clock=lambda: 1000.0)  # type: ignore[arg-type]  # no API call may happen
    auth.add_kind(PYTORCHJOBS, lambda *_: True)
    aud = token_audience("ns", "tj")
    cases = {
        None: 401,
        "Bearer not-a-jwt": 401,
        f"Bearer {_jwt({'aud': ['other'], 'exp': 2000})}": 403,
        f"Bearer {_jwt({'aud': [aud], 'exp': 999})}": 401,
    }
    for header, code in cases.items():
        assert (await auth.authorize(header, PYTORCHJOBS, "ns", "tj")).code == code, header
    assert auth.reviews == 0


class _ReviewingApi:
    """Answers TokenReviews (``authenticated`` as told) and pod reads; counts them."""

    def __init__(self, *, authenticated: bool) -> None:
        self.authenticated = authenticated
        self.reviews = self.pod_reads = 0

    async def create(self, resource: Any, body: Obj, **_: Any) -> Obj:
        self.reviews += 1
        user = {
            "username": "system:serviceaccount:ns:default",
            "extra": {
                "authentication.kubernetes.io/pod-name": ["tj-node-0-0"],
                "authentication.kubernetes.io/pod-uid": ["pod-uid"],
            },
        }
        return {"status": {"authenticated": self.authenticated, "user": user}}

    async def get(self, resource: Any, name: str, **_: Any) -> Obj:
        self.pod_reads += 1
        return {"metadata": {"name": name, "uid": "pod-uid"}}


async def test_a_reporting_pod_costs_one_review_per_token_and_refusals_are_rechecked() -> None:
    now = [1000.0]
    api = _ReviewingApi(authenticated=True)
    auth = TokenAuthorizer(api=api, clock=lambda: now[0])  # type: ignore[arg-type]  # a stand-in answering the two calls
    auth.add_kind(PYTORCHJOBS, lambda *_: True)
    token = _jwt({"aud": [token_audience("ns", "tj")], "exp": 1000 + 3600})
    for _ in range(100):
        now[0] += 5
        assert (await auth.authorize(f"Bearer {token}", PYTORCHJOBS, "ns", "tj")).allowed
    assert (api.reviews, api.pod_reads) == (1, 1)
    now[0] = 1000 + 3600  # the token expired: refused without a review
    assert (await auth.authorize(f"Bearer {token}", PYTORCHJOBS, "ns", "tj")).code == 401
    assert api.reviews == 1

    api = _ReviewingApi(authenticated=False)
    auth = TokenAuthorizer(api=api, clock=lambda: now[0])  # type: ignore[arg-type]  # the same stand-in
    auth.add_kind(PYTORCHJOBS, lambda *_: True)
    now[0] = 1000.0
    for _ in range(10):
        assert (await auth.authorize(f"Bearer {token}", PYTORCHJOBS, "ns", "tj")).code == 401
    assert api.reviews == 1  # a refusal is remembered...
    now[0] += 61
    await auth.authorize(f"Bearer {token}", PYTORCHJOBS, "ns", "tj")
    assert api.reviews == 2  # ...for a minute
