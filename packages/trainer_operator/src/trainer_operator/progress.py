"""Training progress in a TrainJob's ``status.trainerStatus``: what is the TrainJob's own in
Trainer v2.3.0's TrainJobStatus feature (pkg/runtime/framework/plugins/trainjobstatus). The
endpoint, the report's rules and the pods' env, token and CA are every kind's, in the base
library (``jobcontroller.ProgressTarget``...); here:

- the TrainJob's URL and token audience (:data:`TRAINJOB`, upstream's ``StatusUrl`` and
  ``TokenAudience``);
- the trainer's pods in the JobSet getting the env and volume (:func:`inject_progress`);
- the CA ConfigMap owned by the TrainJob (:func:`ca_configmap_action`);
- which pods may report (:func:`jobset_pod_check`: its JobSet's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobcontroller import (
    Action,
    Observed,
    PodCheck,
    ProgressTarget,
    ca_configmap_name,
    progress_env,
    progress_mount,
    progress_volume,
)
from jobcontroller import ca_configmap as job_ca_configmap
from jobcontroller import ca_configmap_action as job_ca_configmap_action
from trainer_operator.builder import owner_reference
from trainer_operator.info import TRAINER, Info, by_mount_path, by_name, upsert

__all__ = [
    "JOBSET_NAME_LABEL",
    "JOBSET_UID_LABEL",
    "TRAINJOB",
    "ca_configmap",
    "ca_configmap_action",
    "inject_progress",
    "jobset_pod_check",
    "status_path",
    "token_audience",
]

Obj = dict[str, Any]

TRAINJOB = ProgressTarget(
    group="trainer.kubeflow.org", version="v1alpha1", plural="trainjobs", kind="TrainJob"
)
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"


def status_path(namespace: str, name: str) -> str:
    """The endpoint's path for one TrainJob (upstream's ``StatusUrl``)."""
    return TRAINJOB.path(namespace, name)


def token_audience(namespace: str, name: str) -> str:
    """The audience a reporting pod's token must carry (upstream's ``TokenAudience``)."""
    return TRAINJOB.audience(namespace, name)


def inject_progress(info: Info, trainjob: Obj, *, server_base_url: str) -> None:
    """Every container of the trainer's pods gets the endpoint's URL and the paths of the
    token and CA (upstream's three env names), and the pods the projected volume holding
    both, as upstream's TrainJobStatus plugin gives them."""
    ps = info.pod_set_of_ancestor(TRAINER)
    if ps is None:
        return
    meta = trainjob["metadata"]
    namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
    env = progress_env(server_base_url.rstrip("/") + status_path(namespace, name))
    for container in ps.containers:
        upsert(container.env, env, by_name)
        upsert(container.volume_mounts, [progress_mount()], by_mount_path)
    volume = progress_volume(
        audience=token_audience(namespace, name), configmap=ca_configmap_name(name)
    )
    upsert(ps.volumes, [volume], by_name)
    _name_service_account(info, ps.name)


def _name_service_account(info: Info, pod_set: str) -> None:
    """``serviceAccountName: default`` where the runtime names none, as the ServiceAccount
    admission plugin would: the API server refuses a projected token in a pod without one
    (where that plugin is off), and everywhere else the result is the same pod."""
    for rjob in info.spec.get("replicatedJobs") or ():
        if rjob.get("name") != pod_set:
            continue
        spec = rjob.setdefault("template", {}).setdefault("spec", {})
        pod = spec.setdefault("template", {}).setdefault("spec", {})
        if not pod.get("serviceAccountName") and not pod.get("serviceAccount"):
            pod["serviceAccountName"] = "default"


def ca_configmap(trainjob: Obj, *, ca_pem: str) -> Obj:
    """Upstream's ``<name>-tls-config``: the endpoint's CA, owned by the TrainJob."""
    meta = trainjob["metadata"]
    return job_ca_configmap(
        name=str(meta["name"]),
        namespace=meta.get("namespace"),
        owner=owner_reference(trainjob),
        ca_pem=ca_pem,
    )


def ca_configmap_action(trainjob: Obj, observed: Observed, *, ca_pem: str) -> Action | None:
    """Create the CA ConfigMap, or bring its CA in line (a new certificate); None if it is."""
    return job_ca_configmap_action(ca_configmap(trainjob, ca_pem=ca_pem), observed)


def jobset_pod_check(jobset_uid: Callable[[str, str], str | None]) -> PodCheck:
    """A :data:`PodCheck` from the uid of the TrainJob's own JobSet (None: it has none):
    its pods wear the JobSet's name and uid (the JobSet controller labels every pod so)."""

    def check(namespace: str, name: str, pod: Obj) -> bool:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        uid = jobset_uid(namespace, name)
        return (
            isinstance(uid, str)
            and labels.get(JOBSET_NAME_LABEL) == name
            and labels.get(JOBSET_UID_LABEL) == uid
        )

    return check
