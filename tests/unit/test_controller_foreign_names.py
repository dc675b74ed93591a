"""A replica name held by an object the caches cannot show (it lacks the job-name label).

The create answers AlreadyExists; the controller must then find out whose object it is and, if
it is not the job's, let the planner report the conflict (on the Created condition) and leave
the slot alone, rather than say nothing and never try again.
"""

from __future__ import annotations

from typing import Any

from controller_fakes import KEY, FakeApi, catch_up, tf_controller, tf_job

FOREIGN = {
    "kind": "Pod",
    "metadata": {"name": "tf-worker-0", "namespace": "ns", "uid": "someone-elses"},
    "spec": {"containers": [{"name": "main", "image": "theirs"}]},
}


def _created(api: FakeApi) -> dict[str, Any]:
    return next(c for c in api.job["status"]["conditions"] if c["type"] == "Created")


async def test_a_foreign_object_outside_the_caches_is_reported_and_left_alone() -> None:
    job = tf_job()
    api = FakeApi(job, FOREIGN)
    controller = tf_controller(api, cached=[job])
    await controller.reconcile(KEY)  # runs into the name
    catch_up(controller, api)
    requeue = await controller.reconcile(KEY)
    created = _created(api)
    assert created["reason"] == "ErrResourceExists"
    assert "tf-worker-0" in created["message"]
    assert api.objects[("Pod", "tf-worker-0")]["metadata"]["uid"] == "someone-elses"
    assert ("Pod", "tf-worker-1") in api.objects
    # Nothing tells the job when such an object goes: it looks again by itself.
    assert requeue is not None

    del api.objects[("Pod", "tf-worker-0")]
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert api.objects[("Pod", "tf-worker-0")]["metadata"]["uid"] == "uid-tf-worker-0"
    catch_up(controller, api)
    await controller.reconcile(KEY)
    assert _created(api)["reason"] == "TFJobCreated"
