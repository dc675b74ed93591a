"""The local control plane is a real Kubernetes: CRDs, custom objects, simulated pods, Jobs, GC.

These use kubernetes_asyncio directly (the client our operators build on) against the
session's cluster, so a broken build or a broken kwok stage shows up here first.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from kubernetes_asyncio import client, watch

from jobcontroller.runtime.kube import JOBS, PODS, KubeApi
from jobcontroller.testing.pods import set_pod_status, simulate
from jobcontroller.testing.waiting import wait_for

GROUP = "widgets.test.jobcontroller.io"


def _crd(plural: str) -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {"plural": plural, "singular": plural[:-1], "kind": plural[:-1].title()},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"size": {"type": "integer"}},
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"phase": {"type": "string"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


async def _established_crd(api_client: client.ApiClient) -> str:
    plural = f"gadgets{uuid.uuid4().hex[:6]}"
    ext = client.ApiextensionsV1Api(api_client)
    await ext.create_custom_resource_definition(_crd(plural))
    for _ in range(100):
        crd = await ext.read_custom_resource_definition(f"{plural}.{GROUP}")
        conds = {c.type: c.status for c in (crd.status.conditions or [])}
        if conds.get("Established") == "True":
            return plural
        await asyncio.sleep(0.1)
    raise AssertionError(f"CRD {plural} never became Established: {crd.status}")


async def test_crd_becomes_established(k8s_client: client.ApiClient) -> None:
    plural = await _established_crd(k8s_client)
    assert plural.startswith("gadgets")


async def test_custom_object_create_patch_status_and_watch(
    k8s_client: client.ApiClient, namespace: str
) -> None:
    plural = await _established_crd(k8s_client)
    kind = plural[:-1].title()
    co = client.CustomObjectsApi(k8s_client)
    body = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": "w1"}}
    body["spec"] = {"size": 1}
    created = await co.create_namespaced_custom_object(GROUP, "v1", namespace, plural, body)

    w = watch.Watch()
    events: list[tuple[str, Any]] = []

    async def collect() -> None:
        async with w:
            async for ev in w.stream(
                co.list_namespaced_custom_object,
                GROUP,
                "v1",
                namespace,
                plural,
                resource_version=created["metadata"]["resourceVersion"],
                timeout_seconds=30,
            ):
                events.append((ev["type"], ev["object"]))
                if ev["object"].get("status", {}).get("phase") == "Done":
                    return

    watcher = asyncio.create_task(collect())
    # A dict body needs the merge-patch content type, or the client sends a JSON patch.
    patched = await co.patch_namespaced_custom_object(
        GROUP,
        "v1",
        namespace,
        plural,
        "w1",
        {"spec": {"size": 3}},
        _content_type="application/merge-patch+json",
    )
    assert patched["spec"]["size"] == 3
    # The status subresource: the main endpoint ignores status, the /status endpoint sets it.
    await co.patch_namespaced_custom_object(
        GROUP,
        "v1",
        namespace,
        plural,
        "w1",
        {"status": {"phase": "Ignored"}},
        _content_type="application/merge-patch+json",
    )
    await co.patch_namespaced_custom_object_status(
        GROUP,
        "v1",
        namespace,
        plural,
        "w1",
        {"status": {"phase": "Done"}},
        _content_type="application/merge-patch+json",
    )
    await asyncio.wait_for(watcher, 30)
    got = await co.get_namespaced_custom_object(GROUP, "v1", namespace, plural, "w1")
    assert got["spec"]["size"] == 3
    assert got["status"]["phase"] == "Done"
    assert [t for t, _ in events] == ["MODIFIED", "MODIFIED"]
    assert events[0][1]["spec"]["size"] == 3


def _pod(name: str, **sim: Any) -> dict[str, Any]:
    template = {
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox"}, {"name": "side", "image": "x"}],
        },
    }
    simulate(template, **sim)
    return {"apiVersion": "v1", "kind": "Pod", **template}


async def test_simulated_pod_runs_then_fails_with_exit_code(kube: KubeApi, namespace: str) -> None:
    await kube.create(
        PODS, _pod("oom", exit_code=137, run_for="2s", reason="OOMKilled"), namespace=namespace
    )
    running = await wait_for(
        kube,
        PODS,
        "oom",
        namespace=namespace,
        until=lambda p: p is not None and p.get("status", {}).get("phase") in ("Running", "Failed"),
    )
    assert running is not None
    assert running["status"]["phase"] == "Running", "the pod should run for 2s before failing"
    assert running["spec"]["nodeName"].startswith("kwok-node-")
    failed = await wait_for(
        kube,
        PODS,
        "oom",
        namespace=namespace,
        until=lambda p: p is not None and p["status"].get("phase") == "Failed",
    )
    assert failed is not None
    terminated = [c["state"]["terminated"] for c in failed["status"]["containerStatuses"]]
    assert [t["exitCode"] for t in terminated] == [137, 137]
    assert {t["reason"] for t in terminated} == {"OOMKilled"}


async def test_simulated_pod_succeeds_and_unannotated_pod_keeps_running(
    kube: KubeApi, namespace: str
) -> None:
    await kube.create(PODS, _pod("ok", exit_code=0, run_for="100ms"), namespace=namespace)
    await kube.create(PODS, _pod("forever", exit_code=None), namespace=namespace)
    ok = await wait_for(
        kube,
        PODS,
        "ok",
        namespace=namespace,
        until=lambda p: p is not None and p["status"].get("phase") == "Succeeded",
    )
    assert ok is not None
    assert ok["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    forever = await kube.get(PODS, "forever", namespace=namespace)
    assert forever["status"]["phase"] == "Running"


async def test_batch_job_completes(kube: KubeApi, namespace: str) -> None:
    template = _pod("unused", exit_code=0, run_for="500ms")
    del template["metadata"]["name"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello"},
        "spec": {"backoffLimit": 0, "template": {k: template[k] for k in ("metadata", "spec")}},
    }
    await kube.create(JOBS, job, namespace=namespace)
    done = await wait_for(
        kube,
        JOBS,
        "hello",
        namespace=namespace,
        until=lambda j: (
            j is not None
            and any(
                c["type"] == "Complete" and c["status"] == "True"
                for c in ((j.get("status") or {}).get("conditions") or [])
            )
        ),
    )
    assert done is not None
    assert done["status"]["succeeded"] == 1


async def test_deleting_owner_garbage_collects_dependents(kube: KubeApi, namespace: str) -> None:
    from jobcontroller.runtime.kube import CONFIGMAPS

    owner = await kube.create(
        CONFIGMAPS, {"metadata": {"name": "owner"}, "data": {}}, namespace=namespace
    )
    ref = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    await kube.create(
        CONFIGMAPS,
        {"metadata": {"name": "dependent", "ownerReferences": [ref]}, "data": {}},
        namespace=namespace,
    )
    await kube.delete(CONFIGMAPS, "owner", namespace=namespace)
    gone = await wait_for(
        kube, CONFIGMAPS, "dependent", namespace=namespace, until=lambda o: o is None
    )
    assert gone is None


async def test_set_pod_status_helper(kube: KubeApi, namespace: str) -> None:
    """Without kwok's help (the pod is never scheduled), a test can still drive its status."""
    pod = _pod("manual", exit_code=None)
    pod["spec"]["nodeName"] = "no-such-node"  # bound to a node no one manages
    await kube.create(PODS, pod, namespace=namespace)
    got = await set_pod_status(
        kube, namespace=namespace, name="manual", phase="Failed", exit_code=3
    )
    assert got["status"]["phase"] == "Failed"
    assert got["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3


def test_extra_etcd_args_reach_etcd() -> None:
    """``extra_etcd_args`` (the 50,000-pod bench raises etcd's quota with it) is applied: etcd
    reports the quota it was given, not its 2 GiB default."""
    import urllib.request

    from jobcontroller.testing.controlplane import ControlPlane

    quota = 3 * 1024**3
    with ControlPlane(extra_etcd_args=[f"--quota-backend-bytes={quota}"]) as plane:
        metrics = urllib.request.urlopen(f"{plane.etcd_url}/metrics", timeout=10).read().decode()
    line = next(m for m in metrics.splitlines() if m.startswith("etcd_server_quota_backend_bytes"))
    assert float(line.split()[-1]) == quota
