"""Training progress in ``status.trainerStatus``, for every kind that has it (Trainer v2.3.0's
TrainJob, and the v1 kinds as this project's extension): what a training pod reports and what
it needs to report it, as Trainer v2.3.0's TrainJobStatus feature defines it
(pkg/statusserver, pkg/runtime/framework/plugins/trainjobstatus). Pure: no I/O, no clock.

A pod POSTs ``{"trainerStatus": {...}}`` to the operator at
``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>/status`` (:meth:`ProgressTarget.path`)
with a projected service-account token whose audience names that job
(:meth:`ProgressTarget.audience`). This module:

- checks a report (:func:`parse_report`): the JSON shape and the CRD's bounds, with a message
  that names the field, so a typo fails loudly instead of being ignored;
- says whether it changes anything (:func:`same_progress`, :func:`is_stale`) and the status
  patch to write (:func:`status_patch`);
- gives a pod the env, the token volume and the CA (:func:`inject_pod_spec`,
  :func:`ca_configmap`), the same names for every kind, so one script reports from any.

The endpoint itself (TLS, authentication, rate bound) is
:mod:`jobcontroller.controller.progressserver`.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from msgspec import Struct

from jobcontroller.core.names import JOB_NAME_LABEL
from jobcontroller.core.types import Action, CreateObject, Observed, PatchObject

__all__ = [
    "CA_ANNOTATION",
    "CA_CERT_KEY",
    "ENV_CA_CERT",
    "ENV_SERVER_URL",
    "ENV_TOKEN",
    "MAX_BODY_BYTES",
    "MOUNT_PATH",
    "PROGRESS",
    "TOKEN_EXPIRY_SECONDS",
    "TOKEN_VOLUME",
    "ProgressEndpoint",
    "ProgressTarget",
    "ReportError",
    "ca_configmap",
    "ca_configmap_action",
    "ca_configmap_name",
    "inject_pod_spec",
    "is_stale",
    "parse_report",
    "progress_env",
    "progress_mount",
    "progress_volume",
    "same_progress",
    "status_patch",
]

Obj = dict[str, Any]

CA_ANNOTATION = "training.kubeflow.org/progress-ca"
"""A v1 job's pods carry the endpoint's CA in this annotation, and the downward API writes it
into the projected volume: no object per job to create, own and keep in line (a TrainJob's
pods mount upstream's ``<trainjob>-tls-config`` ConfigMap instead)."""

PROGRESS = "progress"
"""The key of :attr:`Observed.extra` holding the :class:`ProgressEndpoint` (None: not served,
or its certificate not loaded yet: the pods get no progress env)."""


class ProgressTarget(Struct, frozen=True):
    """The kind a report is about, as its URL and token audience name it."""

    group: str
    version: str
    plural: str
    kind: str

    def path(self, namespace: str, name: str) -> str:
        """The endpoint's path for one job (upstream's ``StatusUrl`` for a TrainJob)."""
        return (
            f"/apis/{self.group}/{self.version}/namespaces/{namespace}/{self.plural}/{name}/status"
        )

    def audience(self, namespace: str, name: str) -> str:
        """The audience a reporting pod's token must carry (upstream's ``TokenAudience``): a
        token minted for one job is worth nothing at another's endpoint."""
        return f"{self.group}/{self.version}/namespaces/{namespace}/{self.plural}/{name}/status"


class ProgressEndpoint(Struct, frozen=True):
    """What a planner needs of the endpoint (:attr:`Observed.extra`'s :data:`PROGRESS`)."""

    url: str
    """The base URL the pods reach the operator at."""
    ca_pem: str


def ca_configmap_name(job_name: str) -> str:
    """Upstream's ``<trainjob>-tls-config`` (a TrainJob's; the v1 kinds' pods carry the CA in
    :data:`CA_ANNOTATION`)."""
    return f"{job_name}-tls-config"


MAX_BODY_BYTES = 1 << 16
"""64 KiB, upstream's ``maxBodySize``: 256 metrics of 64-character names and values fit."""
ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MOUNT_PATH = "/var/run/secrets/kubeflow/trainer"
TOKEN_FILE = "token"
CA_CERT_KEY = "ca.crt"
TOKEN_VOLUME = "kubeflow-trainer-token"
TOKEN_EXPIRY_SECONDS = 3600
"""The kubelet refreshes a projected token at 80% of its life; a reporter re-reads the file."""

_INT32_MAX = 2**31 - 1
_MAX_METRICS = 256
_MAX_METRIC_CHARS = 64
_FIELDS = ("progressPercentage", "estimatedRemainingSeconds", "metrics", "lastUpdatedTime")


class ReportError(Exception):
    """A refused report: the HTTP status, the ``metav1.Status`` reason and what was wrong."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message


def _invalid(message: str) -> ReportError:
    return ReportError(422, "Invalid", message)


def _int_field(status: Obj, key: str, *, high: int) -> int | None:
    value = status.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(f"trainerStatus.{key} must be an integer, got {json.dumps(value)}")
    if not 0 <= value <= high:
        raise _invalid(f"trainerStatus.{key} must be between 0 and {high}, got {value}")
    return value


def _metrics(value: Any) -> list[Obj] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise _invalid("trainerStatus.metrics must be a list of {name, value}")
    if len(value) > _MAX_METRICS:
        raise _invalid(f"trainerStatus.metrics has {len(value)} items, at most 256 are allowed")
    out: list[Obj] = []
    for i, item in enumerate(value):
        where = f"trainerStatus.metrics[{i}]"
        if not isinstance(item, dict) or set(item) - {"name", "value"}:
            raise _invalid(f"{where} must be an object with only name and value")
        for key in ("name", "value"):
            text = item.get(key)
            if not isinstance(text, str):
                raise _invalid(f"{where}.{key} must be a string, got {json.dumps(text)}")
            if not 1 <= len(text) <= _MAX_METRIC_CHARS:
                raise _invalid(f"{where}.{key} must be 1 to 64 characters, got {len(text)}")
        out.append({"name": item["name"], "value": item["value"]})
    return out


def _time(value: Any, now: dt.datetime) -> str:
    if value is None:
        return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if not isinstance(value, str):
        raise _invalid("trainerStatus.lastUpdatedTime must be an RFC 3339 time string")
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid(
            f"trainerStatus.lastUpdatedTime is not an RFC 3339 time: {value!r}"
        ) from None
    if when.tzinfo is None:
        raise _invalid("trainerStatus.lastUpdatedTime needs a time zone (Z or an offset)")
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_report(body: bytes, *, now: dt.datetime) -> Obj | None:
    """The ``trainerStatus`` a report asks to store (camelCase, as the CRD has it), None when
    it carries none (upstream answers such a report 200 and writes nothing).

    Unknown fields are refused where upstream's decoder drops them: a report of
    ``{"progressPercentage": 50}`` (not wrapped in ``trainerStatus``) would otherwise succeed
    and store nothing. ``lastUpdatedTime`` defaults to ``now`` (upstream's CRD refuses a
    trainerStatus without it; its SDK always sends it)."""
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise _invalid(f"the body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise _invalid('the body must be a JSON object: {"trainerStatus": {...}}')
    unknown = sorted(set(doc) - {"trainerStatus"})
    if unknown:
        hint = ' (wrap them: {"trainerStatus": {...}})' if set(unknown) & set(_FIELDS) else ""
        raise _invalid(f"unknown field(s) {', '.join(unknown)}{hint}")
    status = doc.get("trainerStatus")
    if status is None:
        return None
    if not isinstance(status, dict):
        raise _invalid("trainerStatus must be an object")
    unknown = sorted(set(status) - set(_FIELDS))
    if unknown:
        raise _invalid(
            f"unknown field(s) in trainerStatus: {', '.join(unknown)} (known: {', '.join(_FIELDS)})"
        )
    out: Obj = {}
    percent = _int_field(status, "progressPercentage", high=100)
    if percent is not None:
        out["progressPercentage"] = percent
    remaining = _int_field(status, "estimatedRemainingSeconds", high=_INT32_MAX)
    if remaining is not None:
        out["estimatedRemainingSeconds"] = remaining
    metrics = _metrics(status.get("metrics"))
    if metrics is not None:
        out["metrics"] = metrics
    out["lastUpdatedTime"] = _time(status.get("lastUpdatedTime"), now)
    return out


def same_progress(have: Obj | None, want: Obj) -> bool:
    """Whether storing ``want`` would change nothing but the time: such a report is not
    written (a trainer repeating itself costs no API write)."""
    if not isinstance(have, dict):
        return False
    keys = ("progressPercentage", "estimatedRemainingSeconds", "metrics")
    return all(have.get(k) == want.get(k) for k in keys)


def _when(value: Any) -> dt.datetime | None:
    if not isinstance(value, str):
        return None
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo is not None else None


def is_stale(have: Obj | None, want: Obj) -> bool:
    """Whether the stored trainerStatus is newer than ``want``: a report another replica
    wrote meanwhile (each replica bounds its own writes; a held-back report must not undo a
    later one)."""
    if not isinstance(have, dict):
        return False
    stored, wanted = _when(have.get("lastUpdatedTime")), _when(want.get("lastUpdatedTime"))
    return stored is not None and wanted is not None and stored > wanted


def status_patch(trainer_status: Obj) -> Obj:
    """A merge patch of the status subresource that makes ``trainerStatus`` exactly
    ``trainer_status``: a field the last report left out is removed, as upstream's
    server-side apply under one field manager removes it."""
    return {"status": {"trainerStatus": {k: trainer_status.get(k) for k in _FIELDS}}}


def progress_env(url: str) -> list[Obj]:
    """Upstream's three env names: the job's URL, the CA's and the token's paths."""
    return [
        {"name": ENV_SERVER_URL, "value": url},
        {"name": ENV_CA_CERT, "value": f"{MOUNT_PATH}/{CA_CERT_KEY}"},
        {"name": ENV_TOKEN, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
    ]


def progress_mount() -> Obj:
    return {"name": TOKEN_VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}


def progress_volume(*, audience: str, configmap: str | None) -> Obj:
    """The projected volume of the token (bound to the pod, for ``audience``) and the CA: from
    ``configmap``, or with None from the pod's :data:`CA_ANNOTATION` (the downward API)."""
    ca: Obj = (
        {"configMap": {"name": configmap, "items": [{"key": CA_CERT_KEY, "path": CA_CERT_KEY}]}}
        if configmap is not None
        else {
            "downwardAPI": {
                "items": [
                    {
                        "path": CA_CERT_KEY,
                        "fieldRef": {"fieldPath": f"metadata.annotations['{CA_ANNOTATION}']"},
                    }
                ]
            }
        }
    )
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": audience,
                        "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                        "path": TOKEN_FILE,
                    }
                },
                ca,
            ]
        },
    }


def _upsert(items: list[Obj], new: list[Obj], key: str) -> None:
    """Replace the items of ``items`` sharing ``new``'s ``key`` values, append the others."""
    for item in new:
        at = next((i for i, old in enumerate(items) if old.get(key) == item.get(key)), None)
        if at is None:
            items.append(item)
        else:
            items[at] = item


def inject_pod_spec(
    pod_spec: Obj, *, target: ProgressTarget, namespace: str, name: str, base_url: str
) -> None:
    """Give every container of ``pod_spec`` the job's URL and the paths of the token and CA,
    and the pod the projected volume holding both, the CA read from the pod's
    :data:`CA_ANNOTATION`. ``serviceAccountName: default`` where the template names none, as
    the ServiceAccount admission plugin would: the API server refuses a projected token in a
    pod without one where that plugin is off, and everywhere else the stored pod is the same."""
    env = progress_env(base_url.rstrip("/") + target.path(namespace, name))
    for container in pod_spec.get("containers") or ():
        if not isinstance(container, dict):
            continue
        _upsert(container.setdefault("env", []), [dict(e) for e in env], "name")
        _upsert(container.setdefault("volumeMounts", []), [progress_mount()], "mountPath")
    volume = progress_volume(audience=target.audience(namespace, name), configmap=None)
    _upsert(pod_spec.setdefault("volumes", []), [volume], "name")
    if not pod_spec.get("serviceAccountName") and not pod_spec.get("serviceAccount"):
        pod_spec["serviceAccountName"] = "default"


def ca_configmap(*, name: str, namespace: str, owner: Obj, ca_pem: str) -> Obj:
    """A TrainJob's ConfigMap of the endpoint's CA in its namespace (pods mount only their own
    namespace's), owned by the job (``owner``: its ownerReference)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ca_configmap_name(name),
            "namespace": namespace,
            "labels": {JOB_NAME_LABEL: name},
            "ownerReferences": [owner],
        },
        "data": {CA_CERT_KEY: ca_pem},
    }


def ca_configmap_action(want: Obj, observed: Observed) -> Action | None:
    """Create the CA ConfigMap ``want``, or bring its CA in line (a new certificate); None if
    it is, or if the name is someone else's (the pods mount it as it is)."""
    meta = want["metadata"]
    name = meta["name"]
    have = next(
        (c for c in observed.owned.get("ConfigMap", ()) if c["metadata"].get("name") == name),
        None,
    )
    if have is None:
        if observed.lookup("ConfigMap", name) is not None:
            return None
        return CreateObject(kind="ConfigMap", body=want)
    if (have.get("data") or {}) == want["data"]:
        return None
    return PatchObject(
        kind="ConfigMap",
        namespace=str(meta.get("namespace") or ""),
        name=name,
        patch={"data": want["data"]},
    )


def inject_planned(
    actions: list[Action],
    *,
    target: ProgressTarget,
    namespace: str,
    name: str,
    base_url: str,
    ca_pem: str,
) -> None:
    """Give the pods a v1 job's plan creates, and the pods of the batch Jobs it creates (MPI's
    launcher), what they need to report (:func:`inject_pod_spec`), the CA in their
    :data:`CA_ANNOTATION`."""
    for action in actions:
        if not isinstance(action, CreateObject):
            continue
        pod: Any = action.body
        if action.kind == "Job":
            pod = (pod.get("spec") or {}).get("template") or {}
        elif action.kind != "Pod":
            continue
        spec = pod.get("spec") if isinstance(pod, dict) else None
        if isinstance(spec, dict):
            inject_pod_spec(spec, target=target, namespace=namespace, name=name, base_url=base_url)
            annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[CA_ANNOTATION] = ca_pem
