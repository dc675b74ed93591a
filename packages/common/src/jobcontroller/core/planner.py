"""``plan()``: one reconcile of a job, decided from plain data (sans-I/O, like h11).

The planner is level-triggered: it looks at the job and at what the caches hold, never at what
it did before, so planning again on the result of executing a plan yields no actions and the
same status. The order follows common's ReconcileJobs:

1. skip jobs managed by another controller, and jobs being deleted;
2. Created condition; validation (a failure finishes the job);
3. finished jobs: cleanPodPolicy, PodGroup removal, TTL;
4. suspended jobs: remove everything; a resumed job restarts its deadline clock;
5. pods on lost nodes fail with reason NodeLost (core/nodes.py: force-deleted, and under
   Never they fail the job);
   count replicas, decide the fate of failed pods, then the failure checks (permanent exit
   code, backoffLimit, activeDeadlineSeconds), each of which finishes the job *before* any
   clean-up so cleanPodPolicy is honoured on that path too (kubeflow/trainer #3419);
6. gang scheduling: the PodGroup, and Volcano's hold on pod creation;
7. pods and Services per replica type: create missing slots, delete out-of-range ones,
   recreate failed ones;
8. the framework's extra objects and its status rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from jobcontroller.api.common import JobConditionType, ReplicaStatus
from jobcontroller.api.deepcopy import deep_copy
from jobcontroller.core.batchjob import child_replica_statuses
from jobcontroller.core.children import reconcile_children
from jobcontroller.core.conditions import (
    REASON_FAILED,
    REASON_FAILED_VALIDATION,
    REASON_RESTARTING,
    REASON_TOLERATED_VALIDATION,
    is_finished,
    is_succeeded,
    new_reason,
    set_condition,
)
from jobcontroller.core.context import PlanContext, aware
from jobcontroller.core.crashes import QUARANTINE_CRASHES, quarantine_plan
from jobcontroller.core.followjob import follow_batch_jobs
from jobcontroller.core.gang import plan_gang, restart_all
from jobcontroller.core.lifecycle import (
    REASON_FAILED_CREATE,
    backoff_limit_message,
    deadline_message,
    ensure_created,
    fail,
    fail_unplanned,
    finish_transition,
    plan_finished,
    plan_suspended,
    resume_if_suspended,
    sync_conflict_condition,
)
from jobcontroller.core.names import TOLERATED_RULES_ANNOTATION
from jobcontroller.core.nodes import fail_for_lost_pods, mark_lost_pods
from jobcontroller.core.podgroup import (
    delays_pod_creation,
    desired_pod_group,
    gang_enabled,
    pod_group_patch,
)
from jobcontroller.core.progress import (
    PROGRESS,
    ProgressEndpoint,
    ProgressTarget,
    inject_planned,
)
from jobcontroller.core.replicas import (
    PHASE_FAILED,
    abnormal_pod_events,
    count_replica_status,
    exit_code_of,
    finished_at,
    is_terminating,
    phase,
    pods_by_rtype,
    pods_in_range,
    replica_pods,
    terminated_state,
)
from jobcontroller.core.restart import (
    RESTARTING_POLICIES,
    FailedPodVerdict,
    RestartLedger,
    failed_pod_verdict,
    past_backoff_limit,
)
from jobcontroller.core.sizing import size_errors
from jobcontroller.core.slots import reconcile_pods, reconcile_services
from jobcontroller.core.types import (
    POD,
    POD_GROUP,
    CreateObject,
    FrameworkOf,
    JobMetric,
    JobT,
    Obj,
    Observed,
    PatchObject,
    Plan,
    PlanConfig,
    ReplicaPods,
)

__all__ = ["plan"]

_Decision = tuple[str, Obj, FailedPodVerdict]


def plan(
    fw: FrameworkOf[JobT],
    raw_job: dict[str, Any],
    observed: Observed,
    *,
    now: datetime,
    config: PlanConfig,
) -> Plan:
    """Decide one reconcile of ``raw_job``. Never raises for bad input: a job that cannot be
    parsed or validated is failed with reason ``<Kind>FailedValidation``."""
    if _managed_elsewhere(raw_job, own=fw.model.MANAGED_BY_SELF) or is_terminating(raw_job):
        return Plan()
    exact_now = aware(now)
    if observed.crashes >= QUARANTINE_CRASHES:
        # The operator died planning this job, twice: fail it without planning it.
        quarantined = quarantine_plan(
            kind=fw.model.KIND, raw_job=raw_job, crashes=observed.crashes, now=exact_now
        )
        if quarantined is not None:
            return quarantined
    try:
        job = fw.set_defaults(fw.model.parse(raw_job))
    except ValueError as err:  # pydantic's ValidationError is a ValueError
        return _unparseable(kind=fw.model.KIND, raw_job=raw_job, error=err, now=exact_now)
    ctx = PlanContext(
        fw=fw,
        job=job,
        observed=observed,
        now=exact_now,
        config=config,
        status=deep_copy(job.status),
    )
    ensure_created(ctx)
    if not is_finished(ctx.status):
        _check(ctx)
    if is_finished(ctx.status):
        plan_finished(ctx)
        _extra_objects(ctx)
    elif job.run_policy.suspend:
        plan_suspended(ctx)
        _extra_objects(ctx)
    else:
        _plan_live(ctx)
    return ctx.to_plan()


def _check(ctx: PlanContext[JobT]) -> None:
    """Fail a job its checks refuse (or warn about the rules it breaks that are tolerated).
    They read the spec and the immutable name and namespace only: a job found clean at one
    generation (``observed.valid_spec``) is clean until its spec changes."""
    fw, job = ctx.fw, ctx.job
    spec_version = (job.uid, job.generation)
    if ctx.observed.valid_spec == spec_version:
        ctx.valid_spec = spec_version
        return
    tolerated = fw.tolerated(job)
    errors = [e for e in fw.validate(job) if e not in tolerated] + _pod_limit_errors(ctx)
    if not errors:
        # Only for a job that is otherwise valid: its templates are sound to build from.
        errors = size_errors(fw, job, rtypes=fw.pod_replica_types(job), config=ctx.config)
    if errors:
        fail(
            ctx,
            reason=new_reason(ctx.kind, REASON_FAILED_VALIDATION),
            message=_validation_message(ctx.kind, job.name, errors),
            event_type="Warning",
        )
    elif tolerated:
        _warn_tolerated(ctx, tolerated)
    elif job.uid and job.generation:
        ctx.valid_spec = spec_version


def _warn_tolerated(ctx: PlanContext[JobT], rules: Sequence[str]) -> None:
    """A job stored before the swap breaks rules the Go operator never checked: say so once
    (a Warning event; the annotation records which rules were reported) and run it."""
    digest = hashlib.sha256("\n".join(sorted(rules)).encode()).hexdigest()[:16]
    if ctx.job.annotations.get(TOLERATED_RULES_ANNOTATION) == digest:
        return
    ctx.actions.append(
        PatchObject(
            kind=ctx.job.kind,
            namespace=ctx.job.namespace,
            name=ctx.job.name,
            patch={"metadata": {"annotations": {TOLERATED_RULES_ANNOTATION: digest}}},
        )
    )
    ctx.event(
        "Warning",
        new_reason(ctx.kind, REASON_TOLERATED_VALIDATION),
        f"{ctx.kind} {ctx.job.name} breaks rules that new jobs must follow (it was stored "
        f"before they applied) and runs as the Go operator ran it: {'; '.join(rules)}",
    )


def _extra_objects(ctx: PlanContext[JobT]) -> None:
    """The framework's own objects on a suspended or finished job (the status says which), so
    it can scale away an HPA or suspend a launcher Job. Skipped for a job that failed
    validation: its spec may not be usable."""
    failed = ctx.status.condition(JobConditionType.FAILED)
    if failed is not None and failed.reason == new_reason(ctx.kind, REASON_FAILED_VALIDATION):
        return
    _add_extra_objects(ctx)


def _add_extra_objects(ctx: PlanContext[JobT]) -> None:
    """The framework's actions and events. Its creations pass the same name check as pods:
    a name held by an object that is not the job's is never touched and shows up as a
    conflict (event and Created condition) instead."""
    declared = ctx.fw.children(ctx.job, ctx.observed, ctx.status, now=ctx.now)
    if declared.kinds:
        children = reconcile_children(
            ctx.job, ctx.observed, declared, controller_name=ctx.fw.controller_name
        )
        ctx.actions.extend(children.actions)
        ctx.events.extend(children.events)
        ctx.conflicts.extend(children.conflicts)
        ctx.status.replica_statuses.update(child_replica_statuses(declared.wanted, ctx.observed))
        ctx.events += follow_batch_jobs(
            ctx.job,
            ctx.status,
            declared.wanted,
            ctx.observed,
            pod_rtypes=ctx.fw.pod_replica_types(ctx.job),
            now=ctx.now,
        )
    extra = ctx.fw.extra_objects(ctx.job, ctx.observed, ctx.status, now=ctx.now)
    for action in extra.actions:
        if isinstance(action, CreateObject) and not ctx.claimable(action.kind, action.name):
            continue
        ctx.actions.append(action)
    ctx.events.extend(extra.events)


def _add_progress(ctx: PlanContext[JobT]) -> None:
    """Where the operator serves training progress (an extension for the v1 kinds: upstream's
    v1 has none), the pods created now get the env, token and CA to report it. Pods created
    before the endpoint was up are left as they are."""
    endpoint = ctx.observed.extra.get(PROGRESS)
    if not isinstance(endpoint, ProgressEndpoint):
        return
    job = ctx.job
    target = ProgressTarget(group=job.GROUP, version=job.VERSION, plural=job.PLURAL, kind=job.KIND)
    inject_planned(
        ctx.actions,
        target=target,
        namespace=job.namespace,
        name=job.name,
        base_url=endpoint.url,
        ca_pem=endpoint.ca_pem,
    )


def _managed_elsewhere(raw_job: Mapping[str, Any], *, own: str) -> bool:
    spec = raw_job.get("spec")
    run_policy = spec.get("runPolicy") if isinstance(spec, dict) else None
    managed_by = run_policy.get("managedBy") if isinstance(run_policy, dict) else None
    return bool(managed_by) and managed_by != own


def _validation_message(kind: str, name: str, errors: Sequence[str]) -> str:
    return f"{kind} {name} failed validation because {'; '.join(errors)}"


def _unparseable(
    *, kind: str, raw_job: Mapping[str, Any], error: ValueError, now: datetime
) -> Plan:
    """A stored object the model cannot read (it predates the CRD's schema, or was stored
    with validation off): fail it visibly instead of crashing the worker on every retry."""
    name = str((raw_job.get("metadata") or {}).get("name") or "")
    summary = " ".join(str(error).split())[:1000]
    return fail_unplanned(
        kind=kind,
        raw_job=raw_job,
        reason=new_reason(kind, REASON_FAILED_VALIDATION),
        message=_validation_message(kind, name, [summary]),
        now=now,
    )


def _plan_live(ctx: PlanContext[JobT]) -> None:
    job, fw = ctx.job, ctx.fw
    resume_if_suspended(ctx)
    if ctx.status.start_time is None:
        ctx.status.start_time = ctx.now
    specs = job.replica_specs()
    rtypes = [rtype for rtype in fw.pod_replica_types(job) if rtype in specs]
    # Pods on lost nodes: Failed (reason NodeLost) from here on, and force-deleted.
    lost = mark_lost_pods(ctx)
    grouped = pods_by_rtype(ctx.observed.pods, rtypes=rtypes, job_name=job.name)
    replicas = {
        rtype: replica_pods(
            grouped[rtype],
            rtype=rtype,
            replicas=specs[rtype].replicas or 0,
            offset=fw.replica_index_offset(job, rtype),
        )
        for rtype in rtypes
    }
    # Pods past the replica count are being scaled away: they count nowhere, so a failed one
    # cannot fail the job and a running one does not inflate ``active`` (the anchor counts
    # them).
    current = {rtype: pods_in_range(slots) for rtype, slots in replicas.items()}
    previous = {rtype: ctx.status.replica_statuses.get(rtype) for rtype in rtypes}
    for rtype in rtypes:
        _count(ctx, rtype, current[rtype])
    if fw.lifecycle_words(job).abnormal_pod_events:
        ctx.events.extend(abnormal_pod_events(ctx.observed.pods))
    _exited_events(ctx, current, previous)

    ledger = RestartLedger.from_annotations(job.annotations)
    gang = restart_all(job)
    decisions = [] if gang else _failed_pod_decisions(ctx, replicas)
    if fail_for_lost_pods(ctx, lost) or _failure_checks(ctx, current, decisions, ledger, gang=gang):
        plan_finished(ctx)
        return
    # restartScope All: a retryable failure restarts every pod (core/gang.py); False while
    # that is under way, or when the job has just failed.
    if gang and not plan_gang(ctx, replicas):
        if is_finished(ctx.status):
            plan_finished(ctx)
        return
    _plan_restarts(ctx, decisions, ledger)
    if _creation_refused(ctx):
        plan_finished(ctx)
        return
    if not _sync_pod_group(ctx):
        # Held back by gang scheduling: the anchor skips its status rule here too, and stamps
        # lastReconcileTime. It stamps it on every pass, a status write that wakes the job
        # again, in a loop while the group waits; we stamp it when the hold begins (the
        # PodGroup's informer wakes the job once the group is admitted).
        if ctx.status.last_reconcile_time is None:
            ctx.status.last_reconcile_time = ctx.now
        sync_conflict_condition(ctx)
        return
    for rtype in rtypes:
        reconcile_pods(ctx, replicas[rtype])
        reconcile_services(ctx, rtype, replicas[rtype].replicas)
    _add_extra_objects(ctx)
    _add_progress(ctx)
    sync_conflict_condition(ctx)
    _update_status(ctx, replicas, current)
    if is_finished(ctx.status):
        finish_transition(ctx)


def _update_status(
    ctx: PlanContext[JobT],
    replicas: Mapping[str, ReplicaPods],
    current: Mapping[str, Sequence[Obj]],
) -> None:
    """The framework's status rule, except that a job never succeeds while a replica type it
    asks for has no pod at all: a PyTorchJob whose workers the API server refuses must not
    report Succeeded once its master exits (nor an MPIJob once its launcher does). Such a job
    waits for its pods, or fails for the refusal (see ``_creation_refused``)."""
    specs = ctx.job.replica_specs()
    podless = [
        rtype for rtype, pods in current.items() if not pods and (specs[rtype].replicas or 0) > 0
    ]
    # The status as it was, to go back to, only when the rule can apply (a copy per pass
    # otherwise, for nothing).
    before = deep_copy(ctx.status) if podless and not is_succeeded(ctx.status) else None
    events = ctx.fw.update_status(ctx.job, ctx.status, replicas=replicas, now=ctx.now)
    if before is not None and is_succeeded(ctx.status):
        ctx.status = before
        return
    ctx.events.extend(events)


def _pod_limit_errors(ctx: PlanContext[JobT]) -> list[str]:
    """The operator's per-job pod limit (``--max-pods-per-job``), checked before anything is
    built: a job far above it is refused whole rather than partly created."""
    limit = ctx.config.max_pods_per_job
    if limit <= 0:
        return []
    specs = ctx.job.replica_specs()
    wanted = sum(
        specs[rtype].replicas or 0 for rtype in ctx.fw.pod_replica_types(ctx.job) if rtype in specs
    )
    if wanted <= limit:
        return []
    return [
        f"it asks for {wanted} pods, more than the {limit} this operator allows per job "
        f"(--max-pods-per-job)"
    ]


def _creation_refused(ctx: PlanContext[JobT]) -> bool:
    """Act on a run of identical creation failures (``config.create_failure_threshold``).

    A permanent one (the API server finds the object itself invalid: a bad port, a duplicate
    container, a bad quantity in the pod template) fails the job with the server's message, as
    the batch Job controller does for an invalid pod template; True then. Any other (a quota,
    an admission policy) is shown on the Created condition with a Warning event while the
    executor keeps retrying with backoff; the next successful creation clears it.
    """
    failure = ctx.observed.create_failure
    if failure is None or failure.count < ctx.config.create_failure_threshold:
        return False
    reason = f"{REASON_FAILED_CREATE}{failure.kind}"
    message = f"Error creating {failure.kind.lower()} {failure.name}: {failure.message}"
    if failure.permanent:
        fail(ctx, reason=reason, message=message, event_type="Warning")
        return True
    ctx.creation_blocked = (reason, message)
    return False


def _count(ctx: PlanContext[JobT], rtype: str, pods: Sequence[Obj]) -> None:
    counted = count_replica_status(pods)
    old = ctx.status.replica_statuses.get(rtype)
    if old is not None:
        # Selectors are set by frameworks (PyTorch's scale subresource); counting keeps them.
        counted = counted.model_copy(
            update={"selector": old.selector, "label_selector": old.label_selector}
        )
    if old != counted:
        ctx.status.replica_statuses[rtype] = counted


def _exited_events(
    ctx: PlanContext[JobT],
    grouped: Mapping[str, Sequence[Obj]],
    previous: Mapping[str, ReplicaStatus | None],
) -> None:
    """ExitedWithCode, once per terminated pod.

    The anchor records it on every reconcile. Here only pods that have newly ended since the
    status was last written are reported: the count of ended pods grew by k, so the k most
    recently finished ones are new.
    """
    container = ctx.fw.model.DEFAULT_CONTAINER_NAME
    for rtype, pods in grouped.items():
        old = previous.get(rtype)
        now_counts = ctx.status.replica_statuses[rtype]
        new = (now_counts.succeeded + now_counts.failed) - (
            (old.succeeded + old.failed) if old is not None else 0
        )
        if new <= 0:
            continue
        ended = [pod for pod in pods if terminated_state(pod, container=container) is not None]
        ended.sort(key=lambda pod: (finished_at(pod, container=container), _name(pod)))
        for pod in ended[-new:]:
            code = exit_code_of(pod, container=container)
            namespace = (pod.get("metadata") or {}).get("namespace") or ctx.job.namespace
            ctx.event(
                "Normal", "ExitedWithCode", f"Pod: {namespace}.{_name(pod)} exited with code {code}"
            )


def _failed_pod_decisions(
    ctx: PlanContext[JobT], replicas: Mapping[str, ReplicaPods]
) -> list[_Decision]:
    specs = ctx.job.replica_specs()
    container = ctx.fw.model.DEFAULT_CONTAINER_NAME
    out: list[_Decision] = []
    for rtype, slots in replicas.items():
        policy = specs[rtype].restart_policy
        may_recreate = ctx.fw.recreate_failed_pods(ctx.job, rtype)
        for index, pods in slots.by_index.items():
            if index >= slots.replicas:
                continue  # scale-down removes it anyway
            for pod in pods:
                if phase(pod) != PHASE_FAILED or is_terminating(pod):
                    continue
                verdict = failed_pod_verdict(
                    policy=policy,
                    exit_code=exit_code_of(pod, container=container),
                    may_recreate=may_recreate,
                )
                if verdict != FailedPodVerdict.KEEP:
                    out.append((rtype, pod, verdict))
    return out


def _failure_checks(
    ctx: PlanContext[JobT],
    grouped: Mapping[str, Sequence[Obj]],
    decisions: Sequence[_Decision],
    ledger: RestartLedger,
    *,
    gang: bool = False,
) -> bool:
    """Fail the job for a permanent exit code, the backoff limit or the deadline; True if so.
    Otherwise arm the deadline timer (the anchor's timer never fired, #3358). A framework that
    delegates its run policy (MPI's launcher Job) gets only the exit-code check, except under
    whole-gang restarts (``gang``): a new launcher Job per restart would start its deadline
    afresh, so the deadline is ours then; the backoff limit counts gang restarts
    (core/gang.py)."""
    job, failed_reason = ctx.job, new_reason(ctx.kind, REASON_FAILED)
    permanent = [rtype for rtype, _, verdict in decisions if verdict == FailedPodVerdict.FAIL_JOB]
    if permanent:
        message = f'job "{job.name}" is failing because "{permanent[0]}" replica(s) failed.'
        fail(ctx, reason=failed_reason, message=message, event_type="Warning")
        return True
    if ctx.fw.delegates_run_policy(job) and not gang:
        return False
    limit = job.run_policy.backoff_limit
    if limit is not None and not gang:
        specs = job.replica_specs()
        counted = [
            pod
            for rtype, pods in grouped.items()
            if specs[rtype].restart_policy in RESTARTING_POLICIES
            for pod in pods
        ]
        new = sum(
            1
            for _, pod, verdict in decisions
            if verdict == FailedPodVerdict.RESTART and not ledger.recorded(pod)
        )
        restarts = ledger.count + ledger.live_restarts(counted) + new
        if past_backoff_limit(limit=limit, restarts=restarts):
            fail(ctx, reason=failed_reason, message=backoff_limit_message(job.name))
            return True
    deadline = job.run_policy.active_deadline_seconds
    start = ctx.status.start_time
    if deadline is not None and start is not None:
        remaining = (start - ctx.now).total_seconds() + deadline
        if remaining <= 0:
            fail(ctx, reason=failed_reason, message=deadline_message(job.name))
            return True
        ctx.timers.append(remaining)
    return False


def _plan_restarts(
    ctx: PlanContext[JobT], decisions: Sequence[_Decision], ledger: RestartLedger
) -> None:
    """Delete failed pods for recreation, recording new ones in the job's restart ledger.

    The ledger patch is planned before the deletions it accounts for; if the executor runs
    them in another order, a lost patch under-counts by one and never double-counts.
    """
    restarts = [
        (rtype, pod) for rtype, pod, verdict in decisions if verdict == FailedPodVerdict.RESTART
    ]
    if not restarts:
        return
    fresh = [(rtype, pod) for rtype, pod in restarts if not ledger.recorded(pod)]
    if fresh:
        updated = ledger.record(pod for _, pod in fresh)
        ctx.actions.append(
            PatchObject(
                kind=ctx.job.kind,
                namespace=ctx.job.namespace,
                name=ctx.job.name,
                patch={"metadata": {"annotations": updated.annotations()}},
            )
        )
    reason = new_reason(ctx.kind, REASON_RESTARTING)
    fresh_ids = {id(pod) for _, pod in fresh}
    for rtype, pod in restarts:
        ctx.delete(POD, pod, reason="restart")
        message = f"job {ctx.job.name} is restarting because {rtype} replica(s) failed."
        set_condition(
            ctx.status,
            cond_type=JobConditionType.RESTARTING,
            reason=reason,
            message=message,
            now=ctx.now,
        )
        if id(pod) in fresh_ids:
            ctx.event("Warning", reason, message)
            ctx.metrics.append(JobMetric.RESTARTED)


def _sync_pod_group(ctx: PlanContext[JobT]) -> bool:
    """Create or update the PodGroup; False when pods must wait (Volcano has not admitted the
    group yet, or its name is taken by a foreign object)."""
    if not gang_enabled(ctx.config):
        return True
    job = ctx.job
    existing = next(
        (g for g in ctx.observed.owned.get(POD_GROUP, ()) if _name(g) == job.name), None
    )
    if existing is None:
        if ctx.claimable(POD_GROUP, job.name):
            body = desired_pod_group(
                job,
                config=ctx.config,
                existing=None,
                flavor=ctx.fw.gang_flavor(job),
                priority_classes=ctx.observed.priority_classes,
            )
            ctx.actions.append(CreateObject(kind=POD_GROUP, body=body))
        elif ctx.conflicts and ctx.conflicts[-1] == (POD_GROUP, job.name):
            return False
    elif not is_terminating(existing):
        desired = desired_pod_group(
            job,
            config=ctx.config,
            existing=existing,
            flavor=ctx.fw.gang_flavor(job),
            priority_classes=ctx.observed.priority_classes,
        )
        patch = pod_group_patch(desired=desired, existing=existing)
        if patch is not None:
            ctx.actions.append(
                PatchObject(kind=POD_GROUP, namespace=job.namespace, name=job.name, patch=patch)
            )
    return not delays_pod_creation(config=ctx.config, pod_group=existing)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
