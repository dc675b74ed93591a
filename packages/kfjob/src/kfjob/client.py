"""``JobClient``: submit, follow and explain Kubeflow training jobs from Python.

Built on the synchronous ``kubernetes`` client, with the operators' own pydantic models as the
job types. Names and behaviour follow kubeflow-training's ``TrainingClient`` where they overlap
(docs/sdk.md has the mapping): ``create``, ``get``, ``list``, ``wait_for_conditions``,
``get_pods``, ``get_logs``, ``delete``; plus ``suspend``, ``resume``, ``events`` and the offline
``render``. Objects other than jobs (pods, events) are plain JSON dicts, as the API serves them.
"""

from __future__ import annotations

import builtins
import datetime as dt
import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

from jobcontroller.api import JobModel
from kfjob.kinds import KINDS, JobKind, kind_for, kind_of_document
from kfjob.render import Rendered, load_documents, render_job

__all__ = [
    "TERMINAL_CONDITIONS",
    "ApiFailure",
    "JobClient",
    "JobFailedError",
    "NoCluster",
    "Progress",
    "job_state",
]

Obj = dict[str, Any]
TERMINAL_CONDITIONS = frozenset({"Succeeded", "Failed"})
JOB_CONDITIONS = frozenset({"Created", "Running", "Restarting", "Succeeded", "Failed", "Suspended"})
LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"
_SA_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class ApiFailure(RuntimeError):
    """The API server refused a call; ``status`` is its HTTP status, ``message`` its words."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class NoCluster(RuntimeError):
    """No kubeconfig to read, and not inside a pod: there is no cluster to talk to."""


class JobFailedError(RuntimeError):
    """``wait_for_conditions`` saw the job fail while waiting for something else."""

    def __init__(self, job: JobModel[Any]) -> None:
        cond = job.status.condition("Failed")
        reason = (cond.reason or "") if cond else ""
        message = (cond.message or "") if cond else ""
        super().__init__(f"{job.kind} {job.namespace}/{job.name} failed: {reason}: {message}")
        self.job = job
        self.reason = reason
        self.message = message


def _failure(exc: ApiException) -> ApiFailure:
    body = exc.body
    message = str(exc.reason or "")
    if isinstance(body, bytes | str):
        try:
            decoded = json.loads(body)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("message"):
            message = str(decoded["message"])
    return ApiFailure(int(exc.status or 0), message)


def _raw(response: object) -> urllib3.BaseHTTPResponse:
    """A ``_preload_content=False`` call's answer (the generated client's annotations name
    the decoded type)."""
    if not isinstance(response, urllib3.BaseHTTPResponse):
        raise ApiFailure(0, f"expected a raw HTTP response, got {type(response).__name__}")
    return response


def _json(response: object) -> Obj:
    """The JSON object of a raw (``_preload_content=False``) response."""
    data = json.loads(_raw(response).data)
    if not isinstance(data, dict):
        raise ApiFailure(0, f"expected a JSON object, got {type(data).__name__}")
    return data


def job_state(job: JobModel[Any]) -> str:
    """The job's state as kubectl's STATE column shows it: its last True condition
    (Created, Running, Restarting, Succeeded, Failed, Suspended), ``Pending`` before any."""
    for cond in reversed(job.status.conditions):
        if cond.status == "True":
            return cond.type
    return "Pending"


@dataclass(frozen=True, slots=True)
class Progress:
    """What ``wait_for_conditions`` passes to its callback after each look at the job."""

    job: JobModel[Any]
    state: str
    elapsed: float
    """Seconds since the wait began."""


class JobClient:
    """A client for Kubeflow training jobs (see the module docstring).

    ``config_file``/``context``: a kubeconfig and context (default: ``$KUBECONFIG`` or
    ``~/.kube/config``, else the pod's service account when run in a cluster).
    ``namespace``: the default namespace (default: the context's, else ``default``).
    ``job_kind``: the default kind for calls that name a job (``PyTorchJob`` as in
    ``TrainingClient``).
    """

    def __init__(
        self,
        config_file: str | None = None,
        context: str | None = None,
        client_configuration: k8s.Configuration | None = None,
        namespace: str | None = None,
        job_kind: str = "PyTorchJob",
    ) -> None:
        self.job_kind = kind_for(job_kind)
        self.namespace = namespace or "default"
        if client_configuration is not None:
            api = k8s.ApiClient(client_configuration)
        else:
            path = config_file or os.environ.get("KUBECONFIG") or None
            in_cluster = path is None and not Path("~/.kube/config").expanduser().exists()
            if in_cluster and _SA_NAMESPACE.exists():
                k8s_config.load_incluster_config()
                api = k8s.ApiClient()
                if namespace is None:
                    self.namespace = _SA_NAMESPACE.read_text().strip() or "default"
                self._init_apis(api)
                return
            try:
                api = k8s_config.new_client_from_config(config_file=path, context=context)
            except k8s_config.ConfigException as exc:
                where = path or "~/.kube/config"
                raise NoCluster(
                    f"no cluster to talk to: {where}: {exc} (give --kubeconfig or set "
                    f"KUBECONFIG; `kfjob render` needs no cluster)"
                ) from exc
            if namespace is None:
                self.namespace = _context_namespace(path, context) or "default"
        self._init_apis(api)

    def _init_apis(self, api: k8s.ApiClient) -> None:
        self.api_client = api
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)

    # ------------------------------------------------------------------ jobs

    def _kind(self, job_kind: str | JobKind | None) -> JobKind:
        if isinstance(job_kind, JobKind):
            return job_kind
        return kind_for(job_kind) if job_kind else self.job_kind

    def create(
        self, job: Mapping[str, Any] | JobModel[Any] | str, namespace: str | None = None
    ) -> JobModel[Any]:
        """Create a job from a manifest (a dict, a model, or YAML text with one job)."""
        if isinstance(job, str):
            docs = load_documents(job)
            if len(docs) != 1:
                raise ValueError(f"expected one job, got {len(docs)} documents")
            body: Obj = docs[0]
        elif isinstance(job, JobModel):
            body = job.to_dict()
            body.pop("status", None)
        else:
            body = dict(job)
        kind = kind_of_document(body)
        ns = namespace or str((body.get("metadata") or {}).get("namespace") or self.namespace)
        try:
            created = _json(
                self.custom.create_namespaced_custom_object(
                    kind.group, kind.version, ns, kind.plural, body, _preload_content=False
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        return kind.model.parse(created)

    def get_raw(self, name: str, namespace: str | None = None, job_kind: str | None = None) -> Obj:
        kind = self._kind(job_kind)
        try:
            return _json(
                self.custom.get_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace or self.namespace,
                    kind.plural,
                    name,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    def get(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> JobModel[Any]:
        """The job, as its operator's model (``TFJob``, ``PyTorchJob``...)."""
        kind = self._kind(job_kind)
        return kind.model.parse(self.get_raw(name, namespace, kind.kind))

    def list(
        self,
        namespace: str | None = None,
        job_kind: str | None = None,
        *,
        all_kinds: bool = False,
        all_namespaces: bool = False,
    ) -> builtins.list[JobModel[Any]]:
        """Jobs of one kind (or every kind whose CRD is installed), oldest first."""
        kinds = KINDS if all_kinds else (self._kind(job_kind),)
        out: builtins.list[JobModel[Any]] = []
        for kind in kinds:
            try:
                if all_namespaces:
                    resp = self.custom.list_cluster_custom_object(
                        kind.group, kind.version, kind.plural, _preload_content=False
                    )
                else:
                    resp = self.custom.list_namespaced_custom_object(
                        kind.group,
                        kind.version,
                        namespace or self.namespace,
                        kind.plural,
                        _preload_content=False,
                    )
            except ApiException as exc:
                if exc.status == 404 and all_kinds:
                    continue  # that kind's CRD is not installed
                raise _failure(exc) from exc
            items = _json(resp).get("items") or []
            out += [kind.model.parse(item) for item in items if isinstance(item, dict)]
        out.sort(key=lambda j: (str(j.metadata.get("creationTimestamp") or ""), j.kind, j.name))
        return out

    def delete(self, name: str, namespace: str | None = None, job_kind: str | None = None) -> None:
        """Delete the job; its pods and services go with it (garbage collection)."""
        kind = self._kind(job_kind)
        try:
            self.custom.delete_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace or self.namespace,
                kind.plural,
                name,
                body=k8s.V1DeleteOptions(propagation_policy="Background"),
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    def _patch(self, name: str, namespace: str | None, job_kind: str | None, patch: Obj) -> Obj:
        kind = self._kind(job_kind)
        try:
            return _json(
                self.custom.patch_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace or self.namespace,
                    kind.plural,
                    name,
                    patch,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    def suspend(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> JobModel[Any]:
        """Set ``runPolicy.suspend``: the operator deletes the job's pods and creates none."""
        kind = self._kind(job_kind)
        raw = self._patch(name, namespace, kind.kind, {"spec": {"runPolicy": {"suspend": True}}})
        return kind.model.parse(raw)

    def resume(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> JobModel[Any]:
        """Clear ``runPolicy.suspend``: the operator creates the pods again."""
        kind = self._kind(job_kind)
        raw = self._patch(name, namespace, kind.kind, {"spec": {"runPolicy": {"suspend": False}}})
        return kind.model.parse(raw)

    # ------------------------------------------------------------------ conditions

    def get_conditions(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> builtins.list[str]:
        """Types of the job's True conditions, in the order the operator set them."""
        job = self.get(name, namespace, job_kind)
        return [c.type for c in job.status.conditions if c.status == "True"]

    def is_succeeded(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> bool:
        return "Succeeded" in self.get_conditions(name, namespace, job_kind)

    def is_failed(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> bool:
        return "Failed" in self.get_conditions(name, namespace, job_kind)

    def wait_for_conditions(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        expected_conditions: frozenset[str] | set[str] = frozenset({"Succeeded"}),
        timeout: float = 600,
        polling_interval: float = 2,
        callback: Callable[[Progress], None] | None = None,
    ) -> JobModel[Any]:
        """Wait until the job has one of ``expected_conditions`` True; returns the job.

        Raises :class:`JobFailedError` if it fails first (unless ``Failed`` is expected) and
        ``TimeoutError`` after ``timeout`` seconds. ``callback`` gets a :class:`Progress`
        after every look (every ``polling_interval`` seconds).
        """
        unknown = set(expected_conditions) - JOB_CONDITIONS
        if unknown:
            raise ValueError(
                f"unknown conditions {sorted(unknown)}; choose from {sorted(JOB_CONDITIONS)}"
            )
        start = time.monotonic()
        while True:
            job = self.get(name, namespace, job_kind)
            true = {c.type for c in job.status.conditions if c.status == "True"}
            if callback is not None:
                callback(Progress(job=job, state=job_state(job), elapsed=time.monotonic() - start))
            if true & set(expected_conditions):
                return job
            if "Failed" in true:
                raise JobFailedError(job)
            if time.monotonic() - start >= timeout:
                raise TimeoutError(
                    f"{job.kind} {job.namespace}/{name} did not reach "
                    f"{' or '.join(sorted(expected_conditions))} within {timeout:g}s "
                    f"(state: {job_state(job)})"
                )
            time.sleep(polling_interval)

    # ------------------------------------------------------------------ pods, logs, events

    def get_pods(
        self,
        name: str,
        namespace: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> builtins.list[Obj]:
        """The job's pods, master first, then by replica type and index."""
        selector = [f"{LABEL_JOB_NAME}={name}"]
        if is_master:
            selector.append(f"{LABEL_JOB_ROLE}=master")
        if replica_type:
            selector.append(f"{LABEL_REPLICA_TYPE}={replica_type.lower()}")
        if replica_index is not None:
            selector.append(f"{LABEL_REPLICA_INDEX}={replica_index}")
        try:
            resp = self.core.list_namespaced_pod(
                namespace or self.namespace,
                label_selector=",".join(selector),
                _preload_content=False,
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        pods = [p for p in _json(resp).get("items") or [] if isinstance(p, dict)]
        return sorted(pods, key=pod_order)

    def get_pod_names(
        self,
        name: str,
        namespace: str | None = None,
        is_master: bool = False,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> builtins.list[str]:
        pods = self.get_pods(name, namespace, is_master, replica_type, replica_index)
        return [str(p["metadata"]["name"]) for p in pods]

    def log_pod(
        self,
        name: str,
        namespace: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
    ) -> Obj | None:
        """The pod whose logs ``get_logs`` shows: the given replica's, else the master's
        (``job-role=master``), else the first pod."""
        if replica_type is not None:
            pods = self.get_pods(
                name, namespace, replica_type=replica_type, replica_index=replica_index or 0
            )
        else:
            pods = self.get_pods(name, namespace, is_master=True) or self.get_pods(name, namespace)
        return pods[0] if pods else None

    def get_logs(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
        container: str | None = None,
    ) -> dict[str, str]:
        """The log of the master pod (or of the given replica), as ``{pod name: text}``."""
        ns = namespace or self.namespace
        pod = self.log_pod(name, ns, replica_type, replica_index)
        if pod is None:
            return {}
        pod_name = str(pod["metadata"]["name"])
        try:
            text = self.core.read_namespaced_pod_log(
                pod_name, ns, container=container or self._container(pod, job_kind)
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        return {pod_name: str(text)}

    def follow_logs(
        self,
        name: str,
        namespace: str | None = None,
        job_kind: str | None = None,
        replica_type: str | None = None,
        replica_index: int | None = None,
        container: str | None = None,
        poll: float = 1.0,
    ) -> Iterator[str]:
        """Lines of the master's (or the given replica's) log as they come, across restarts:
        when a stream ends while the job still runs, it waits for the pod's next container
        (a restart, or the pod recreated under the same name) and goes on with a marker line.
        Ends when the job has finished and the last stream has ended."""
        ns = namespace or self.namespace
        kind = self._kind(job_kind)
        seen: tuple[str, int] | None = None
        while True:
            pod = self.log_pod(name, ns, replica_type, replica_index)
            state = _container_run(pod, container or self._container(pod, kind.kind))
            if pod is not None and state is not None and state != seen:
                if seen is not None:
                    yield f"--- {pod['metadata']['name']} restarted (restart {state[1]}) ---"
                seen = state
                yield from self._stream(pod, ns, container or self._container(pod, kind.kind))
                continue
            job = self.get(name, ns, kind.kind)
            if job.status.is_finished():
                return
            time.sleep(poll)

    def _stream(self, pod: Obj, namespace: str, container: str | None) -> Iterator[str]:
        try:
            resp = _raw(
                self.core.read_namespaced_pod_log(
                    pod["metadata"]["name"],
                    namespace,
                    container=container,
                    follow=True,
                    _preload_content=False,
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        buffer = b""
        try:
            for chunk in resp.stream(4096):
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    yield line.decode(errors="replace")
            if buffer:
                yield buffer.decode(errors="replace")
        finally:
            resp.release_conn()

    def _container(self, pod: Obj | None, job_kind: str | None) -> str | None:
        """The framework's container (``pytorch``...), or the pod's first."""
        containers = [
            c.get("name") for c in ((pod or {}).get("spec") or {}).get("containers") or ()
        ]
        default = self._kind(job_kind).model.DEFAULT_CONTAINER_NAME
        if default in containers:
            return default
        return str(containers[0]) if containers else None

    def events(
        self, name: str, namespace: str | None = None, job_kind: str | None = None
    ) -> builtins.list[Obj]:
        """Events about the job and its pods, oldest first."""
        ns = namespace or self.namespace
        pods = {str(p["metadata"]["name"]) for p in self.get_pods(name, ns)}
        kind = self._kind(job_kind).kind
        try:
            resp = self.core.list_namespaced_event(ns, _preload_content=False)
        except ApiException as exc:
            raise _failure(exc) from exc
        out = []
        for event in _json(resp).get("items") or []:
            obj = event.get("involvedObject") or {}
            if (obj.get("kind") == kind and obj.get("name") == name) or (
                obj.get("kind") == "Pod" and obj.get("name") in pods
            ):
                out.append(event)
        out.sort(key=_event_time)
        return out

    # ------------------------------------------------------------------ offline

    @staticmethod
    def render(
        job: Mapping[str, Any] | JobModel[Any] | str,
        namespace: str = "default",
        operator_args: Sequence[str] = (),
    ) -> Rendered:
        """What the operator creates for ``job`` (offline: no cluster is contacted)."""
        if isinstance(job, str):
            docs = load_documents(job)
            if len(docs) != 1:
                raise ValueError(f"expected one job, got {len(docs)} documents")
            body: Obj = docs[0]
        elif isinstance(job, JobModel):
            body = job.to_dict()
        else:
            body = dict(job)
        return render_job(body, namespace=namespace, operator_args=operator_args)


def _context_namespace(path: str | None, context: str | None) -> str | None:
    try:
        contexts, current = k8s_config.list_kube_config_contexts(config_file=path)
    except Exception:  # no kubeconfig: the loader raised already had it mattered
        return None
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    ns = ((chosen or {}).get("context") or {}).get("namespace")
    return str(ns) if ns else None


def pod_order(pod: Obj) -> tuple[int, str, int, str]:
    """Master first, then by replica type and index (numerically)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    index = str(labels.get(LABEL_REPLICA_INDEX) or "")
    return (
        0 if labels.get(LABEL_JOB_ROLE) == "master" else 1,
        str(labels.get(LABEL_REPLICA_TYPE) or ""),
        int(index) if index.isdigit() else 1 << 30,
        str((pod.get("metadata") or {}).get("name") or ""),
    )


def _container_run(pod: Obj | None, container: str | None) -> tuple[str, int] | None:
    """(pod uid, restart count) of a container that has started (running or terminated)."""
    if pod is None:
        return None
    for status in (pod.get("status") or {}).get("containerStatuses") or ():
        if container is not None and status.get("name") != container:
            continue
        state = status.get("state") or {}
        if "running" in state or "terminated" in state:
            return str(pod["metadata"].get("uid")), int(status.get("restartCount") or 0)
    return None


def _event_time(event: Obj) -> dt.datetime:
    when = parse_time(
        event.get("lastTimestamp")
        or event.get("eventTime")
        or (event.get("metadata") or {}).get("creationTimestamp")
    )
    return when or dt.datetime.min.replace(tzinfo=dt.UTC)


def parse_time(value: object) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
