"""The pods and headless Services of a job's replicas, built from the replica spec."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from msgspec import Struct

from jobcontroller.api.common import JobModel, ReplicaSpec
from jobcontroller.api.deepcopy import deep_copy
from jobcontroller.core.gang import GANG_GENERATION_ANNOTATION, gang_generation, restart_all
from jobcontroller.core.names import (
    JOB_ROLE_LABEL,
    JOB_ROLE_MASTER,
    owner_reference,
    replica_labels,
    replica_name,
)
from jobcontroller.core.podgroup import decorate_template, gang_enabled
from jobcontroller.core.restart import pod_restart_policy
from jobcontroller.core.types import (
    POD,
    SERVICE,
    FrameworkOf,
    GangFlavor,
    JobT,
    Obj,
    PlanConfig,
)

__all__ = [
    "BuiltPod",
    "BuiltTemplate",
    "build_pod",
    "build_service",
    "build_template",
    "service_ports",
]


class BuiltPod(Struct, frozen=True):
    body: Obj
    template_restart_policy: bool
    """The template set its own restartPolicy, which the replica spec's overrides."""
    foreign_scheduler: bool
    """Gang scheduling is on but the template names another scheduler (kept as is)."""


class BuiltTemplate(Struct, frozen=True):
    template: Obj
    template_restart_policy: bool
    """The template set its own restartPolicy, which the replica spec's overrides."""
    foreign_scheduler: bool
    """Gang scheduling is on but the template names another scheduler (kept as is)."""


def build_template(
    job: JobModel[Any],
    *,
    rtype: str,
    spec: ReplicaSpec,
    config: PlanConfig,
    labels: Mapping[str, str],
    restart_policy: str | None,
    configure: Callable[[Obj], None],
    flavor: GangFlavor,
) -> BuiltTemplate:
    """A replica's pod template, for a pod of the base's or a child's (a launcher Job's):
    ``labels`` over the template's own, ``configure`` (the cluster wiring) applied, the
    ``restart_policy`` (``Never`` under a whole-gang restart, which also stamps the gang
    generation) and the gang's scheduler."""
    template: Obj = deep_copy(spec.template)
    metadata = template.get("metadata")
    if not isinstance(metadata, dict):
        metadata = template["metadata"] = {}
    pod_spec = template.get("spec")
    if not isinstance(pod_spec, dict):
        pod_spec = template["spec"] = {}
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}

    configure(template)

    template_restart_policy = bool(pod_spec.get("restartPolicy"))
    if restart_all(job):
        # Whole-gang restart: the operator restarts the gang, the kubelet never one rank.
        restart_policy = "Never"
        meta = template.setdefault("metadata", {})
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            GANG_GENERATION_ANNOTATION: str(gang_generation(job)),
        }
    if restart_policy is not None:
        pod_spec["restartPolicy"] = restart_policy

    foreign_scheduler = False
    if gang_enabled(config):
        foreign_scheduler = decorate_template(
            template,
            job_name=job.name,
            rtype=rtype,
            config=config,
            flavor=flavor,
        )
    return BuiltTemplate(
        template=template,
        template_restart_policy=template_restart_policy,
        foreign_scheduler=foreign_scheduler,
    )


def build_pod(
    fw: FrameworkOf[JobT],
    job: JobT,
    *,
    rtype: str,
    index: int,
    spec: ReplicaSpec,
    config: PlanConfig,
) -> BuiltPod:
    """The complete Pod for one replica slot (common's createNewPod)."""
    labels = replica_labels(
        controller_name=fw.controller_name,
        job_name=job.name,
        rtype=rtype,
        index=index + fw.replica_index_offset(job, rtype),
    )
    if fw.is_master_role(job, rtype, index):
        labels[JOB_ROLE_LABEL] = JOB_ROLE_MASTER

    def configure(template: Obj) -> None:
        fw.set_cluster_spec(job, template, rtype=rtype, index=index, config=config)

    built = build_template(
        job,
        rtype=rtype,
        spec=spec,
        config=config,
        labels=labels,
        restart_policy=pod_restart_policy(spec.restart_policy),
        configure=configure,
        flavor=fw.gang_flavor(job),
    )
    template = built.template
    metadata = template["metadata"]
    pod_metadata: dict[str, Any] = {
        "name": replica_name(job_name=job.name, rtype=rtype, index=index),
        "namespace": job.namespace,
        "labels": metadata.get("labels") or {},
        "ownerReferences": [owner_reference(job)],
    }
    for key in ("annotations", "finalizers"):
        if metadata.get(key):
            pod_metadata[key] = metadata[key]
    body: Obj = {
        "apiVersion": "v1",
        "kind": POD,
        "metadata": pod_metadata,
        "spec": template["spec"],
    }
    return BuiltPod(
        body=body,
        template_restart_policy=built.template_restart_policy,
        foreign_scheduler=built.foreign_scheduler,
    )


def service_ports(template: Obj, *, container: str | None) -> list[dict[str, Any]]:
    """Every named port of the default container (the first container when it has no
    such container, where the defaulter put the framework's port)."""
    containers = [c for c in (template.get("spec") or {}).get("containers") or [] if c]
    if not containers:
        return []
    target = next((c for c in containers if c.get("name") == container), containers[0])
    ports: list[dict[str, Any]] = []
    for port in target.get("ports") or []:
        if isinstance(port, dict) and port.get("name") and port.get("containerPort"):
            ports.append({"name": port["name"], "port": port["containerPort"]})
    return ports


def build_service(
    fw: FrameworkOf[JobT], job: JobT, *, rtype: str, index: int, spec: ReplicaSpec
) -> Obj:
    """The headless Service giving one replica a stable DNS name (its pod's name)."""
    selector = replica_labels(
        controller_name=fw.controller_name,
        job_name=job.name,
        rtype=rtype,
        index=index + fw.replica_index_offset(job, rtype),
    )
    service_spec: dict[str, Any] = {"clusterIP": "None", "selector": dict(selector)}
    ports = service_ports(spec.template, container=fw.model.DEFAULT_CONTAINER_NAME)
    if ports:
        service_spec["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": SERVICE,
        "metadata": {
            "name": replica_name(job_name=job.name, rtype=rtype, index=index),
            "namespace": job.namespace,
            "labels": dict(selector),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": service_spec,
    }
