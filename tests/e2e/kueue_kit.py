"""What the Kueue end-to-end tests share: reading a job's conditions and waiting for the Workload
Kueue made for it."""

from __future__ import annotations

import datetime as dt
from typing import Any

from jobcontroller.runtime.kube import KubeApi, Resource
from jobcontroller.testing.waiting import wait_for, wait_for_list

Obj = dict[str, Any]
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "Workload", "workloads")
TIMEOUT = 60.0


def condition(obj: Obj | None, kind: str) -> Obj | None:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def is_true(obj: Obj | None, kind: str) -> bool:
    c = condition(obj, kind)
    return c is not None and c.get("status") == "True"


def timestamp(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _owned_by(item: Obj, uid: str) -> bool:
    return any(o.get("uid") == uid for o in item["metadata"].get("ownerReferences") or [])


async def workload_of(kube: KubeApi, ns: str, job: Obj) -> Obj:
    """The Workload Kueue made for ``job`` (owned by it)."""
    uid = job["metadata"]["uid"]
    items = await wait_for_list(
        kube,
        WORKLOADS,
        namespace=ns,
        until=lambda items: any(_owned_by(i, uid) for i in items),
        timeout=TIMEOUT,
        what=f"workload of {uid}",
    )
    return next(i for i in items if _owned_by(i, uid))


async def wait_workload(
    kube: KubeApi, ns: str, job: Obj, condition_type: str, *, timeout: float = TIMEOUT
) -> Obj:
    """The Workload of ``job`` once its ``condition_type`` condition is True."""
    wl = await workload_of(kube, ns, job)
    got = await wait_for(
        kube,
        WORKLOADS,
        wl["metadata"]["name"],
        namespace=ns,
        until=lambda w: is_true(w, condition_type),
        timeout=timeout,
        what=f"workload of {job['metadata']['name']} {condition_type}",
    )
    assert got is not None
    return got
