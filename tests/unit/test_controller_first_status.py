"""A job's first status write of a process goes out with the pass's first actions, not after
them: it never waits and is derived before them, so it costs no round trip of its own (a new
TFJob's pass is its probe with the Created condition, then the rest of its objects)."""

from __future__ import annotations

import asyncio
from typing import Any

from controller_fakes import (
    KEY,
    RUNNING_STATUS,
    FakeApi,
    catch_up,
    tf_controller,
    tf_job,
    true_conditions,
    worker_pod,
)

from jobcontroller.runtime.kube import Resource


class WireApi(FakeApi):
    """Every write yields to the loop before it lands, as on the wire; records how many pods
    and Services existed, and the job's annotations, when each status write landed."""

    def __init__(self, *objects: Any) -> None:
        super().__init__(*objects)
        self.children = 0
        self.at_status_write: list[tuple[int, dict[str, str]]] = []

    async def create(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        created = await super().create(resource, body, **kwargs)
        if resource.kind in ("Pod", "Service"):
            self.children += 1
        return created

    async def merge_patch(self, resource: Resource, name: str, patch: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        return await super().merge_patch(resource, name, patch, **kwargs)

    async def replace(self, resource: Resource, body: dict[str, Any], **kwargs: Any) -> Any:
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        written = await super().replace(resource, body, **kwargs)
        annotations = dict(self.job["metadata"].get("annotations") or {})
        self.at_status_write.append((self.children, annotations))
        return written


async def test_a_new_jobs_created_condition_is_written_with_its_probe() -> None:
    job = tf_job(replicas=4)
    api = WireApi(job)
    controller = tf_controller(api, cached=[job])
    await controller.reconcile(KEY)
    assert api.children == 8  # 4 pods and their 4 Services
    # One status write, landed before the rest of the objects (after them, it saw all 8).
    assert [children for children, _ in api.at_status_write] == [0]
    assert "Created" in true_conditions(api.job)
    # The next pass, once the caches show what was created, writes as it always did.
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert len(api.at_status_write) == 1  # nothing new to write


async def test_a_first_write_in_a_pass_that_patches_the_job_waits_for_the_patch() -> None:
    """An operator just restarted (its first write of the job) meets a restart: the pass
    patches the job's restart ledger. The write, made from the job read before, would be
    refused (409) if it went first; it goes after the patch, from the patched job."""
    job = tf_job(status=RUNNING_STATUS)
    pods = [worker_pod(0, phase="Failed", exit_code=137), worker_pod(1, phase="Running")]
    api = WireApi(job, *pods)
    controller = tf_controller(api, cached=[job, *pods])
    await controller.reconcile(KEY)
    assert api.status_writes == 1
    [(_, annotations)] = api.at_status_write
    assert annotations.get("training.kubeflow.org/restart-count") == "1"
    assert "Restarting" in true_conditions(api.job)
