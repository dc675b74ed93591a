"""The cluster as ``kfjob ui`` sees it: with the user's kubeconfig, so with their RBAC.

Blocking calls on the synchronous ``kubernetes`` client (the UI's server runs a thread per
request). Which kinds are served is asked of the API (discovery), so a kind whose CRD is not
installed is left out and one installed later shows up; where the user may list each kind is
tried, not assumed: cluster-wide, else each namespace they can see (or the kubeconfig's).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from kfjob.client import ApiFailure, JobClient, _failure, _json, _raw
from kfjob.ui.model import CANDIDATES, ServedKind

__all__ = ["Cluster", "abort"]

Obj = dict[str, Any]

#: Connections kept for reuse: a watch per kind and scope, four per open job page, a log
#: stream per open log panel (past this many, a connection is opened and closed as needed).
POOL_SIZE = 64


def abort(response: urllib3.BaseHTTPResponse) -> None:
    """End a streaming response from another thread: shutting the socket down wakes the
    thread blocked reading it (closing alone does not)."""
    conn = getattr(response, "connection", None) or getattr(response, "_connection", None)
    sock = getattr(conn, "sock", None)
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):  # already broken: nothing more to release
        response.close()


class Cluster:
    """The API calls the pages make. ``namespace`` restricts the UI to that namespace."""

    def __init__(
        self, *, kubeconfig: str | None, context: str | None, namespace: str | None
    ) -> None:
        self.jobs = JobClient(config_file=kubeconfig, context=context, namespace=namespace)
        api = self.jobs.api_client
        api.configuration.connection_pool_maxsize = POOL_SIZE
        api.rest_client = k8s.rest.RESTClientObject(api.configuration)
        self.api = api
        self.custom = k8s.CustomObjectsApi(api)
        self.core = k8s.CoreV1Api(api)
        self.only_namespace = namespace
        self.default_namespace = self.jobs.namespace
        self.server = str(api.configuration.host)
        self.label = _label(kubeconfig, context, self.server)

    # ------------------------------------------------------------------ discovery, access

    def served_kinds(self) -> list[ServedKind]:
        """The candidate kinds whose resource the API serves now."""
        served: list[ServedKind] = []
        by_gv: dict[str, set[str] | None] = {}
        for kind in CANDIDATES:
            gv = kind.api_version
            if gv not in by_gv:
                by_gv[gv] = self._resources(gv)
            if kind.plural in (by_gv[gv] or ()):
                served.append(kind)
        return served

    def _resources(self, group_version: str) -> set[str] | None:
        try:
            resp = self.api.call_api(
                f"/apis/{group_version}",
                "GET",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
                _request_timeout=30,
            )
        except ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise _failure(exc) from exc
        return {str(r.get("name")) for r in _json(resp).get("resources") or []}

    def namespaces(self, kind: ServedKind) -> list[str]:
        """Where the user may list ``kind``: ``[""]`` for every namespace at once, else the
        namespaces (of those they can see, and the kubeconfig's) where listing works."""
        if self.only_namespace:
            return [self.only_namespace]
        if self._can_list(kind, ""):
            return [""]
        candidates = {self.default_namespace}
        try:
            resp = self.core.list_namespace(_preload_content=False, _request_timeout=30)
            candidates |= {str(n["metadata"]["name"]) for n in _json(resp).get("items") or []}
        except ApiException as exc:
            if exc.status != 403:
                raise _failure(exc) from exc
        return sorted(ns for ns in candidates if self._can_list(kind, ns))

    def _can_list(self, kind: ServedKind, namespace: str) -> bool:
        try:
            self._list(kind, namespace, limit=1)
        except ApiFailure as exc:
            if exc.status in (401, 403, 404):
                return False
            raise
        return True

    # ------------------------------------------------------------------ jobs

    def _list(self, kind: ServedKind, namespace: str, **kwargs: Any) -> Obj:
        try:
            if namespace:
                resp = self.custom.list_namespaced_custom_object(
                    kind.group,
                    kind.version,
                    namespace,
                    kind.plural,
                    _preload_content=False,
                    _request_timeout=60,
                    **kwargs,
                )
            else:
                resp = self.custom.list_cluster_custom_object(
                    kind.group,
                    kind.version,
                    kind.plural,
                    _preload_content=False,
                    _request_timeout=60,
                    **kwargs,
                )
        except ApiException as exc:
            raise _failure(exc) from exc
        return _json(resp)

    def list(
        self, path: str, *, label_selector: str = "", field_selector: str = ""
    ) -> tuple[list[Obj], str]:
        """The items at ``path`` (a collection's URL) and the list's resourceVersion."""
        query: list[tuple[str, Any]] = []
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            data = _json(
                self.api.call_api(
                    path,
                    "GET",
                    query_params=query,
                    header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=60,
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        items = [i for i in data.get("items") or [] if isinstance(i, dict)]
        return items, str((data.get("metadata") or {}).get("resourceVersion") or "")

    def watch(
        self,
        path: str,
        *,
        resource_version: str,
        label_selector: str = "",
        field_selector: str = "",
    ) -> urllib3.BaseHTTPResponse:
        """A watch stream from ``resource_version`` (a random server-side timeout, as
        client-go's reflector uses, so many watches do not all end at once)."""
        query: list[tuple[str, Any]] = [
            ("watch", "true"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", random.randint(240, 480)),
        ]
        if label_selector:
            query.append(("labelSelector", label_selector))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        try:
            return _raw(
                self.api.call_api(
                    path,
                    "GET",
                    query_params=query,
                    header_params={"Accept": "application/json"},
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=(30, 600),
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    @staticmethod
    def events_of(response: urllib3.BaseHTTPResponse) -> Iterator[Obj]:
        """The watch events of a stream, one JSON object a line."""
        buffer = b""
        for chunk in response.stream(65536, decode_content=True):
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.strip():
                    event = json.loads(line)
                    if isinstance(event, dict):
                        yield event

    def may(self, *, namespace: str, group: str, resource: str, verb: str) -> tuple[bool, str]:
        """Whether the user may ``verb`` the ``resource`` in ``namespace``, as the API server
        answers a SelfSubjectAccessReview (which every authenticated user may ask), and why
        not when it says why."""
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {
                "resourceAttributes": {
                    "namespace": namespace,
                    "group": group,
                    "resource": resource,
                    "verb": verb,
                }
            },
        }
        try:
            data = _json(
                self.api.call_api(
                    "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                    "POST",
                    body=body,
                    header_params={
                        "Accept": "application/json",
                        "Content-Type": "application/json",
                    },
                    auth_settings=["BearerToken"],
                    _preload_content=False,
                    _return_http_data_only=True,
                    _request_timeout=30,
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc
        status = data.get("status") or {}
        return status.get("allowed") is True, str(status.get("reason") or "")

    def set_suspend(self, kind: ServedKind, namespace: str, name: str, value: bool) -> None:
        try:
            self.custom.patch_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                name,
                kind.suspend_patch(value),
                _preload_content=False,
                _request_timeout=30,
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    def delete_job(self, kind: ServedKind, namespace: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                name,
                body=k8s.V1DeleteOptions(propagation_policy="Background"),
                _preload_content=False,
                _request_timeout=30,
            )
        except ApiException as exc:
            raise _failure(exc) from exc

    def open_log(
        self,
        namespace: str,
        pod: str,
        *,
        container: str | None,
        follow: bool,
        previous: bool,
        tail_lines: int,
    ) -> urllib3.BaseHTTPResponse:
        """A pod's log as a stream (no read timeout: a quiet container is not an error)."""
        try:
            return _raw(
                self.core.read_namespaced_pod_log(
                    pod,
                    namespace,
                    container=container or None,
                    follow=follow,
                    previous=previous,
                    tail_lines=tail_lines,
                    _preload_content=False,
                    _request_timeout=(30, None),
                )
            )
        except ApiException as exc:
            raise _failure(exc) from exc


def _label(kubeconfig: str | None, context: str | None, server: str) -> str:
    """``context · user`` for the page header (what the kubeconfig names; no API call)."""
    from kubernetes import config as k8s_config

    try:
        contexts, current = k8s_config.list_kube_config_contexts(
            config_file=kubeconfig or os.environ.get("KUBECONFIG") or None
        )
    except Exception:  # in a pod: no kubeconfig to name
        return f"in-cluster · {server}"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else current
    chosen = chosen or {}
    user = (chosen.get("context") or {}).get("user") or "?"
    return f"{chosen.get('name') or '?'} · {user}"
