"""A tiny TFJob-like framework and an in-memory cluster to drive ``plan()`` with plain data.

``DemoJob`` has Chief, PS and Worker replicas; its status rule mirrors TF's (the chief, else
worker 0 / all workers, decides; a failed replica fails the job unless it is restarting).
``FakeCluster`` applies a plan's actions the way the apiserver would, so tests can run the
plan -> execute -> plan loop and check convergence.
"""

from __future__ import annotations

import copy
import datetime as dt
import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from jobcontroller.api.common import (
    CleanPodPolicy,
    JobModel,
    JobSpec,
    JobStatus,
    ReplicaSpec,
    RestartPolicy,
)
from jobcontroller.api.defaults import set_default_port
from jobcontroller.core import (
    POD,
    POD_GROUP,
    SERVICE,
    Action,
    CreateFailure,
    CreateObject,
    DeleteJob,
    DeleteObject,
    Event,
    ExtraObjects,
    FrameworkOf,
    LifecycleWords,
    Obj,
    Observed,
    PatchObject,
    Plan,
    PlanConfig,
    ReplicaPods,
    is_controlled_by,
    is_restarting,
    new_reason,
    plan,
    replica_name,
    set_condition,
)

NOW = dt.datetime(2024, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
CONTAINER = "trainer"
PORT_NAME = "demo-port"
PORT = 2222
KIND = "DemoJob"


class DemoSpec(JobSpec):
    demo_replica_specs: dict[str, ReplicaSpec] = {}

    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.demo_replica_specs


class DemoJob(JobModel[DemoSpec]):
    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = KIND
    PLURAL: ClassVar[str] = "demojobs"
    SINGULAR: ClassVar[str] = "demojob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = ("Chief", "PS", "Worker")
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = CONTAINER


@dataclass
class DemoFramework(FrameworkOf[JobModel[Any]]):
    """A framework for the planner alone; knobs let tests bend single behaviours."""

    model = DemoJob
    framework_name = "demo"
    controller_name = "demojob-controller"

    extra_errors: list[str] = field(default_factory=list)
    tolerated_errors: list[str] = field(default_factory=list)
    """Errors (also returned by ``validate``) that a job stored before the swap may break."""
    no_recreate: set[str] = field(default_factory=set)
    no_services: set[str] = field(default_factory=set)
    extra: Callable[[JobModel[Any], Observed], list[Action]] | None = None
    status_calls: int = 0

    def set_defaults(self, job: JobModel[Any]) -> JobModel[Any]:
        job = job.model_copy(deep=True)
        policy = job.spec.run_policy
        if policy.clean_pod_policy is None:
            policy.clean_pod_policy = CleanPodPolicy.NONE
        for spec in job.replica_specs().values():
            if spec.replicas is None:
                spec.replicas = 1
            if spec.restart_policy is None:
                spec.restart_policy = RestartPolicy.NEVER
            set_default_port(
                spec.template, container_name=CONTAINER, port_name=PORT_NAME, port=PORT
            )
        return job

    def validate(self, job: JobModel[Any]) -> list[str]:
        errors = [*self.extra_errors, *self.tolerated_errors]
        if not job.replica_specs():
            errors.append("spec.demoReplicaSpecs: must be specified")
        return errors

    def tolerated(self, job: JobModel[Any]) -> list[str]:
        return list(self.tolerated_errors)

    def pod_replica_types(self, job: JobModel[Any]) -> list[str]:
        return [rtype for rtype in DemoJob.REPLICA_TYPES if rtype in job.replica_specs()]

    def lifecycle_words(self, job: JobModel[Any]) -> LifecycleWords:
        return LifecycleWords.training_operator(KIND, job.name)

    def is_master_role(self, job: JobModel[Any], rtype: str, index: int) -> bool:
        if "Chief" in job.replica_specs():
            return rtype == "Chief"
        return rtype == "Worker" and index == 0

    def services_for(self, job: JobModel[Any], rtype: str) -> bool:
        return rtype not in self.no_services

    def recreate_failed_pods(self, job: JobModel[Any], rtype: str) -> bool:
        return rtype not in self.no_recreate

    def set_cluster_spec(
        self, job: JobModel[Any], template: Obj, *, rtype: str, index: int, config: PlanConfig
    ) -> None:
        for container in template["spec"]["containers"]:
            if container.get("name") == CONTAINER:
                env = container.setdefault("env", [])
                env.append({"name": "DEMO_TASK", "value": f"{rtype.lower()}-{index}"})

    def update_status(
        self,
        job: JobModel[Any],
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        self.status_calls += 1
        specs = job.replica_specs()
        leader = "Chief" if "Chief" in specs else "Worker"
        # TF's rule: a Restarting condition set while recreating pods survives the leader's
        # Running (which replaces it), with its own reason and message.
        restarting = status.condition("Restarting") if is_restarting(status) else None
        for rtype in DemoJob.REPLICA_TYPES:
            counts = status.replica_statuses.get(rtype)
            if counts is None or rtype not in specs:
                continue
            if rtype == leader:
                if counts.active > 0:
                    set_condition(
                        status,
                        cond_type="Running",
                        reason=new_reason(KIND, "Running"),
                        message=f"{KIND} {job.key} is running.",
                        now=now,
                    )
                if (specs[rtype].replicas or 0) - counts.succeeded == 0:
                    set_condition(
                        status,
                        cond_type="Succeeded",
                        reason=new_reason(KIND, "Succeeded"),
                        message=f"{KIND} {job.key} successfully completed.",
                        now=now,
                    )
            if counts.failed > 0:
                if restarting is not None:
                    set_condition(
                        status,
                        cond_type="Restarting",
                        reason=restarting.reason or "",
                        message=restarting.message or "",
                        now=now,
                    )
                else:
                    set_condition(
                        status,
                        cond_type="Failed",
                        reason=new_reason(KIND, "Failed"),
                        message=(
                            f"{KIND} {job.key} has failed because {counts.failed} {rtype} "
                            "replica(s) failed."
                        ),
                        now=now,
                    )
        return []

    def extra_objects(
        self, job: JobModel[Any], observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> ExtraObjects:
        return ExtraObjects(actions=self.extra(job, observed) if self.extra else [])


def template(*, resources: Obj | None = None, **spec_fields: Any) -> Obj:
    container: Obj = {"name": CONTAINER, "image": "demo:1"}
    if resources is not None:
        container["resources"] = resources
    return {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "x"}},
        "spec": {"containers": [container], **spec_fields},
    }


def kubeflow_job(kind: str, version: str, spec: Obj) -> Obj:
    """A job of one of the real kinds (``TFJob``, ``v1``...), named ``job`` in ``ns``, as the
    cache holds it: uid and generation set, no status."""
    return {
        "apiVersion": f"kubeflow.org/{version}",
        "kind": kind,
        "metadata": {"name": "job", "namespace": "ns", "uid": "job-uid", "generation": 1},
        "spec": spec,
    }


def new_job(
    name: str = "demo",
    *,
    replicas: Mapping[str, int] | None = None,
    restart_policy: str | None = None,
    run_policy: Obj | None = None,
    templates: Mapping[str, Obj] | None = None,
    status: Obj | None = None,
    annotations: Mapping[str, str] | None = None,
) -> Obj:
    """A stored DemoJob (defaults: one Chief, two Workers)."""
    specs: Obj = {}
    for rtype, count in (replicas or {"Chief": 1, "Worker": 2}).items():
        spec: Obj = {"replicas": count, "template": (templates or {}).get(rtype, template())}
        if restart_policy is not None:
            spec["restartPolicy"] = restart_policy
        specs[rtype] = spec
    metadata: Obj = {"name": name, "namespace": "ns", "uid": f"uid-{name}", "generation": 1}
    if annotations:
        metadata["annotations"] = dict(annotations)
    raw: Obj = {
        "apiVersion": "kubeflow.org/v1",
        "kind": KIND,
        "metadata": metadata,
        "spec": {"runPolicy": run_policy or {}, "demoReplicaSpecs": specs},
    }
    if status is not None:
        raw["status"] = status
    return raw


def merge_patch(target: Obj, patch: Obj) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge_patch(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


@dataclass
class FakeCluster:
    """The apiserver's view: the job plus every object in its namespace, by (kind, name)."""

    job: Obj
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    job_deleted: bool = False
    create_failure: CreateFailure | None = None
    """What the executor would report of refused creations."""
    valid_spec: tuple[str, int] | None = None
    """What the last applied plan found valid (the controller's ``JobState.valid_spec``)."""
    _uids: Iterator[int] = field(default_factory=itertools.count)

    def add(self, obj: Obj) -> Obj:
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {}).setdefault("uid", f"u{next(self._uids)}")
        obj["metadata"].setdefault("namespace", "ns")
        self.objects[(obj["kind"], obj["metadata"]["name"])] = obj
        return obj

    def get(self, kind: str, name: str) -> Obj:
        return self.objects[(kind, name)]

    def pods(self) -> list[Obj]:
        return [o for (k, _), o in sorted(self.objects.items()) if k == POD]

    def names(self, kind: str) -> list[str]:
        return sorted(name for (k, name) in self.objects if k == kind)

    def observed(self) -> Observed:
        uid = self.job["metadata"]["uid"]
        owned = [o for o in self.objects.values() if is_controlled_by(o, uid=uid)]
        by_kind: dict[str, list[Obj]] = {}
        for obj in owned:
            by_kind.setdefault(obj["kind"], []).append(obj)
        return Observed(
            pods=by_kind.pop(POD, []),
            services=by_kind.pop(SERVICE, []),
            owned=by_kind,
            lookup=lambda kind, name: self.objects.get((kind, name)),
            create_failure=self.create_failure,
            valid_spec=self.valid_spec,
        )

    def plan(
        self, fw: DemoFramework, *, now: dt.datetime = NOW, config: PlanConfig | None = None
    ) -> Plan:
        return plan(
            fw, copy.deepcopy(self.job), self.observed(), now=now, config=config or PlanConfig()
        )

    def apply(self, result: Plan) -> None:
        self.valid_spec = result.valid_spec  # remembered for the next pass, as the controller does
        for action in result.actions:
            self._apply(action)
        if result.status is not None:
            self.job["status"] = result.status.to_dict()

    def _apply(self, action: Action) -> None:
        if isinstance(action, CreateObject):
            key = (action.kind, action.name)
            assert key not in self.objects, f"create of existing {key}"
            obj = self.add(action.body)
            if action.kind == POD:
                obj["status"] = {"phase": "Pending"}
        elif isinstance(action, DeleteObject):
            existing = self.objects.get((action.kind, action.name))
            if existing is not None and existing["metadata"]["uid"] == action.uid:
                del self.objects[(action.kind, action.name)]
        elif isinstance(action, PatchObject):
            if action.kind == KIND and action.name == self.job["metadata"]["name"]:
                merge_patch(self.job, action.patch)
            else:
                merge_patch(self.objects[(action.kind, action.name)], action.patch)
        elif isinstance(action, DeleteJob):
            self.job_deleted = True

    def step(self, fw: DemoFramework, **kwargs: Any) -> Plan:
        result = self.plan(fw, **kwargs)
        self.apply(result)
        return result

    def settle(self, fw: DemoFramework, *, rounds: int = 6, **kwargs: Any) -> list[Plan]:
        """Plan and apply until a plan has no actions; every plan, in order."""
        plans = []
        for _ in range(rounds):
            result = self.step(fw, **kwargs)
            plans.append(result)
            if not result.actions:
                return plans
        raise AssertionError(f"no convergence after {rounds} rounds: {plans[-1].actions}")

    def set_pod(
        self,
        rtype: str,
        index: int,
        phase: str,
        *,
        exit_code: int | None = None,
        restarts: int = 0,
        finished_at: str = "2024-01-01T11:00:00Z",
        terminating: bool = False,
    ) -> Obj:
        """Move a pod the planner created into a phase, as the kubelet would."""
        pod = self.get(
            POD, replica_name(job_name=self.job["metadata"]["name"], rtype=rtype, index=index)
        )
        state: Obj = {"running": {}}
        if exit_code is not None:
            state = {"terminated": {"exitCode": exit_code, "finishedAt": finished_at}}
        pod["status"] = {
            "phase": phase,
            "containerStatuses": [{"name": CONTAINER, "restartCount": restarts, "state": state}],
        }
        if terminating:
            pod["metadata"]["deletionTimestamp"] = "2024-01-01T11:59:00Z"
        return pod


def running_job(fw: DemoFramework, cluster: FakeCluster, **kwargs: Any) -> None:
    """Create every replica and mark them all Running."""
    cluster.settle(fw, **kwargs)
    for pod in cluster.pods():
        pod["status"] = {
            "phase": "Running",
            "containerStatuses": [{"name": CONTAINER, "restartCount": 0, "state": {"running": {}}}],
        }
    cluster.settle(fw, **kwargs)


def reasons(result: Plan) -> list[str]:
    return [event.reason for event in result.events]


def condition(result: Plan, type_: str) -> Any:
    assert result.status is not None
    return result.status.condition(type_)


__all__ = [
    "CONTAINER",
    "KIND",
    "NOW",
    "POD_GROUP",
    "DemoFramework",
    "DemoJob",
    "FakeCluster",
    "condition",
    "merge_patch",
    "new_job",
    "reasons",
    "running_job",
    "template",
]
