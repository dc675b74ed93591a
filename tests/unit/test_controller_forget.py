"""Per-job state in the controller is dropped when the job goes, even when the job is deleted
while one of its reconciles is still waiting on the apiserver: an operator runs for months and
sees millions of jobs come and go."""

from __future__ import annotations

from typing import Any

from controller_fakes import KEY, FakeApi, catch_up, tf_controller, tf_job

from jobcontroller.runtime.kube import Resource
from tf_operator.controller import TFJobController

FOREIGN = {
    "kind": "Pod",
    "metadata": {"name": "tf-worker-0", "namespace": "ns", "uid": "someone-elses"},
    "spec": {"containers": [{"name": "main", "image": "theirs"}]},
}


class _JobDeletedDuringGet(FakeApi):
    """While the controller GETs an object in its job's way, the job is deleted (the job
    informer removes it from the cache and runs the delete handler)."""

    controller: TFJobController | None = None

    async def get(self, resource: Resource, name: str, **kwargs: Any) -> dict[str, Any]:
        if self.controller is not None and ("TFJob", "tf") in self.objects:
            job = self.objects.pop(("TFJob", "tf"))
            self.controller.watch.job_store.remove(job)
            self.controller.watch.job_deleted(job)
        return await super().get(resource, name, **kwargs)


async def test_a_job_deleted_while_its_conflict_is_looked_up_leaves_nothing_behind() -> None:
    job = tf_job(replicas=1)
    api = _JobDeletedDuringGet(job, FOREIGN)
    controller = tf_controller(api, cached=[job])
    api.controller = controller
    await controller.reconcile(KEY)  # runs into the foreign pod; the job goes meanwhile
    assert await controller.reconcile(KEY) is None  # queued again: the job is gone
    assert KEY not in controller.states
    assert len(controller.expectations) == 0


async def test_a_job_deleted_while_its_conflicts_are_rechecked_is_left_alone() -> None:
    job = tf_job(replicas=1)
    api = _JobDeletedDuringGet(job, FOREIGN)
    controller = tf_controller(api, cached=[job])
    await controller.reconcile(KEY)  # runs into the foreign pod and remembers it
    catch_up(controller, api)
    state = controller.states.get(KEY)
    assert state is not None and state.foreign
    del api.objects[("Pod", "tf-worker-0")]  # gone by the next look
    api.controller = controller  # and the job is deleted during that look
    created = len(api.created)
    assert await controller.reconcile(KEY) is None
    assert KEY not in controller.states
    assert len(api.created) == created  # nothing planned for a job that is gone
