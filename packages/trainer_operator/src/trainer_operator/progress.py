"""Training progress in ``status.trainerStatus``: what the trainer's pods report and what they
need to report it, as Trainer v2.3.0's TrainJobStatus feature defines it (pkg/statusserver,
pkg/runtime/framework/plugins/trainjobstatus). Pure: no I/O and no clock reads.

A trainer pod POSTs ``{"trainerStatus": {...}}`` to the operator at
``/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status`` with a
projected service-account token whose audience names that TrainJob. This module:

- checks a report (:func:`parse_report`): the JSON shape and the CRD's bounds, with a message
  that names the field, so a typo fails loudly instead of being ignored;
- says whether it changes anything (:func:`same_progress`) and the status patch to write;
- gives the trainer's containers the env, the token volume and the CA
  (:func:`inject_progress`, :func:`ca_configmap`).

The endpoint itself (TLS, authentication, rate bound) is :mod:`trainer_operator.progressserver`.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from jobcontroller import LABEL_JOB_NAME, Action, CreateObject, Observed, PatchObject
from trainer_operator.builder import owner_reference
from trainer_operator.info import TRAINER, Info, by_mount_path, by_name, upsert

__all__ = [
    "CA_CERT_KEY",
    "ENV_CA_CERT",
    "ENV_SERVER_URL",
    "ENV_TOKEN",
    "MAX_BODY_BYTES",
    "MOUNT_PATH",
    "TOKEN_EXPIRY_SECONDS",
    "TOKEN_VOLUME",
    "ProgressEndpoint",
    "ReportError",
    "ca_configmap",
    "ca_configmap_action",
    "ca_configmap_name",
    "inject_progress",
    "is_stale",
    "parse_report",
    "same_progress",
    "status_patch",
    "status_path",
    "token_audience",
]

Obj = dict[str, Any]

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


def status_path(namespace: str, name: str) -> str:
    """The endpoint's path for one TrainJob (upstream's ``StatusUrl``)."""
    return f"/apis/trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def token_audience(namespace: str, name: str) -> str:
    """The audience a reporting pod's token must carry (upstream's ``TokenAudience``): a token
    minted for one TrainJob is worth nothing at another's endpoint."""
    return f"trainer.kubeflow.org/v1alpha1/namespaces/{namespace}/trainjobs/{name}/status"


def ca_configmap_name(trainjob_name: str) -> str:
    return f"{trainjob_name}-tls-config"


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


def _env(server_url: str) -> list[Obj]:
    return [
        {"name": ENV_SERVER_URL, "value": server_url},
        {"name": ENV_CA_CERT, "value": f"{MOUNT_PATH}/{CA_CERT_KEY}"},
        {"name": ENV_TOKEN, "value": f"{MOUNT_PATH}/{TOKEN_FILE}"},
    ]


def _volume(trainjob: Obj) -> Obj:
    meta = trainjob["metadata"]
    namespace, name = str(meta.get("namespace") or ""), str(meta["name"])
    return {
        "name": TOKEN_VOLUME,
        "projected": {
            "sources": [
                {
                    "serviceAccountToken": {
                        "audience": token_audience(namespace, name),
                        "expirationSeconds": TOKEN_EXPIRY_SECONDS,
                        "path": TOKEN_FILE,
                    }
                },
                {
                    "configMap": {
                        "name": ca_configmap_name(name),
                        "items": [{"key": CA_CERT_KEY, "path": CA_CERT_KEY}],
                    }
                },
            ]
        },
    }


def inject_progress(info: Info, trainjob: Obj, *, server_base_url: str) -> None:
    """Every container of the trainer's pods gets the endpoint's URL and the paths of the
    token and CA (upstream's three env names), and the pods the projected volume holding
    both, as upstream's TrainJobStatus plugin gives them."""
    ps = info.pod_set_of_ancestor(TRAINER)
    if ps is None:
        return
    meta = trainjob["metadata"]
    path = status_path(str(meta.get("namespace") or ""), str(meta["name"]))
    env = _env(server_base_url.rstrip("/") + path)
    mount = {"name": TOKEN_VOLUME, "mountPath": MOUNT_PATH, "readOnly": True}
    for container in ps.containers:
        upsert(container.env, env, by_name)
        upsert(container.volume_mounts, [mount], by_mount_path)
    upsert(ps.volumes, [_volume(trainjob)], by_name)
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
    """The ConfigMap of the endpoint's CA certificate in the TrainJob's namespace (pods mount
    only their own namespace's), owned by the TrainJob: upstream's ``<name>-tls-config``."""
    meta = trainjob["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": ca_configmap_name(str(meta["name"])),
            "namespace": meta.get("namespace"),
            "labels": {LABEL_JOB_NAME: meta["name"]},
            "ownerReferences": [owner_reference(trainjob)],
        },
        "data": {CA_CERT_KEY: ca_pem},
    }


@dataclass(frozen=True, slots=True)
class ProgressEndpoint:
    """What the planner needs of the endpoint (:attr:`Observed.extra`'s ``progress``)."""

    url: str
    """The base URL the pods reach the operator at."""
    ca_pem: str


def ca_configmap_action(trainjob: Obj, observed: Observed, *, ca_pem: str) -> Action | None:
    """Create the CA ConfigMap, or bring its CA in line (a new certificate); None if it is."""
    want = ca_configmap(trainjob, ca_pem=ca_pem)
    name = want["metadata"]["name"]
    have = next(
        (c for c in observed.owned.get("ConfigMap", ()) if c["metadata"].get("name") == name),
        None,
    )
    if have is None:
        if observed.lookup("ConfigMap", name) is not None:
            return None  # someone else's: the pods mount it as it is
        return CreateObject(kind="ConfigMap", body=want)
    if (have.get("data") or {}) == want["data"]:
        return None
    return PatchObject(
        kind="ConfigMap",
        namespace=str(trainjob["metadata"].get("namespace") or ""),
        name=name,
        patch={"data": want["data"]},
    )
