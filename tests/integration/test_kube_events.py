"""EventRecorder against the real API server: Events are valid core/v1 Events, repeats aggregate."""

from __future__ import annotations

from typing import Any

from jobcontroller.runtime.events import COMBINED_PREFIX, EventRecorder
from jobcontroller.runtime.kube import CONFIGMAPS, EVENTS, KubeApi


async def subject(kube: KubeApi, namespace: str, name: str) -> dict[str, Any]:
    obj = await kube.create(CONFIGMAPS, {"metadata": {"name": name}}, namespace=namespace)
    return {**obj, "apiVersion": "v1", "kind": "ConfigMap"}


async def events_about(kube: KubeApi, namespace: str, name: str) -> list[dict[str, Any]]:
    items, _ = await kube.list(
        EVENTS, namespace=namespace, field_selector=f"involvedObject.name={name}"
    )
    return sorted(items, key=lambda e: e["metadata"]["name"])


async def test_repeated_events_become_one_event_with_a_count(kube: KubeApi, namespace: str) -> None:
    obj = await subject(kube, namespace, "job-a")
    recorder = EventRecorder(kube, component="test-operator")
    recorder.record(obj, type="Warning", reason="FailedCreatePod", message="quota exceeded")
    for _ in range(3):
        recorder.record(
            obj, type="Normal", reason="SuccessfulCreatePod", message="Created pod: a-0"
        )
    await recorder.flush()
    assert recorder.statistics().created_total == 2
    recorder.record(obj, type="Normal", reason="SuccessfulCreatePod", message="Created pod: a-0")
    await recorder.close()
    assert recorder.statistics().patched_total >= 1
    assert recorder.statistics().failed_total == 0

    events = await events_about(kube, namespace, "job-a")
    by_reason = {e["reason"]: e for e in events}
    assert sorted(by_reason) == ["FailedCreatePod", "SuccessfulCreatePod"]
    created = by_reason["SuccessfulCreatePod"]
    assert created["count"] == 4
    assert created["type"] == "Normal"
    assert created["message"] == "Created pod: a-0"
    assert created["source"]["component"] == "test-operator"
    assert created["involvedObject"]["uid"] == obj["metadata"]["uid"]
    assert created["involvedObject"]["kind"] == "ConfigMap"
    assert created["firstTimestamp"] <= created["lastTimestamp"]
    warning = by_reason["FailedCreatePod"]
    assert (warning["type"], warning["count"]) == ("Warning", 1)


async def test_many_similar_events_are_combined(kube: KubeApi, namespace: str) -> None:
    obj = await subject(kube, namespace, "job-b")
    recorder = EventRecorder(kube, component="test-operator")
    for i in range(12):
        recorder.record(obj, type="Normal", reason="SuccessfulCreatePod", message=f"pod b-{i}")
    await recorder.close()
    events = await events_about(kube, namespace, "job-b")
    assert len(events) == 11
    [combined] = [e for e in events if e["message"].startswith(COMBINED_PREFIX)]
    assert combined["message"] == COMBINED_PREFIX + "pod b-11"
    assert combined["count"] == 2
    assert recorder.statistics().failed_total == 0
