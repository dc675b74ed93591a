"""The base's reconciler of a job's other children: create the missing, patch drift back,
delete the unwanted, never touch another's object, and settle once the caches show the result."""

from __future__ import annotations

import copy
from typing import Any

from jobcontroller import (
    Child,
    Children,
    CreateObject,
    DeleteObject,
    Obj,
    Observed,
    PatchObject,
    child_body,
    reconcile_children,
)
from jobcontroller.api import JobModel
from tf_operator.api import TFJob

UID = "job-uid"
CM, JOB = "ConfigMap", "Job"


def _job() -> JobModel[Any]:
    return TFJob.parse(
        {
            "metadata": {"name": "toy", "namespace": "ns", "uid": UID},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {}}}},
        }
    )


def _config(data: dict[str, str]) -> Child:
    body = {"apiVersion": "v1", "kind": CM, "data": data}
    return Child(kind=CM, name="toy-config", body=body, drift=("data",), prune=True)


def _launcher(*, suspend: bool) -> Child:
    body = {
        "apiVersion": "batch/v1",
        "kind": JOB,
        "spec": {"suspend": suspend, "template": {"spec": {"containers": [{"name": "l"}]}}},
    }
    return Child(kind=JOB, name="toy-launcher", body=body, drift=("spec.suspend",))


class Cache:
    """Owned objects as the informers would hold them once the actions are carried out."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str], Obj] = {}

    def observed(self) -> Observed:
        owned: dict[str, list[Obj]] = {}
        for (kind, _), obj in self.objects.items():
            if any(ref.get("uid") == UID for ref in obj["metadata"].get("ownerReferences", [])):
                owned.setdefault(kind, []).append(obj)
        return Observed(owned=owned, lookup=lambda kind, name: self.objects.get((kind, name)))

    def apply(self, actions: list[Any]) -> None:
        for action in actions:
            if isinstance(action, CreateObject):
                body = copy.deepcopy(action.body)
                body["metadata"]["uid"] = f"uid-{action.name}"
                self.objects[(action.kind, action.name)] = body
            elif isinstance(action, DeleteObject):
                del self.objects[(action.kind, action.name)]
            elif isinstance(action, PatchObject):
                merge(self.objects[(action.kind, action.name)], action.patch)


def merge(target: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _sync(cache: Cache, children: Children) -> list[Any]:
    plan = reconcile_children(_job(), cache.observed(), children, controller_name="toy-ctl")
    cache.apply(plan.actions)
    return plan.actions


KINDS = frozenset({CM, JOB})


def test_missing_children_are_created_with_the_jobs_labels_and_owner() -> None:
    cache = Cache()
    actions = _sync(
        cache, Children(kinds=KINDS, wanted=[_config({"a": "1"}), _launcher(suspend=False)])
    )
    assert [(type(a).__name__, a.kind) for a in actions] == [
        ("CreateObject", CM),
        ("CreateObject", JOB),
    ]
    made = cache.objects[(CM, "toy-config")]
    assert made["metadata"]["namespace"] == "ns"
    assert made["metadata"]["labels"] == {
        "training.kubeflow.org/job-name": "toy",
        "training.kubeflow.org/operator-name": "toy-ctl",
    }
    assert made["metadata"]["ownerReferences"][0]["uid"] == UID
    assert made["data"] == {"a": "1"}


def test_in_sync_children_need_nothing() -> None:
    cache = Cache()
    wanted = Children(kinds=KINDS, wanted=[_config({"a": "1"}), _launcher(suspend=False)])
    _sync(cache, wanted)
    # The apiserver drops false values and adds defaults: neither is drift.
    del cache.objects[(JOB, "toy-launcher")]["spec"]["suspend"]
    cache.objects[(JOB, "toy-launcher")]["spec"]["backoffLimit"] = 6
    assert _sync(cache, wanted) == []


def test_drift_is_patched_back_field_by_field_and_stray_keys_pruned() -> None:
    cache = Cache()
    _sync(cache, Children(kinds=KINDS, wanted=[_config({"a": "1", "b": "2"})]))
    actions = _sync(cache, Children(kinds=KINDS, wanted=[_config({"a": "3"})]))
    assert actions == [
        PatchObject(
            kind=CM, namespace="ns", name="toy-config", patch={"data": {"a": "3", "b": None}}
        )
    ]
    assert cache.objects[(CM, "toy-config")]["data"] == {"a": "3"}


def test_suspend_and_resume_of_a_child_job_patch_only_its_suspend_field() -> None:
    cache = Cache()
    _sync(cache, Children(kinds=KINDS, wanted=[_launcher(suspend=False)]))
    actions = _sync(cache, Children(kinds=KINDS, wanted=[_launcher(suspend=True)]))
    assert actions == [
        PatchObject(
            kind=JOB, namespace="ns", name="toy-launcher", patch={"spec": {"suspend": True}}
        )
    ]
    actions = _sync(cache, Children(kinds=KINDS, wanted=[_launcher(suspend=False)]))
    assert [a.patch for a in actions if isinstance(a, PatchObject)] == [
        {"spec": {"suspend": False}}
    ]


def test_children_no_longer_wanted_are_deleted_but_other_kinds_are_not() -> None:
    cache = Cache()
    _sync(cache, Children(kinds=KINDS, wanted=[_config({"a": "1"}), _launcher(suspend=False)]))
    actions = _sync(cache, Children(kinds=frozenset({JOB}), delete_reason="done"))
    assert actions == [
        DeleteObject(
            kind=JOB, namespace="ns", name="toy-launcher", uid="uid-toy-launcher", reason="done"
        )
    ]
    assert (CM, "toy-config") in cache.objects


def test_a_name_held_by_another_owner_is_never_touched_and_reported() -> None:
    cache = Cache()
    cache.objects[(CM, "toy-config")] = {
        "metadata": {
            "name": "toy-config",
            "uid": "x",
            "ownerReferences": [{"uid": "other", "controller": True}],
        }
    }
    plan = reconcile_children(
        _job(),
        cache.observed(),
        Children(kinds=KINDS, wanted=[_config({"a": "1"})]),
        controller_name="c",
    )
    assert plan.actions == []
    assert [e.reason for e in plan.events] == ["ErrResourceExists"]
    blocking = Child(kind=CM, name="toy-config", body={}, conflict_blocks_creation=True)
    plan = reconcile_children(
        _job(), cache.observed(), Children(kinds=KINDS, wanted=[blocking]), controller_name="c"
    )
    assert (plan.actions, plan.events, plan.conflicts) == ([], [], [(CM, "toy-config")])


def test_the_jobs_own_child_not_yet_in_the_owned_cache_is_waited_for() -> None:
    body = child_body(_job(), _config({"a": "1"}), controller_name="c")
    observed = Observed(lookup=lambda kind, name: body)
    plan = reconcile_children(
        _job(), observed, Children(kinds=KINDS, wanted=[_config({"a": "1"})]), controller_name="c"
    )
    assert (plan.actions, plan.events) == ([], [])


def test_an_unusable_child_is_replaced_and_unwanted_ones_may_be_kept() -> None:
    cache = Cache()
    secret = Child(
        kind="Secret",
        name="toy-ssh",
        body={"apiVersion": "v1", "kind": "Secret"},
        drift=(),
        valid=lambda obj: bool(obj.get("data")),
        invalid_reason="no keys",
        operator_label=False,
    )
    kinds = frozenset({"Secret", CM})
    _sync(cache, Children(kinds=kinds, wanted=[secret, _config({"a": "1"})]))
    made = cache.objects[("Secret", "toy-ssh")]
    assert made["metadata"]["labels"] == {"training.kubeflow.org/job-name": "toy"}
    assert [a.reason for a in _sync(cache, Children(kinds=kinds, wanted=[secret]))] == [
        "not-wanted",
        "no keys",
    ]
    assert [type(a).__name__ for a in _sync(cache, Children(kinds=kinds, wanted=[secret]))] == [
        "CreateObject"
    ]
    _sync(cache, Children(kinds=kinds, wanted=[_config({"a": "1"})]))
    kept = Children(kinds=kinds, wanted=[], delete_unwanted=False)
    assert _sync(cache, kept) == []


def test_a_replicas_service_is_never_a_child_to_delete() -> None:
    replica = {
        "metadata": {
            "name": "toy-worker-0",
            "uid": "s",
            "labels": {"training.kubeflow.org/replica-type": "worker"},
        }
    }
    stray = {"metadata": {"name": "toy-extra", "uid": "x", "labels": {}}}
    observed = Observed(services=[replica, stray])
    plan = reconcile_children(
        _job(), observed, Children(kinds=frozenset({"Service"})), controller_name="c"
    )
    assert [a.name for a in plan.actions if isinstance(a, DeleteObject)] == ["toy-extra"]
