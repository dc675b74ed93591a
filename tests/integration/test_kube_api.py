"""KubeApi against the real kube-apiserver: CRUD, merge patch, preconditions, status, paging."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from jobcontroller.runtime.kube import CONFIGMAPS, CRDS, ApiError, KubeApi, Resource
from jobcontroller.runtime.metrics import Metrics

GROUP = "kubeapi.test.jobcontroller.io"


def _crd(plural: str, kind: str) -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"plural": plural, "singular": plural[:-1], "kind": kind},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": schema},
                }
            ],
        },
    }


@pytest_asyncio.fixture(loop_scope="session")
async def widgets(kube: KubeApi) -> AsyncIterator[Resource]:
    """A fresh CRD with a status subresource, Established, deleted afterwards."""
    suffix = uuid.uuid4().hex[:6]
    plural, kind = f"widgets{suffix}", f"Widget{suffix}"
    await kube.create(CRDS, _crd(plural, kind))
    name = f"{plural}.{GROUP}"
    try:
        for _ in range(300):
            crd = await kube.get(CRDS, name)
            conditions = {
                c["type"]: c["status"] for c in ((crd.get("status") or {}).get("conditions") or [])
            }
            if conditions.get("Established") == "True":
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"CRD {name} never became Established")
        yield Resource(GROUP, "v1", kind, plural)
    finally:
        await kube.delete(CRDS, name)


async def test_configmap_crud_and_merge_patch(kube: KubeApi, namespace: str) -> None:
    created = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "cm"}, "data": {"a": "1", "b": "2"}}, namespace=namespace
    )
    assert created["metadata"]["uid"]

    patched = await kube.merge_patch(
        CONFIGMAPS, "cm", {"data": {"a": "10", "b": None, "c": "3"}}, namespace=namespace
    )
    assert patched["data"] == {"a": "10", "c": "3"}  # null deletes a key in a merge patch

    replaced_body = dict(patched, data={"only": "this"})
    replaced = await kube.replace(CONFIGMAPS, replaced_body, namespace=namespace)
    assert replaced["data"] == {"only": "this"}

    got = await kube.get(CONFIGMAPS, "cm", namespace=namespace)
    assert got["data"] == {"only": "this"}
    assert got["metadata"]["resourceVersion"] == replaced["metadata"]["resourceVersion"]

    await kube.delete(CONFIGMAPS, "cm", namespace=namespace)
    with pytest.raises(ApiError) as info:
        await kube.get(CONFIGMAPS, "cm", namespace=namespace)
    assert info.value.is_not_found


async def test_a_create_whose_answer_is_not_read_still_creates_and_still_fails(
    kube: KubeApi, namespace: str
) -> None:
    body = {"metadata": {"name": "unread"}, "data": {"a": "1"}}
    assert await kube.create(CONFIGMAPS, body, namespace=namespace, decode=False) is None
    got = await kube.get(CONFIGMAPS, "unread", namespace=namespace)
    assert got["data"] == {"a": "1"}
    # An error's answer is read: the caller learns what went wrong.
    with pytest.raises(ApiError) as exists:
        await kube.create(CONFIGMAPS, body, namespace=namespace, decode=False)
    assert exists.value.is_already_exists
    assert "unread" in str(exists.value)


async def test_errors_map_to_their_predicates(kube: KubeApi, namespace: str) -> None:
    body = {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    first = await kube.create(CONFIGMAPS, body, namespace=namespace)

    with pytest.raises(ApiError) as exists:
        await kube.create(CONFIGMAPS, body, namespace=namespace)
    assert exists.value.is_already_exists

    await kube.merge_patch(CONFIGMAPS, "cm", {"data": {"a": "2"}}, namespace=namespace)
    with pytest.raises(ApiError) as stale:
        await kube.replace(CONFIGMAPS, dict(first, data={"a": "old"}), namespace=namespace)
    assert stale.value.is_conflict

    # A uid precondition protects a same-named replacement from a delete meant for another.
    with pytest.raises(ApiError) as wrong_uid:
        await kube.delete(
            CONFIGMAPS, "cm", namespace=namespace, uid="not-" + first["metadata"]["uid"]
        )
    assert wrong_uid.value.status == 409
    await kube.delete(CONFIGMAPS, "cm", namespace=namespace, uid=first["metadata"]["uid"])

    with pytest.raises(ApiError) as missing:
        await kube.delete(CONFIGMAPS, "cm", namespace=namespace)
    assert missing.value.is_not_found


async def test_custom_object_spec_and_status_subresource(
    kube: KubeApi, namespace: str, widgets: Resource
) -> None:
    body = {
        "apiVersion": widgets.api_version,
        "kind": widgets.kind,
        "metadata": {"name": "w"},
        "spec": {"size": 1},
    }
    await kube.create(widgets, body, namespace=namespace)

    patched = await kube.merge_patch(widgets, "w", {"spec": {"size": 3}}, namespace=namespace)
    assert patched["spec"]["size"] == 3

    # With a status subresource, the main endpoint drops status changes...
    ignored = await kube.merge_patch(
        widgets, "w", {"status": {"phase": "Ignored"}}, namespace=namespace
    )
    assert "status" not in ignored
    # ...and /status takes them (and ignores spec).
    status = await kube.merge_patch(
        widgets,
        "w",
        {"spec": {"size": 99}, "status": {"phase": "Running"}},
        namespace=namespace,
        subresource="status",
    )
    assert status["status"] == {"phase": "Running"}
    assert status["spec"]["size"] == 3

    # PUT on /status with a stale resourceVersion is a conflict, never a silent overwrite.
    stale = dict(patched, status={"phase": "Stale"})
    with pytest.raises(ApiError) as info:
        await kube.replace(widgets, stale, namespace=namespace, subresource="status")
    assert info.value.is_conflict

    fresh = await kube.get(widgets, "w", namespace=namespace, subresource="status")
    fresh["status"] = {"phase": "Done"}
    done = await kube.replace(widgets, fresh, namespace=namespace, subresource="status")
    assert done["status"]["phase"] == "Done"

    items, _ = await kube.list(widgets, namespace=namespace)
    assert [(i["kind"], i["apiVersion"]) for i in items] == [(widgets.kind, widgets.api_version)]


async def test_list_follows_pages(kubeconfig: str, namespace: str) -> None:
    metrics = Metrics()
    async with await KubeApi.from_config(kubeconfig=kubeconfig, metrics=metrics) as api:
        await asyncio.gather(
            *(
                api.create(
                    CONFIGMAPS,
                    {"metadata": {"name": f"cm-{i}", "labels": {"paged": "yes"}}},
                    namespace=namespace,
                )
                for i in range(7)
            )
        )
        items, rv = await api.list(
            CONFIGMAPS, namespace=namespace, label_selector="paged=yes", limit=2
        )
    assert sorted(i["metadata"]["name"] for i in items) == [f"cm-{i}" for i in range(7)]
    assert all(i["kind"] == "ConfigMap" for i in items)
    assert rv
    gets = metrics.registry.get_sample_value(
        "jobcontroller_api_requests_total", {"verb": "GET", "resource": "configmaps", "code": "200"}
    )
    assert gets == 4  # 2 + 2 + 2 + 1
