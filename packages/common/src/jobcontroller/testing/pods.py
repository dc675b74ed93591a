"""Simulated pods: the annotations kwok's stages act on, and direct status writes.

On the local cluster (see ``kwok-stages.yaml``) a scheduled pod becomes Running and then
finishes according to its annotations. :func:`simulate` adds them to a pod template or a job's
replica templates. :func:`set_pod_status` writes a pod's status directly, as envtest-based
suites do when no kubelet (and no kwok) runs.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobcontroller.runtime.kube import KubeApi

EXIT_CODE = "sim.jobcontroller/exit-code"
RUN_FOR = "sim.jobcontroller/run-for"
REASON = "sim.jobcontroller/reason"


def sim_annotations(
    exit_code: int | None = 0, *, run_for: str | None = None, reason: str | None = None
) -> dict[str, str]:
    """Annotations making a pod exit with ``exit_code`` after ``run_for`` (None: run forever)."""
    out: dict[str, str] = {}
    if exit_code is not None:
        out[EXIT_CODE] = str(exit_code)
    if run_for is not None:
        out[RUN_FOR] = run_for
    if reason is not None:
        out[REASON] = reason
    return out


def simulate(
    template: dict[str, Any],
    exit_code: int | None = 0,
    *,
    run_for: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Add the simulation annotations to a PodTemplateSpec dict in place; returns it."""
    meta = template.setdefault("metadata", {})
    meta.setdefault("annotations", {}).update(
        sim_annotations(exit_code, run_for=run_for, reason=reason)
    )
    return template


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_status(
    pod: dict[str, Any],
    *,
    phase: str,
    exit_code: int | None = None,
    reason: str | None = None,
    restart_count: int = 0,
    ready: bool | None = None,
) -> dict[str, Any]:
    """The status a kubelet would report for ``pod`` in ``phase``.

    Running pods get running containers (ready unless ``ready`` is False); with ``exit_code``
    every container is terminated with it (reason Completed for 0, else ``reason`` or Error).
    """
    now = _now()
    is_ready = phase == "Running" if ready is None else ready
    statuses = []
    for c in pod.get("spec", {}).get("containers", []):
        state: dict[str, Any]
        if exit_code is not None:
            state = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": "Completed" if exit_code == 0 else (reason or "Error"),
                    "startedAt": now,
                    "finishedAt": now,
                }
            }
        elif phase == "Running":
            state = {"running": {"startedAt": now}}
        else:
            state = {"waiting": {"reason": reason or "ContainerCreating"}}
        statuses.append(
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": is_ready and exit_code is None,
                "restartCount": restart_count,
                "started": exit_code is None and phase == "Running",
                "state": state,
            }
        )
    status: dict[str, Any] = {
        "phase": phase,
        "containerStatuses": statuses,
        "conditions": [
            {"type": "Ready", "status": "True" if is_ready else "False", "lastTransitionTime": now}
        ],
    }
    if phase != "Pending":
        status["startTime"] = pod.get("status", {}).get("startTime") or now
    if reason and exit_code is None and phase == "Failed":
        status["reason"] = reason
    return status


async def set_pod_status(
    kube: KubeApi,
    *,
    namespace: str,
    name: str,
    phase: str,
    exit_code: int | None = None,
    reason: str | None = None,
    restart_count: int = 0,
    ready: bool | None = None,
) -> dict[str, Any]:
    """Write a pod's status directly through the status subresource; returns the pod."""
    from jobcontroller.runtime.kube import PODS

    pod = await kube.get(PODS, name, namespace=namespace)
    status = pod_status(
        pod,
        phase=phase,
        exit_code=exit_code,
        reason=reason,
        restart_count=restart_count,
        ready=ready,
    )
    return await kube.merge_patch(
        PODS, name, {"status": status}, namespace=namespace, subresource="status"
    )
