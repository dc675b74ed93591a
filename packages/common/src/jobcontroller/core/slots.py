"""Step 7 of ``plan()`` (core/planner.py): one replica type's pods and Services, slot by slot.

A slot is an index below the replica count. Missing slots get an object, as many as the pass's
budgets allow (core/context.py: the writes and the bytes of the bodies a pass may plan);
objects past the count are deleted. The work follows what exists and the budgets, never the
count a job asks for.
"""

from __future__ import annotations

from jobcontroller.core.context import PlanContext
from jobcontroller.core.names import replica_name
from jobcontroller.core.objects import build_pod, build_service
from jobcontroller.core.replicas import group_by_index, missing_indices, pods_by_rtype
from jobcontroller.core.sizing import pod_bytes_hint
from jobcontroller.core.types import POD, SERVICE, CreateObject, JobT, ReplicaPods

__all__ = ["reconcile_pods", "reconcile_services"]


def reconcile_pods(ctx: PlanContext[JobT], slots: ReplicaPods) -> None:
    """Create the missing pods (as many as the pass's budgets allow), then delete those past
    the replica count. Work follows what exists and the batch, never the replica count: the
    missing indices are found by a lazy scan that stops with the budget."""
    job, rtype = ctx.job, slots.rtype
    spec = job.replica_specs()[rtype]
    warned_restart = warned_scheduler = False
    size: int | None = None
    for index in missing_indices(slots.replicas, slots.by_index):
        name = replica_name(job_name=job.name, rtype=rtype, index=index)
        if not ctx.claimable(POD, name):
            continue
        if size is None:
            size = pod_bytes_hint(ctx.fw, job, rtype=rtype, config=ctx.config)
        if not ctx.spend(size=size):
            break
        built = build_pod(ctx.fw, job, rtype=rtype, index=index, spec=spec, config=ctx.config)
        ctx.actions.append(
            CreateObject(kind=POD, body=built.body, expectation=ctx.expectation(POD, rtype))
        )
        if built.template_restart_policy and not warned_restart:
            warned_restart = True
            ctx.event(
                "Warning",
                "SetPodTemplateRestartPolicy",
                f"{rtype}: the pod template's restartPolicy is replaced by the replica's "
                f"restartPolicy ({spec.restart_policy}); set it on the replica spec instead",
            )
        if built.foreign_scheduler and not warned_scheduler:
            warned_scheduler = True
            ctx.event(
                "Warning",
                "SetPodTemplateSchedulerName",
                f"{rtype}: the pod template names its own scheduler, which is kept; its pods "
                f"may not be gang-scheduled",
            )
    for index in sorted(i for i in slots.by_index if i >= slots.replicas):
        for pod in slots.by_index[index]:
            ctx.delete(POD, pod, reason="scale-down")


def reconcile_services(ctx: PlanContext[JobT], rtype: str, wanted: int) -> None:
    """The same for the replica type's Services, when the framework wants them."""
    job = ctx.job
    if not ctx.fw.services_for(job, rtype):
        return
    mine = pods_by_rtype(ctx.observed.services, rtypes=[rtype])[rtype]
    by_index = group_by_index(mine, offset=ctx.fw.replica_index_offset(job, rtype))
    for index in missing_indices(wanted, by_index):
        name = replica_name(job_name=job.name, rtype=rtype, index=index)
        if not ctx.claimable(SERVICE, name):
            continue
        if not ctx.spend():
            break
        body = build_service(ctx.fw, job, rtype=rtype, index=index, spec=job.replica_specs()[rtype])
        ctx.actions.append(
            CreateObject(kind=SERVICE, body=body, expectation=ctx.expectation(SERVICE, rtype))
        )
    for index, services in sorted(by_index.items()):
        if index >= wanted:
            for service in services:
                ctx.delete(SERVICE, service, reason="scale-down")
