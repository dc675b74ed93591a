"""The executor's creation passes: a probe then the rest, a first refusal ends the pass, and a
job that is suspended or deleted while its pass is under way gets no further object."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from controller_fakes import KEY, FakeApi, catch_up, tf_controller, tf_job

from jobcontroller.controller.executor import _WRITE_CONCURRENCY
from jobcontroller.runtime.kube import ApiError, Resource


class RefusingApi(FakeApi):
    """Refuses every pod (the template is invalid), as the API server does: 422."""

    async def create(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        if resource.kind == "Pod":
            self.created.append("refused:" + body["metadata"]["name"])
            raise ApiError(status=422, reason="Invalid", message="spec.containers[0]: bad port")
        return await super().create(resource, body, **kwargs)


async def test_a_refused_template_costs_one_call_per_pass_not_one_per_pod() -> None:
    job = tf_job(replicas=50)
    api = RefusingApi(job)
    controller = tf_controller(api, cached=[job])
    with pytest.raises(ApiError):  # the refusal is the reconcile's error: retried with backoff
        await controller.reconcile(KEY)
    assert [name for name in api.created if name.startswith("refused:")] == ["refused:tf-worker-0"]
    state = controller.states.get(KEY)
    assert state is not None and state.create_failure is not None
    failure = state.create_failure
    assert (failure.code, failure.count, failure.permanent) == (422, 1, True)


class SuspendingApi(FakeApi):
    """Suspends the job in the operator's cache as the fifth pod is created."""

    def __init__(self, *objects: Any) -> None:
        super().__init__(*objects)
        self.on_fifth: Any = None
        self.pods = 0

    async def create(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        created = await super().create(resource, body, **kwargs)
        if resource.kind == "Pod":
            self.pods += 1
            if self.pods == 5 and self.on_fifth:
                self.on_fifth()
        return created


async def test_suspending_a_job_stops_its_pass_at_once() -> None:
    job = tf_job(replicas=60)
    api = SuspendingApi(job)
    controller = tf_controller(api, cached=[job])

    def suspend() -> None:
        store = controller.watch.job_store
        current = copy.deepcopy(store.get("ns", "tf"))
        current["spec"].setdefault("runPolicy", {})["suspend"] = True
        store.upsert(current)

    api.on_fifth = suspend
    await controller.reconcile(KEY)
    # The pods go first in the plan: the probe, then the rest at once, of which the first
    # _WRITE_CONCURRENCY got their write slots, and past their check, before the fifth pod was
    # created. No creation that got its slot later is sent.
    assert 5 <= api.pods <= 1 + _WRITE_CONCURRENCY


class QuotaApi(FakeApi):
    """Refuses pods past the tenth, as a ResourceQuota of ten pods does: 403."""

    def __init__(self, *objects: Any) -> None:
        super().__init__(*objects)
        self.pods = self.refused = 0

    async def create(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        if resource.kind == "Pod":
            await asyncio.sleep(0)  # in flight together, as on the wire
            if self.pods == 10:
                self.refused += 1
                raise ApiError(status=403, reason="Forbidden", message="exceeded quota: pods=10")
            self.pods += 1
        return await super().create(resource, body, **kwargs)


async def test_a_quota_running_out_costs_at_most_the_calls_in_flight() -> None:
    job = tf_job(replicas=100)
    api = QuotaApi(job)
    controller = tf_controller(api, cached=[job])
    with pytest.raises(ApiError):
        await controller.reconcile(KEY)
    assert api.pods == 10
    assert 1 <= api.refused <= _WRITE_CONCURRENCY - 9  # the rest of the first 16 in flight
    state = controller.states.get(KEY)
    assert state is not None and state.create_failure is not None
    assert (state.create_failure.code, state.create_failure.permanent) == (403, False)
    # The next pass, once the caches show what was created: the probe is refused, nothing
    # else is sent.
    refused = api.refused
    catch_up(controller, api)
    with pytest.raises(ApiError):
        await controller.reconcile(KEY)
    assert (api.pods, api.refused) == (10, refused + 1)


async def test_a_pass_creates_a_probe_then_the_rest_at_once() -> None:
    """Two round trips for a job's first objects, not one per doubling: after the first
    object was created, every other one of the pass is in flight together."""
    job = tf_job(replicas=8)
    api = ConcurrencyApi(job)
    controller = tf_controller(api, cached=[job])
    await controller.reconcile(KEY)
    assert api.created_names[0] == "tf-worker-0"
    assert len(api.created_names) == 16  # 8 pods and their 8 Services
    assert api.most_in_flight == 15  # all but the probe at once


async def test_a_big_jobs_creations_stay_within_the_write_slots() -> None:
    job = tf_job(replicas=40)
    api = ConcurrencyApi(job)
    controller = tf_controller(api, cached=[job])
    await controller.reconcile(KEY)
    assert len(api.created_names) == 80
    assert api.most_in_flight == _WRITE_CONCURRENCY


class ConcurrencyApi(FakeApi):
    """Counts the pods and Services being created at once (each yields to the loop twice)."""

    def __init__(self, *objects: Any) -> None:
        super().__init__(*objects)
        self.in_flight = self.most_in_flight = 0
        self.created_names: list[str] = []

    async def create(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        if resource.kind not in ("Pod", "Service"):  # the Events
            return await super().create(resource, body, **kwargs)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        try:
            created = await super().create(resource, body, **kwargs)
        finally:
            self.in_flight -= 1
        self.created_names.append(body["metadata"]["name"])
        return created
