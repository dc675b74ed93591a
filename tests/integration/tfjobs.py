"""Building TFJobs and reading what the operator did to them, for the TFJob scenario tests.

A replica either finishes by itself (kwok ends it with ``exit_code`` after ``run_for``) or, with
``exit_code=None``, runs until the test writes its status with ``set_pod_status``: that is how a
test makes exactly one pod fail, succeed or restart in place.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from jobcontroller.runtime.kube import EVENTS, PODS, SERVICES, KubeApi, Resource
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.waiting import wait_for, wait_for_list

TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")
JOB_NAME_LABEL = "training.kubeflow.org/job-name"

Obj = dict[str, Any]


def replica(
    replicas: int,
    *,
    exit_code: int | None = None,
    run_for: str = "1s",
    restart_policy: str = "Never",
    image: str = "tf:latest",
) -> Obj:
    """One replica spec whose ``tensorflow`` container is simulated as described above."""
    template: Obj = {"spec": {"containers": [{"name": "tensorflow", "image": image}]}}
    if exit_code is not None:
        simulate(template, exit_code, run_for=run_for)
    return {"replicas": replicas, "restartPolicy": restart_policy, "template": template}


def tfjob(
    name: str,
    specs: Mapping[str, Obj],
    *,
    run_policy: Obj | None = None,
    success_policy: str | None = None,
) -> Obj:
    spec: Obj = {"tfReplicaSpecs": copy.deepcopy(dict(specs))}
    if run_policy is not None:
        spec["runPolicy"] = run_policy
    if success_policy is not None:
        spec["successPolicy"] = success_policy
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": spec,
    }


def conditions(job: Obj | None) -> list[Obj]:
    return list(((job or {}).get("status") or {}).get("conditions") or [])


def condition(job: Obj | None, ctype: str) -> Obj | None:
    return next((c for c in conditions(job) if c["type"] == ctype), None)


def has(job: Obj | None, ctype: str) -> bool:
    """Whether ``job`` has condition ``ctype`` with status True."""
    found = condition(job, ctype)
    return found is not None and found["status"] == "True"


def replica_status(job: Obj | None, rtype: str) -> Obj:
    return dict((((job or {}).get("status") or {}).get("replicaStatuses") or {}).get(rtype) or {})


async def wait_job(
    kube: KubeApi, namespace: str, name: str, ctype: str, *, timeout: float = 30.0
) -> Obj:
    """The job once it has condition ``ctype`` True."""
    job = await wait_for(
        kube,
        TFJOBS,
        name,
        namespace=namespace,
        until=lambda j: has(j, ctype),
        timeout=timeout,
        what=f"TFJob {name} {ctype}",
    )
    assert job is not None
    return job


async def pods(kube: KubeApi, namespace: str) -> dict[str, Obj]:
    items, _ = await kube.list(PODS, namespace=namespace)
    return {p["metadata"]["name"]: p for p in items}


async def live_pods(kube: KubeApi, namespace: str) -> dict[str, Obj]:
    """The pods not being deleted (a deleted pod stays a while: the node finishes it)."""
    return {
        name: p
        for name, p in (await pods(kube, namespace)).items()
        if not p["metadata"].get("deletionTimestamp")
    }


async def services(kube: KubeApi, namespace: str) -> dict[str, Obj]:
    items, _ = await kube.list(SERVICES, namespace=namespace)
    return {s["metadata"]["name"]: s for s in items}


async def wait_pods(
    kube: KubeApi, namespace: str, names: set[str], *, phase: str | None = None, timeout: float = 30
) -> dict[str, Obj]:
    """Exactly the pods ``names`` exist (and, with ``phase``, are all in it)."""

    def done(items: list[Obj]) -> bool:
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        return {p["metadata"]["name"] for p in live} == names and (
            phase is None or all(p.get("status", {}).get("phase") == phase for p in live)
        )

    items = await wait_for_list(
        kube, PODS, namespace=namespace, until=done, timeout=timeout, what=f"pods {sorted(names)}"
    )
    return {p["metadata"]["name"]: p for p in items}


async def wait_services(
    kube: KubeApi, namespace: str, names: set[str], *, timeout: float = 30
) -> dict[str, Obj]:
    items = await wait_for_list(
        kube,
        SERVICES,
        namespace=namespace,
        until=lambda items: {s["metadata"]["name"] for s in items} == names,
        timeout=timeout,
        what=f"services {sorted(names)}",
    )
    return {s["metadata"]["name"]: s for s in items}


async def events(kube: KubeApi, namespace: str, *, reason: str | None = None) -> list[Obj]:
    """Events in ``namespace`` (optionally of one reason), oldest first."""
    items, _ = await kube.list(EVENTS, namespace=namespace)
    if reason is not None:
        items = [e for e in items if e.get("reason") == reason]
    return sorted(items, key=lambda e: e.get("firstTimestamp") or e.get("eventTime") or "")


async def wait_event(kube: KubeApi, namespace: str, reason: str, *, timeout: float = 30) -> Obj:
    """The first Event with ``reason`` (Events are sent in the background, after the plan)."""
    items = await wait_for_list(
        kube,
        EVENTS,
        namespace=namespace,
        until=lambda items: any(e.get("reason") == reason for e in items),
        timeout=timeout,
        what=f"event {reason}",
    )
    return next(e for e in items if e.get("reason") == reason)


def env_of(pod: Obj, container: str = "tensorflow") -> dict[str, str]:
    for c in pod["spec"]["containers"]:
        if c["name"] == container:
            return {e["name"]: e.get("value", "") for e in c.get("env") or []}
    raise AssertionError(f"pod {pod['metadata']['name']} has no container {container}")


def uid(obj: Obj) -> str:
    return str(obj["metadata"]["uid"])
