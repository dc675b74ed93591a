"""A deletion expectation is settled when the object starts terminating, once per object."""

from __future__ import annotations

from typing import Any

from controller_fakes import FakeApi, tf_controller, tf_job, worker_pod

KEY = "ns/tf"


class CapturingInformer:
    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}

    def add_handlers(self, **handlers: Any) -> None:
        self.handlers = handlers


def _terminating(pod: dict[str, Any]) -> dict[str, Any]:
    meta = {**pod["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}
    return {**pod, "metadata": meta}


async def test_terminating_pod_settles_the_deletion_once() -> None:
    job = tf_job()
    api = FakeApi(job)
    controller = tf_controller(api, cached=[job])
    informer = CapturingInformer()
    controller.watch.settle_on_events("Pod", informer)  # type: ignore[arg-type]  # only add_handlers is used
    pod = worker_pod(0, phase="Running")
    pod["metadata"]["uid"] = "pod-uid-0"

    controller.expectations.expect_deletions(f"{KEY}/Pod", 2)
    informer.handlers["on_update"](pod, _terminating(pod))
    assert controller.expectations.pending(f"{KEY}/Pod") == (0, 1)
    # The final delete event of the same pod does not count it again.
    informer.handlers["on_delete"](_terminating(pod))
    assert controller.expectations.pending(f"{KEY}/Pod") == (0, 1)
    # A pod deleted without a terminating phase first is counted on its delete event.
    other = worker_pod(1, phase="Running")
    other["metadata"]["uid"] = "pod-uid-1"
    informer.handlers["on_delete"](other)
    assert controller.expectations.satisfied(f"{KEY}/Pod")
