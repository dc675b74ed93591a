"""``TrainJobController``: Kubeflow Trainer v2's TrainJob on the base library's reconciler.

A TrainJob runs as one JobSet (``jobset.x-k8s.io/v1alpha2``) of its name, which the JobSet
controller turns into Jobs and pods: this controller makes no pods itself. It watches its
TrainJobs; the JobSets, runtime snapshots and MPI hostfiles (ConfigMaps), MPI SSH keys
(Secrets) and PodGroups (of each kind whose CRD was installed when it started) they own; and
the runtimes (TrainingRuntime in the TrainJobs' namespaces, ClusterTrainingRuntime) and
PriorityClasses (a Volcano gang's pods need theirs), all through informers;
a reconcile reads the TrainJob's runtime from those caches (:meth:`observed_extra`), never from
the API, and plans with :func:`trainer_operator.planner.plan_trainjob`.

A runtime that appears or changes wakes the TrainJobs that name it and have no snapshot yet (a
TrainJob waiting for its runtime); the others plan from their snapshot and are not disturbed.
A PriorityClass that appears or changes wakes every TrainJob with no snapshot yet (one may be
waiting for it).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Collection, Iterator, Mapping
from typing import Any, ClassVar

import msgspec
import structlog
from prometheus_client.core import GaugeMetricFamily, Metric

from jobcontroller import (
    CONFIGMAPS,
    PLUGINS_POD_GROUPS,
    PRIORITY_CLASSES,
    SECRETS,
    VOLCANO_POD_GROUPS,
    CreateObject,
    Obj,
    Observed,
    Plan,
    PlanConfig,
    PodCheck,
    ProgressSettings,
    Reconciler,
    Resource,
    Settings,
    Setup,
    has_ssh_key_pair,
    lookup_crds,
    override,
    with_ssh_key_pair,
)
from trainer_operator.api import TrainJob
from trainer_operator.crd import trainer_crd
from trainer_operator.planner import (
    CLUSTER_TRAINING_RUNTIME,
    RUNTIME,
    TRAINING_RUNTIME,
    plan_trainjob,
    runtime_kind,
)
from trainer_operator.podgroups import (
    COSCHEDULING_KIND,
    POD_GROUP_CRDS,
    POD_GROUP_KINDS,
    PRIORITY_CLASS,
    PRIORITY_CLASS_EXISTS,
    VOLCANO_KIND,
)
from trainer_operator.progress import jobset_pod_check
from trainer_operator.snapshot import SNAPSHOT_SUFFIX

__all__ = [
    "CLUSTER_TRAINING_RUNTIMES",
    "JOBSETS",
    "TRAINING_RUNTIMES",
    "TrainJobController",
    "installed_pod_groups",
]

log = structlog.get_logger(__name__)

JOBSETS = Resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")
TRAINING_RUNTIMES = Resource(TrainJob.GROUP, TrainJob.VERSION, TRAINING_RUNTIME, "trainingruntimes")
CLUSTER_TRAINING_RUNTIMES = Resource(
    TrainJob.GROUP,
    TrainJob.VERSION,
    CLUSTER_TRAINING_RUNTIME,
    "clustertrainingruntimes",
    namespaced=False,
)


LOOKUP_PATIENCE_SECONDS = 30.0
"""How long the start waits for the API server to answer the PodGroup CRD lookups."""
_LOOKUP_RETRY_SECONDS = 1.0


def installed_pod_groups(
    settings: Settings, answers: Mapping[str, bool | None] | None = None
) -> frozenset[str]:
    """The PodGroup kinds whose CRD is installed, looked up once before the controller starts
    (v2.3.0 asks its REST mapper once too), all in one go (:func:`lookup_crds`); ``answers``
    are lookups already made with others (the all-in-one asks for JobSet's CRDs at once).

    A lookup the API server does not answer (it is restarting) is asked again, for up to
    :data:`LOOKUP_PATIENCE_SECONDS`; still unanswered, the kind counts as not installed. The
    other way round, an informer of a kind that does not exist would never sync, and the
    operator would never start (found by tests/chaos/test_trainjob_kills.py); this way a
    TrainJob whose runtime asks for that kind's PodGroups gets an event saying to install its
    CRD and restart."""
    deadline = time.monotonic() + LOOKUP_PATIENCE_SECONDS
    crds = list(POD_GROUP_CRDS.values())
    if answers is None or any(crd not in answers for crd in crds):
        answers = {**(answers or {}), **lookup_crds(settings, crds)}
    known = dict(answers)
    while (unanswered := [crd for crd in crds if known[crd] is None]) and (
        time.monotonic() < deadline
    ):
        time.sleep(_LOOKUP_RETRY_SECONDS)
        known.update(lookup_crds(settings, unanswered))
    found: set[str] = set()
    for kind, crd in POD_GROUP_CRDS.items():
        if known[crd] is None:
            log.warning(
                "PodGroups are not served: the API server did not say whether their CRD is "
                "installed (restart the operator once it answers)",
                crd=crd,
            )
        elif known[crd]:
            found.add(kind)
    return frozenset(found)


def _finished(trainjob: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (trainjob.get("status") or {}).get("conditions") or ()
    )


class TrainJobController(Reconciler[TrainJob]):
    """Reconciles TrainJobs (``trainer.kubeflow.org/v1alpha1``) into JobSets."""

    model = TrainJob
    framework_name = "trainjob"
    controller_name = "trainjob-controller"
    event_component = "trainer-trainjob-controller"
    """Upstream's event recorder."""
    object_events = False
    """Upstream records no event per object it applies."""
    owns_pods = False
    finished_conditions = ("Complete", "Failed")
    running_condition = None
    job_verbs = ("get", "list", "watch")
    required_crds = (
        "jobsets.jobset.x-k8s.io",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    )
    owned_resources: ClassVar[Mapping[str, Resource]] = {
        "JobSet": JOBSETS,
        "ConfigMap": CONFIGMAPS,
        "Secret": SECRETS,
        COSCHEDULING_KIND: PLUGINS_POD_GROUPS,
        VOLCANO_KIND: VOLCANO_POD_GROUPS,
    }
    read_resources: ClassVar[Mapping[str, Resource]] = {
        TRAINING_RUNTIME: TRAINING_RUNTIMES,
        CLUSTER_TRAINING_RUNTIME: CLUSTER_TRAINING_RUNTIMES,
        PRIORITY_CLASS: PRIORITY_CLASSES,
    }
    optional_crds = tuple(POD_GROUP_CRDS.values())

    def __init__(
        self,
        *,
        config: PlanConfig | None = None,
        pod_groups: Collection[str] = (),
        progress: ProgressSettings | None = None,
    ) -> None:
        """``pod_groups``: the PodGroup kinds (:data:`COSCHEDULING_KIND`,
        :data:`VOLCANO_KIND`) whose CRD is installed (:func:`installed_pod_groups`); only
        those are watched and created. ``progress``: serve the training-progress endpoint and
        give the trainer's pods what they need to report to it (the ``trainer-operator``
        command does by default); None: neither, as upstream without its TrainJobStatus
        feature gate."""
        self.pod_groups = frozenset(k for k in pod_groups if k in POD_GROUP_CRDS)
        super().__init__(config=config)
        if progress is not None:
            self.enable_progress(progress)

    @override
    def owned_kinds(self) -> Mapping[str, Resource]:
        return {
            kind: resource
            for kind, resource in self.owned_resources.items()
            if kind not in POD_GROUP_CRDS or kind in self.pod_groups
        }

    @override
    def progress_pod_check(self) -> PodCheck:
        return jobset_pod_check(self._jobset_uid)

    @override
    def on_setup(self, setup: Setup) -> None:
        if self.progress_settings is not None and setup.metrics is not None:
            setup.metrics.on_scrape(self._progress_families)

    def _progress_families(self) -> list[Metric]:
        """The progress of every unfinished TrainJob that reported one, read from the cache
        at scrape time: no series outlives its TrainJob."""
        gauge = GaugeMetricFamily(
            "trainjob_progress_percentage",
            "status.trainerStatus.progressPercentage of unfinished TrainJobs",
            labels=["namespace", "trainjob"],
        )
        for trainjob in self.watch.jobs():
            reported = ((trainjob.get("status") or {}).get("trainerStatus") or {}).get(
                "progressPercentage"
            )
            if isinstance(reported, int) and not _finished(trainjob):
                meta = trainjob["metadata"]
                gauge.add_metric([str(meta.get("namespace") or ""), str(meta["name"])], reported)
        return [gauge]

    def _jobset_uid(self, namespace: str, name: str) -> str | None:
        """The uid of the JobSet the TrainJob ``namespace/name`` controls (None: none)."""
        trainjob = self.watch.job_store.get(namespace, name)
        jobset = self.watch.get("JobSet", namespace, name)
        if trainjob is None or jobset is None:
            return None
        uid = trainjob["metadata"].get("uid")
        refs = jobset["metadata"].get("ownerReferences") or ()
        if not any(r.get("controller") and r.get("uid") == uid for r in refs):
            return None
        return str(jobset["metadata"].get("uid") or "") or None

    @override
    def read_changed(self, kind: str, obj: Obj) -> Iterator[str]:
        """The unfinished TrainJobs naming runtime ``obj`` that have no snapshot yet (the
        others plan from their snapshot: a runtime's changes are not theirs); for a
        PriorityClass, every unfinished TrainJob with no snapshot yet."""
        meta = obj.get("metadata") or {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        for trainjob in self.watch.jobs():
            tmeta = trainjob["metadata"]
            ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
            if _finished(trainjob):
                continue
            if kind != PRIORITY_CLASS and (runtime_kind(ref) != kind or ref.get("name") != name):
                continue
            tns, tname = str(tmeta.get("namespace") or ""), str(tmeta["name"])
            if kind == TRAINING_RUNTIME and tns != namespace:
                continue
            if self.watch.get("ConfigMap", tns, f"{tname}{SNAPSHOT_SUFFIX}") is None:
                yield f"{tns}/{tname}"

    def _priority_class_exists(self, name: str) -> bool:
        return self.watch.get(PRIORITY_CLASS, "", name) is not None

    @override
    def observed_extra(self, job: Obj) -> Mapping[str, Any]:
        ref = (job.get("spec") or {}).get("runtimeRef") or {}
        kind = runtime_kind(ref)
        if kind is None:
            return {RUNTIME: None}
        namespace = "" if kind == CLUSTER_TRAINING_RUNTIME else job["metadata"].get("namespace")
        return {
            RUNTIME: self.watch.get(kind, str(namespace or ""), str(ref.get("name") or "")),
            POD_GROUP_KINDS: self.pod_groups,
            PRIORITY_CLASS_EXISTS: self._priority_class_exists,
        }

    @override
    def materialize(self, action: CreateObject) -> CreateObject:
        """The MPI policy's SSH Secret gets its fresh key pair here, never in a plan."""
        if action.kind == "Secret" and not has_ssh_key_pair(action.body):
            return msgspec.structs.replace(action, body=with_ssh_key_pair(action.body))
        return action

    @override
    def plan_job(
        self, raw: Obj, observed: Observed, *, now: dt.datetime, config: PlanConfig
    ) -> Plan:
        return plan_trainjob(raw, observed, now=now)

    @override
    def crd(self) -> dict[str, Any]:
        return trainer_crd(TrainJob)
