"""A framework that declares a child of a kind its controller does not watch gets an error
naming the kind and the fix, instead of a KeyError deep in the executor."""

from __future__ import annotations

from jobcontroller import CreateObject, DeleteObject, PatchObject
from jobcontroller.controller.executor import unwatched_kinds
from jobcontroller.runtime.kube import CONFIGMAPS, PODS


def test_kinds_without_a_resource_are_named() -> None:
    actions = (
        CreateObject(kind="Pod", body={"metadata": {"name": "p"}}),
        CreateObject(kind="Secret", body={"metadata": {"name": "s"}}),
        PatchObject(kind="TFJob", namespace="ns", name="j", patch={}),
        DeleteObject(kind="Job", namespace="ns", name="l", uid="u"),
        PatchObject(kind="ConfigMap", namespace="ns", name="c", patch={}),
    )
    resources = {"Pod": PODS, "ConfigMap": CONFIGMAPS}
    assert unwatched_kinds(actions, resources, job_kind="TFJob") == ["Job", "Secret"]
    assert unwatched_kinds(actions[:1], resources, job_kind="TFJob") == []
