"""Pods on lost nodes (``NodeLost``): a pure decision over the job's pods and the node cache.

When a node dies its pods stay Running (or go Unknown) for ever, and a job waits on them
(kubeflow/training-operator #2072). A pod bound to a node that has not been Ready for
``config.node_lost_grace_seconds`` (counted from when the Ready condition changed, or from the
pod's creation if that is later), or to a node that no longer exists, has failed with reason
``NodeLost``:

- the planner sees it as a Failed pod (:func:`mark_lost_pods` rewrites the job's view of it:
  phase Failed, reason NodeLost; its containers' states are kept, so a training container that
  had already exited with a permanent code still fails an ExitCode job), so counting, the
  restart policy (a recreation under OnFailure, Always and ExitCode, where a container with no
  exit code is retryable), backoffLimit and the framework's status rule treat it as any failed
  pod;
- it is force-deleted (grace period 0: no kubelet will confirm a graceful deletion), terminating
  or not, with a Warning ``NodeLost`` event naming the pod and the node;
- under Never (:func:`fail_for_lost_pods`) the job fails with a message naming the pod.

A pod whose node is NotReady but within the grace period is left alone, and a timer brings the
job back when the grace period ends. Nothing happens while the node cache is unknown
(``observed.node`` is None: not synced, or the feature is off).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import msgspec
from msgspec import Struct

from jobcontroller.api.common import RestartPolicy
from jobcontroller.core.conditions import REASON_FAILED, new_reason, parse_time
from jobcontroller.core.context import PlanContext
from jobcontroller.core.lifecycle import fail
from jobcontroller.core.names import REPLICA_TYPE_LABEL
from jobcontroller.core.replicas import PHASE_FAILED, PHASE_SUCCEEDED, phase, replica_index
from jobcontroller.core.types import POD, JobT, NodeState, Obj

__all__ = ["REASON_NODE_LOST", "LostPod", "fail_for_lost_pods", "mark_lost_pods", "node_state"]

REASON_NODE_LOST = "NodeLost"


class LostPod(Struct, frozen=True):
    pod: Obj
    """The pod as the cache holds it."""
    node: str
    gone: bool
    """The node no longer exists (else it has been NotReady past the grace period)."""


def node_state(node: Obj) -> NodeState:
    """A Node (whole, or as the informer compacts it) as :class:`NodeState`."""
    created = parse_time((node.get("metadata") or {}).get("creationTimestamp"))
    for cond in (node.get("status") or {}).get("conditions") or ():
        if isinstance(cond, dict) and cond.get("type") == "Ready":
            since = parse_time(cond.get("lastTransitionTime")) or created
            return NodeState(ready=cond.get("status") == "True", since=since)
    return NodeState(ready=False, since=created)


def _meta(pod: Obj) -> dict[str, object]:
    meta = pod.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _lost(ctx: PlanContext[JobT], pod: Obj) -> LostPod | None:
    """The pod's NodeLost verdict, arming a timer for a node that is NotReady within grace."""
    lookup, grace = ctx.observed.node, ctx.config.node_lost_grace_seconds
    if lookup is None or grace <= 0 or phase(pod) in (PHASE_SUCCEEDED, PHASE_FAILED):
        return None
    node_name = str((pod.get("spec") or {}).get("nodeName") or "")
    if not node_name:
        return None
    state = lookup(node_name)
    if state is None:
        return LostPod(pod=pod, node=node_name, gone=True)
    if state.ready:
        return None
    created = parse_time(_meta(pod).get("creationTimestamp"))
    since = max((t for t in (state.since, created) if t is not None), default=ctx.now)
    remaining = (since + timedelta(seconds=grace) - ctx.now).total_seconds()
    if remaining > 0:
        ctx.timers.append(remaining)
        return None
    return LostPod(pod=pod, node=node_name, gone=False)


def _message(lost: LostPod, namespace: str) -> str:
    name = _meta(lost.pod).get("name")
    why = (
        "no longer exists"
        if lost.gone
        else "has not been Ready for longer than the grace period (--node-lost-grace-period)"
    )
    return f"Pod {namespace}/{name} has failed with reason NodeLost: its node {lost.node} {why}"


def mark_lost_pods(ctx: PlanContext[JobT]) -> list[LostPod]:
    """Find the job's pods on lost nodes; show them to the rest of the plan as Failed (reason
    NodeLost), plan their force-deletion and a Warning event each. Returns them."""
    lost: list[LostPod] = []
    view: list[Obj] = []
    for pod in ctx.observed.pods:
        verdict = _lost(ctx, pod)
        if verdict is None:
            view.append(pod)
            continue
        lost.append(verdict)
        namespace = str(_meta(pod).get("namespace") or ctx.job.namespace)
        message = _message(verdict, namespace)
        raw_status = pod.get("status")
        status: Obj = raw_status if isinstance(raw_status, dict) else {}
        view.append(
            {
                **pod,
                "status": {
                    **status,
                    "phase": PHASE_FAILED,
                    "reason": REASON_NODE_LOST,
                    "message": message,
                },
            }
        )
        ctx.forced.add(str(_meta(pod).get("uid") or ""))
        ctx.delete(POD, pod, reason=REASON_NODE_LOST)
        ctx.event("Warning", REASON_NODE_LOST, message)
    if lost:
        ctx.observed = msgspec.structs.replace(ctx.observed, pods=tuple(view))
    return lost


def fail_for_lost_pods(ctx: PlanContext[JobT], lost: Sequence[LostPod]) -> bool:
    """Fail the job for a lost pod of a replica type that is never restarted (policy Never),
    in its current range of indices; True if so."""
    specs = ctx.job.replica_specs()
    by_label = {rtype.lower(): rtype for rtype in specs}
    for item in lost:
        labels = _meta(item.pod).get("labels")
        label = labels.get(REPLICA_TYPE_LABEL) if isinstance(labels, dict) else None
        rtype = by_label.get(str(label).lower()) if label is not None else None
        if rtype is None:
            continue
        spec = specs[rtype]
        index = replica_index(item.pod)
        offset = ctx.fw.replica_index_offset(ctx.job, rtype)
        if index is None or index - offset >= (spec.replicas or 0):
            continue  # being scaled away: it counts nowhere
        if spec.restart_policy not in (RestartPolicy.NEVER, None):
            continue
        namespace = str(_meta(item.pod).get("namespace") or ctx.job.namespace)
        message = (
            f"{ctx.kind} {ctx.job.name} has failed because {rtype} pod "
            f"{namespace}/{_meta(item.pod).get('name')} was lost with its node {item.node} "
            f"(NodeLost)"
        )
        fail(ctx, reason=new_reason(ctx.kind, REASON_FAILED), message=message, event_type="Warning")
        return True
    return False
