"""Names, labels, owner references and expectation keys of the objects a job owns.

These strings are an external contract: users select pods by these labels, the anchor's tools
read them, and a restarted operator must recognise the objects its predecessor created.
"""

from __future__ import annotations

from typing import Any

from jobcontroller.api.common import JobModel, JobStatus
from jobcontroller.api.validation import replica_pod_name

__all__ = [
    "JOB_NAME_LABEL",
    "JOB_ROLE_LABEL",
    "JOB_ROLE_MASTER",
    "MANAGED_BY_SELF",
    "OPERATOR_NAME_LABEL",
    "REPLICA_INDEX_LABEL",
    "REPLICA_TYPE_LABEL",
    "RESTARTED_PODS_ANNOTATION",
    "RESTART_COUNT_ANNOTATION",
    "TOLERATED_RULES_ANNOTATION",
    "controller_uid",
    "expectation_key",
    "is_controlled_by",
    "owner_reference",
    "replica_labels",
    "replica_name",
    "replica_selector",
    "set_replica_selectors",
]

_PREFIX = "training.kubeflow.org/"
OPERATOR_NAME_LABEL = _PREFIX + "operator-name"
JOB_NAME_LABEL = _PREFIX + "job-name"
REPLICA_TYPE_LABEL = _PREFIX + "replica-type"
REPLICA_INDEX_LABEL = _PREFIX + "replica-index"
JOB_ROLE_LABEL = _PREFIX + "job-role"
JOB_ROLE_MASTER = "master"

#: Job annotations that keep the backoff ledger (see core/restart.py).
RESTART_COUNT_ANNOTATION = _PREFIX + "restart-count"
RESTARTED_PODS_ANNOTATION = _PREFIX + "restarted-pods"
#: Which broken rules a job stored before the swap was warned about (a digest of them).
TOLERATED_RULES_ANNOTATION = _PREFIX + "tolerated-rules"

#: ``runPolicy.managedBy`` value meaning "this operator"; an absent value means the same.
MANAGED_BY_SELF = "kubeflow.org/training-operator"


def replica_name(*, job_name: str, rtype: str, index: int) -> str:
    """``<job>-<lower(rtype)>-<index>``: the name of a replica's pod and of its Service."""
    return replica_pod_name(job_name=job_name, replica_type=rtype, index=index)


def replica_labels(
    *, controller_name: str, job_name: str, rtype: str, index: int
) -> dict[str, str]:
    """The four labels that identify one replica; also the Service selector."""
    return {
        OPERATOR_NAME_LABEL: controller_name,
        JOB_NAME_LABEL: job_name,
        REPLICA_TYPE_LABEL: rtype.lower(),
        REPLICA_INDEX_LABEL: str(index),
    }


def owner_reference(job: JobModel[Any]) -> dict[str, Any]:
    """The controller reference every owned object carries (garbage collection, adoption)."""
    return {
        "apiVersion": job.api_version,
        "kind": job.kind,
        "name": job.name,
        "uid": job.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def controller_uid(obj: dict[str, Any]) -> str | None:
    """The UID of the object's controller, if it has one."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    for ref in refs:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid", ""))
    return None


def is_controlled_by(obj: dict[str, Any], *, uid: str) -> bool:
    return bool(uid) and controller_uid(obj) == uid


def expectation_key(*, job_key: str, rtype: str, plural: str) -> str:
    """``<ns>/<job>/<lower rtype>/<plural>``, the anchor's expectation key."""
    return f"{job_key}/{rtype.lower()}/{plural}"


def replica_selector(*, controller_name: str, job_name: str, rtype: str) -> str:
    """The pods of one replica type as a label-selector string (metav1.FormatLabelSelector:
    keys sorted): what a scale subresource hands an HPA to find the pods it measures."""
    labels = {
        OPERATOR_NAME_LABEL: controller_name,
        JOB_NAME_LABEL: job_name,
        REPLICA_TYPE_LABEL: rtype.lower(),
    }
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


def set_replica_selectors(status: JobStatus, *, controller_name: str, job_name: str) -> None:
    """Fill every replica status's ``selector`` (for kinds with a scale subresource, as v1.9's
    PyTorchJob, PaddleJob and JAXJob controllers do in UpdateJobStatus)."""
    for rtype, replica_status in status.replica_statuses.items():
        replica_status.selector = replica_selector(
            controller_name=controller_name, job_name=job_name, rtype=rtype
        )
