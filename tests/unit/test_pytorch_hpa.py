"""The HPA of an elastic PyTorchJob: its body, drift detection, and create/patch/delete."""

from __future__ import annotations

import copy
from typing import Any

from jobcontroller import CreateObject, DeleteObject, Obj, Observed, PatchObject
from pytorch_operator.api import PyTorchJob, default_pytorchjob
from pytorch_operator.hpa import HPA, desired_hpa, hpa_actions, semantically_equal

UID = "uid-1"
CPU = {
    "type": "Resource",
    "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": "0.5"}},
}


def _job(elastic: dict[str, Any] | None) -> PyTorchJob:
    worker = {"replicas": 2, "template": {"spec": {"containers": [{"name": "pytorch"}]}}}
    raw: dict[str, Any] = {
        "metadata": {"name": "el", "namespace": "ns", "uid": UID},
        "spec": {"pytorchReplicaSpecs": {"Worker": worker}},
    }
    if elastic is not None:
        raw["spec"]["elasticPolicy"] = elastic
    return default_pytorchjob(PyTorchJob.parse(raw))


def _stored(job: PyTorchJob) -> Obj:
    """The HPA as the apiserver returns it: canonical quantities, defaulted extras."""
    body = desired_hpa(job, controller_name="pytorchjob-controller")
    assert body is not None
    stored = copy.deepcopy(body)
    stored["metadata"]["uid"] = "hpa-uid"
    for metric in stored["spec"]["metrics"]:
        target = metric["resource"]["target"]
        if target.get("averageValue") == "0.5":
            target["averageValue"] = "500m"
    stored["status"] = {"currentReplicas": 2}
    return stored


def _observed(*hpas: Obj, foreign: Obj | None = None) -> Observed:
    candidates: list[Obj] = [*hpas, *([] if foreign is None else [foreign])]

    def lookup(kind: str, name: str) -> Obj | None:
        return next((o for o in candidates if kind == HPA and o["metadata"]["name"] == name), None)

    return Observed(owned={HPA: hpas}, lookup=lookup)


def test_hpa_targets_the_job_with_its_bounds_metrics_label_and_owner() -> None:
    job = _job({"minReplicas": 1, "maxReplicas": 4, "metrics": [CPU]})
    hpa = desired_hpa(job, controller_name="pytorchjob-controller")
    assert hpa is not None
    assert hpa["spec"] == {
        "scaleTargetRef": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "el"},
        "minReplicas": 1,
        "maxReplicas": 4,
        "metrics": [CPU],
    }
    meta = hpa["metadata"]
    assert (meta["name"], meta["namespace"]) == ("el", "ns")
    assert meta["labels"]["training.kubeflow.org/job-name"] == "el"
    assert meta["ownerReferences"][0]["uid"] == UID
    assert meta["ownerReferences"][0]["controller"] is True


def test_no_hpa_without_metrics() -> None:
    assert desired_hpa(_job({"maxReplicas": 3}), controller_name="c") is None
    assert desired_hpa(_job(None), controller_name="c") is None


def test_semantic_equality_ignores_canonical_quantities_and_defaulted_fields() -> None:
    assert semantically_equal({"v": "0.5", "n": 3}, {"v": "500m", "n": 3, "extra": True})
    assert semantically_equal({"v": "1Gi"}, {"v": "1073741824"})
    assert not semantically_equal({"v": "0.5"}, {"v": "600m"})
    assert not semantically_equal({"v": [1, 2]}, {"v": [1]})
    assert not semantically_equal({"v": "cpu"}, {"v": "memory"})
    assert not semantically_equal({"v": True}, {"v": 1})


def test_live_job_without_hpa_creates_it() -> None:
    job = _job({"maxReplicas": 3, "metrics": [CPU]})
    actions, events = hpa_actions(job, _observed(), wanted=True, controller_name="c")
    assert events == []
    assert [type(a) for a in actions] == [CreateObject]
    assert isinstance(actions[0], CreateObject) and actions[0].kind == HPA


def test_hpa_as_stored_is_left_alone() -> None:
    job = _job({"minReplicas": 1, "maxReplicas": 3, "metrics": [CPU]})
    assert hpa_actions(job, _observed(_stored(job)), wanted=True, controller_name="c") == ([], [])


def test_changed_bounds_patch_the_hpa_spec() -> None:
    before = _job({"minReplicas": 1, "maxReplicas": 3, "metrics": [CPU]})
    after = _job({"minReplicas": 1, "maxReplicas": 5, "metrics": [CPU]})
    actions, _ = hpa_actions(after, _observed(_stored(before)), wanted=True, controller_name="c")
    assert len(actions) == 1 and isinstance(actions[0], PatchObject)
    assert actions[0].patch["spec"]["maxReplicas"] == 5
    assert (actions[0].kind, actions[0].name) == (HPA, "el")


def test_suspended_or_finished_job_deletes_its_hpa() -> None:
    job = _job({"maxReplicas": 3, "metrics": [CPU]})
    actions, _ = hpa_actions(job, _observed(_stored(job)), wanted=False, controller_name="c")
    assert actions == [
        DeleteObject(kind=HPA, namespace="ns", name="el", uid="hpa-uid", reason="hpa-not-wanted")
    ]


def test_removing_the_metrics_deletes_the_hpa() -> None:
    with_metrics = _job({"maxReplicas": 3, "metrics": [CPU]})
    without = _job({"maxReplicas": 3})
    actions, _ = hpa_actions(
        without, _observed(_stored(with_metrics)), wanted=True, controller_name="c"
    )
    assert [type(a) for a in actions] == [DeleteObject]


def test_a_foreign_hpa_with_the_jobs_name_is_never_touched() -> None:
    job = _job({"maxReplicas": 3, "metrics": [CPU]})
    foreign = {"metadata": {"name": "el", "namespace": "ns", "uid": "other"}}
    actions, events = hpa_actions(job, _observed(foreign=foreign), wanted=True, controller_name="c")
    assert actions == []
    assert [e.reason for e in events] == ["ErrResourceExists"]
