"""One reconcile of a TrainJob, decided from what the caches hold: pure (no I/O, no clock).

The order is Trainer v2.3.0's ``TrainJobReconciler.Reconcile``:

1. a TrainJob another controller manages (``spec.managedBy``, MultiKueue) is left alone;
2. a runtimeRef naming no kind of runtime fails the TrainJob (TrainingRuntimeNotSupported);
3. an unfinished TrainJob gets its objects: the runtime snapshot (first reconcile), then the
   JobSet, built once and changed afterwards only while the TrainJob or the JobSet is
   suspended (Kueue edits ``runtimePatches`` then). A runtime that is missing or unusable is a
   Warning event (TrainJobResourcesCreationFailed), as upstream reports it; the TrainJob is
   planned again when the runtime appears;
4. the Suspended condition follows ``spec.suspend``;
5. Complete, Failed and ``jobsStatus`` come from the JobSet;
6. past ``activeDeadlineSeconds`` the TrainJob fails (DeadlineExceeded) and its JobSet is
   deleted; before that, a timer.

Where this differs from upstream (each for a reason) the comments say so.
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Sequence
from typing import Any

from msgspec import Struct, field

from jobcontroller import (
    PROGRESS,
    Action,
    CreateObject,
    DeleteObject,
    Event,
    JobMetric,
    Observed,
    PatchObject,
    Plan,
    ProgressEndpoint,
    is_controlled_by,
    semantically_equal,
)
from trainer_operator.builder import build_jobset
from trainer_operator.info import RuntimeProblem, new_info
from trainer_operator.mpi import hostfile_configmap, ssh_auth_secret
from trainer_operator.podgroups import (
    enforce_pod_group_policy,
    pod_group_actions,
    pod_group_errors,
)
from trainer_operator.policies import enforce_ml_policy
from trainer_operator.progress import ca_configmap_action, inject_progress
from trainer_operator.snapshot import (
    SnapshotProblem,
    read_snapshot,
    snapshot_configmap,
    snapshot_name,
)
from trainer_operator.status import (
    COMPLETE,
    DEADLINE_EXCEEDED,
    DEADLINE_MESSAGE,
    FAILED,
    TrainJobStatus,
    condition,
    deadline,
    failed,
    set_condition,
    set_suspended,
    sync_from_jobset,
)
from trainer_operator.validate import trainjob_errors

__all__ = [
    "CLUSTER_TRAINING_RUNTIME",
    "MANAGED_BY_SELF",
    "PROGRESS",
    "REASON_DEPRECATED",
    "REASON_NOT_SUPPORTED",
    "REASON_RESOURCES_FAILED",
    "RUNTIME",
    "TRAINING_RUNTIME",
    "jobset_patch",
    "plan_trainjob",
    "runtime_kind",
]

Obj = dict[str, Any]

GROUP = "trainer.kubeflow.org"
TRAINING_RUNTIME = "TrainingRuntime"
CLUSTER_TRAINING_RUNTIME = "ClusterTrainingRuntime"
MANAGED_BY_SELF = "trainer.kubeflow.org/trainjob-controller"
REASON_NOT_SUPPORTED = "TrainingRuntimeNotSupported"
REASON_RESOURCES_FAILED = "TrainJobResourcesCreationFailed"
REASON_DEPRECATED = "DeprecatedTrainingRuntime"
"""Ours: upstream says it as an admission warning, which has no reason."""
SUPPORT_LABEL = "trainer.kubeflow.org/support"
DEPRECATION_POLICY_URL = (
    "https://trainer.kubeflow.org/en/latest/operator-guides/runtime.html#runtime-deprecation-policy"
)
RUNTIME = "runtime"
"""The key of :attr:`Observed.extra` holding the TrainJob's runtime (None: not cached)."""
JOBSET, CONFIGMAP, SECRET = "JobSet", "ConfigMap", "Secret"
_EVENT_LIMIT = 950

#: Pod-template fields the JobSet webhook lets change while the JobSet is suspended (the ones
#: Kueue sets): the only ones a reconcile may have to change in an existing JobSet.
_MUTABLE_WHILE_SUSPENDED = (
    ("metadata", "labels"),
    ("metadata", "annotations"),
    ("spec", "nodeSelector"),
    ("spec", "tolerations"),
    ("spec", "schedulingGates"),
)


class ResourcesProblem(Exception):
    """The TrainJob's objects cannot be built; the message says why."""


def _group_kind(ref: Obj) -> str:
    """``schema.GroupKind.String()`` of a runtimeRef: ``Kind.group``, or ``Kind`` alone."""
    group, kind = str(ref.get("apiGroup") or ""), str(ref.get("kind") or "")
    return f"{kind}.{group}" if group else kind


def runtime_kind(ref: Obj) -> str | None:
    """The kind of runtime a runtimeRef names, None when it names no kind of runtime."""
    if ref.get("apiGroup") != GROUP:
        return None
    kind = ref.get("kind")
    return str(kind) if kind in (TRAINING_RUNTIME, CLUSTER_TRAINING_RUNTIME) else None


def _named(objects: Sequence[Obj], name: str) -> Obj | None:
    return next((o for o in objects if (o.get("metadata") or {}).get("name") == name), None)


def _terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def _at(obj: Any, path: Sequence[str]) -> Any:
    for key in path:
        obj = obj.get(key) if isinstance(obj, dict) else None
    return obj


def _not_found(kind: str, name: str) -> str:
    resource = f"{kind.lower()}s.{GROUP}"
    if kind == TRAINING_RUNTIME:
        return f'TrainingRuntime specified in TrainJob is not found: {resource} "{name}" not found'
    return f'not found ClusterTrainingRuntime specified in TrainJob: {resource} "{name}" not found'


class _Objects(Struct):
    actions: list[Action] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)


def _runtime(raw: Obj, observed: Observed, kind: str, out: _Objects) -> Obj:
    """The runtime to plan from: the TrainJob's snapshot, else the cached runtime (and the
    snapshot to create from it)."""
    name = snapshot_name(raw)
    prefix = (
        "unable to get runtime snapshot" if kind == TRAINING_RUNTIME else "getting runtime snapshot"
    )
    # A same-named ConfigMap that is not the TrainJob's is no snapshot of its own: the
    # reading says whose it is.
    found = _named(observed.owned.get(CONFIGMAP, ()), name) or observed.lookup(CONFIGMAP, name)
    if found is not None:
        try:
            return read_snapshot(raw, found)
        except SnapshotProblem as exc:
            raise ResourcesProblem(f"{prefix}: {exc}") from None
    runtime = observed.extra.get(RUNTIME)
    if not isinstance(runtime, dict):
        ref_name = str(((raw.get("spec") or {}).get("runtimeRef") or {}).get("name") or "")
        raise ResourcesProblem(_not_found(kind, ref_name))
    out.actions.append(CreateObject(kind=CONFIGMAP, body=snapshot_configmap(raw, runtime)))
    labels = (runtime.get("metadata") or {}).get("labels") or {}
    if kind == CLUSTER_TRAINING_RUNTIME and labels.get(SUPPORT_LABEL) == "deprecated":
        # Upstream's admission warning, told once: when the TrainJob takes its snapshot.
        out.events.append(
            Event(
                "Warning",
                REASON_DEPRECATED,
                f'Referenced ClusterTrainingRuntime "{runtime["metadata"].get("name", "")}" is '
                "deprecated and will be removed in a future release of Kubeflow Trainer. See "
                f"runtime deprecation policy: {DEPRECATION_POLICY_URL}",
            )
        )
    return runtime


def _mutable_differs(want: Any, have: Any) -> bool:
    return (want or None) != (have or None)


def jobset_patch(desired: Obj, have: Obj) -> Obj | None:
    """A merge patch bringing an existing, suspended (or suspending) JobSet to ``desired``:
    its labels and annotations, ``suspend``, and each replicated job's pod-template fields the
    JobSet webhook lets change while suspended. None when nothing differs.

    Upstream server-side-applies the whole JobSet each time; a merge patch cannot address list
    items, so the replicated jobs are sent whole, as the cache has them with those fields
    changed, under the cached resourceVersion (a newer JobSet makes it fail and retry)."""
    patch: Obj = {}
    for key in ("labels", "annotations"):
        want = (desired.get("metadata") or {}).get(key) or {}
        if not semantically_equal(want, (have.get("metadata") or {}).get(key) or {}):
            patch.setdefault("metadata", {})[key] = want
    want_suspend = bool((desired.get("spec") or {}).get("suspend"))
    if bool((have.get("spec") or {}).get("suspend")) != want_suspend:
        patch.setdefault("spec", {})["suspend"] = want_suspend
    wanted = {
        str(r.get("name")): r for r in (desired.get("spec") or {}).get("replicatedJobs") or ()
    }
    jobs = copy.deepcopy((have.get("spec") or {}).get("replicatedJobs") or [])
    changed = False
    for rjob in jobs:
        want_rjob = wanted.get(str(rjob.get("name")))
        if want_rjob is None:
            continue
        pod = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
        want_pod = _at(want_rjob, ("template", "spec", "template")) or {}
        for part, key in _MUTABLE_WHILE_SUSPENDED:
            want, cur = _at(want_pod, (part, key)), _at(pod, (part, key))
            if not _mutable_differs(want, cur):
                continue
            changed = True
            holder = pod.setdefault(part, {})
            if want:
                holder[key] = copy.deepcopy(want)
            else:
                holder.pop(key, None)
    if changed:
        patch.setdefault("spec", {})["replicatedJobs"] = jobs
        patch.setdefault("metadata", {})["resourceVersion"] = (have.get("metadata") or {}).get(
            "resourceVersion"
        )
    return patch or None


def _objects(raw: Obj, observed: Observed, kind: str) -> _Objects:
    out = _Objects()
    meta = raw["metadata"]
    name = str(meta["name"])
    have = _named(observed.owned.get(JOBSET, ()), name)
    suspend = bool((raw.get("spec") or {}).get("suspend"))
    # Once it runs, a JobSet is not touched (upstream's rule too): only a suspended TrainJob
    # or JobSet has its JobSet brought in line. A running one needs nothing built, only the
    # snapshot of a TrainJob from before snapshots (upstream's migration).
    running = have is not None and not suspend and not (have.get("spec") or {}).get("suspend")
    if running and _named(observed.owned.get(CONFIGMAP, ()), snapshot_name(raw)) is not None:
        return out
    runtime = _runtime(raw, observed, kind, out)
    if running:
        return out
    try:
        info = new_info(raw, runtime.get("spec") or {})
        errors = trainjob_errors(info, raw) + pod_group_errors(info, observed)
        if errors:
            raise ResourcesProblem("; ".join(errors))
        enforce_ml_policy(info, raw)
        enforce_pod_group_policy(info, raw)
        progress = observed.extra.get(PROGRESS)
        if isinstance(progress, ProgressEndpoint):
            inject_progress(info, raw, server_base_url=progress.url)
            ca = ca_configmap_action(raw, observed, ca_pem=progress.ca_pem)
            out.actions += [ca] if ca is not None else []
        desired = build_jobset(info, raw)
        hostfile = hostfile_configmap(info, raw)
        out.actions += pod_group_actions(info, raw, observed)
    except RuntimeProblem as exc:
        raise ResourcesProblem(str(exc)) from None
    if hostfile is not None:
        _mpi_objects(raw, observed, hostfile, out)
    if have is None:
        other = observed.lookup(JOBSET, name)
        if other is None:
            out.actions.append(CreateObject(kind=JOBSET, body=desired))
        elif not is_controlled_by(other, uid=str(meta.get("uid") or "")):
            out.events.append(
                Event(
                    "Warning",
                    "ErrResourceExists",
                    f'Resource "{name}" of Kind "JobSet" already exists and is not managed by '
                    f"TrainJob {meta.get('namespace', '')}/{name}",
                )
            )
        return out  # the JobSet is ours but not in the owned cache yet: wait for it
    if _terminating(have):
        return out
    patch = jobset_patch(desired, have)
    if patch is not None:
        namespace = str(meta.get("namespace") or "")
        out.actions.append(PatchObject(kind=JOBSET, namespace=namespace, name=name, patch=patch))
    return out


def _foreign(kind: str, name: str, trainjob: Obj) -> ResourcesProblem:
    meta = trainjob["metadata"]
    return ResourcesProblem(
        f'Resource "{name}" of Kind "{kind}" already exists and is not managed by TrainJob '
        f"{meta.get('namespace', '')}/{meta['name']}"
    )


def _mpi_objects(raw: Obj, observed: Observed, hostfile: Obj, out: _Objects) -> None:
    """The MPI policy's SSH Secret (created once: it is immutable) and hostfile ConfigMap
    (brought to the hostfile the JobSet's pods will have), before the JobSet."""
    uid = str(raw["metadata"].get("uid") or "")
    secret = ssh_auth_secret(raw)
    for want in (secret, hostfile):
        kind, name = str(want["kind"]), str(want["metadata"]["name"])
        have = _named(observed.owned.get(kind, ()), name)
        if have is None:
            other = observed.lookup(kind, name)
            if other is not None and not is_controlled_by(other, uid=uid):
                # Someone else's keys or hosts: no JobSet runs with them.
                raise _foreign(kind, name, raw)
            if other is None:
                out.actions.append(CreateObject(kind=kind, body=want))
        elif want is hostfile and (have.get("data") or {}) != want["data"]:
            meta = have["metadata"]
            out.actions.append(
                PatchObject(
                    kind=kind,
                    namespace=str(meta.get("namespace") or ""),
                    name=name,
                    patch={"data": want["data"]},
                )
            )


def _failed_by_deadline(status: TrainJobStatus) -> bool:
    cond = condition(status.data, FAILED)
    return (
        cond is not None
        and cond.get("status") == "True"
        and (cond.get("reason") == DEADLINE_EXCEEDED)
    )


def _failure_event(message: str) -> Event:
    text = f"TrainJob resources reconciliation failed: {message[:_EVENT_LIMIT]}"
    if len(message) > _EVENT_LIMIT:
        text += " ..."
    return Event("Warning", REASON_RESOURCES_FAILED, text)


def plan_trainjob(raw: Obj, observed: Observed, *, now: dt.datetime) -> Plan:
    """The plan for one reconcile of the TrainJob ``raw``."""
    spec = raw.get("spec") or {}
    if (spec.get("managedBy") or MANAGED_BY_SELF) != MANAGED_BY_SELF:
        return Plan()
    meta = raw["metadata"]
    status = TrainJobStatus.of(raw)
    was_complete, was_failed = status.is_condition_true(COMPLETE), status.is_condition_true(FAILED)
    ref = spec.get("runtimeRef") or {}
    kind = runtime_kind(ref)
    objects = _Objects()
    if kind is None:
        message = f"unsupported runtime: {_group_kind(ref)}"
        set_condition(status, failed(REASON_NOT_SUPPORTED, message), now=now)
    elif not (was_complete or was_failed):
        # Upstream drops a Failed condition before each pass and takes it again from the
        # JobSet; we keep it, so a failed TrainJob whose JobSet is gone (a TTL) never runs
        # again: being finished is what a TrainJob's status says, not what its JobSet does.
        try:
            objects = _objects(raw, observed, kind)
        except ResourcesProblem as exc:
            objects.events.append(_failure_event(str(exc)))
    set_suspended(status, suspend=bool(spec.get("suspend")), now=now)
    jobset = _named(observed.owned.get(JOBSET, ()), str(meta["name"]))
    if kind is not None and jobset is not None:
        sync_from_jobset(status, jobset, now=now)
    requeue_after: float | None = None
    due = deadline(raw, status)
    if due is not None and now > due:
        set_condition(status, failed(DEADLINE_EXCEEDED, DEADLINE_MESSAGE), now=now)
        objects.actions = [a for a in objects.actions if not isinstance(a, CreateObject)]
        objects.actions = [a for a in objects.actions if not isinstance(a, PatchObject)]
    elif due is not None:
        requeue_after = max((due - now).total_seconds(), 1.0)
    # Failed by its deadline now or in an earlier pass whose JobSet deletion never landed (the
    # operator killed after the status write, the API server away): the status is what
    # persists, so the deletion is owed for as long as the JobSet is there, not only in the
    # pass that saw the deadline pass.
    if _failed_by_deadline(status) and jobset is not None and not _terminating(jobset):
        jm = jobset["metadata"]
        objects.actions.append(
            DeleteObject(
                kind=JOBSET,
                namespace=str(jm.get("namespace") or ""),
                name=str(jm["name"]),
                uid=str(jm.get("uid") or ""),
                reason="deadline exceeded",
            )
        )
    metrics: list[JobMetric] = []
    if status.is_condition_true(COMPLETE) and not was_complete:
        metrics.append(JobMetric.SUCCESSFUL)
    if status.is_condition_true(FAILED) and not was_failed:
        metrics.append(JobMetric.FAILED)
    return Plan(
        actions=tuple(objects.actions),
        status=status,
        events=tuple(objects.events),
        requeue_after=requeue_after,
        metrics=tuple(metrics),
    )
