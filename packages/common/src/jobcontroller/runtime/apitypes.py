"""What the API client speaks in: resources, their well-known constants, and API errors.

Split from :mod:`jobcontroller.runtime.kube` (which re-exports every name here) so the client
module holds only the client.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Self
from urllib.parse import quote

from msgspec import Struct

Obj = dict[str, Any]


class Resource(Struct, frozen=True):
    """One API resource: enough to build its URL and to fill in list items' apiVersion/kind."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def label(self) -> str:
        """Metric label: ``pods`` for the core group, ``tfjobs.kubeflow.org`` otherwise."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """URL path; a namespaced resource without ``namespace`` means all namespaces."""
        parts = [f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"]
        if namespace is not None:
            if not self.namespaced:
                raise ValueError(f"{self.kind} is cluster-scoped; no namespace allowed")
            parts += ["namespaces", quote(namespace, safe="")]
        parts.append(self.plural)
        if name is not None:
            parts.append(quote(name, safe=""))
        if subresource is not None:
            if name is None:
                raise ValueError("a subresource needs an object name")
            parts.append(subresource)
        return "/".join(parts)


PODS = Resource("", "v1", "Pod", "pods")
SERVICES = Resource("", "v1", "Service", "services")
CONFIGMAPS = Resource("", "v1", "ConfigMap", "configmaps")
SECRETS = Resource("", "v1", "Secret", "secrets")
EVENTS = Resource("", "v1", "Event", "events")
SERVICE_ACCOUNTS = Resource("", "v1", "ServiceAccount", "serviceaccounts")
NAMESPACES = Resource("", "v1", "Namespace", "namespaces", namespaced=False)
NODES = Resource("", "v1", "Node", "nodes", namespaced=False)
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")
JOBS = Resource("batch", "v1", "Job", "jobs")
HPAS = Resource("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers")
CRDS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "CustomResourceDefinition",
    "customresourcedefinitions",
    namespaced=False,
)


class ApiError(Exception):
    """An error response (or watch ERROR event) from the API server."""

    def __init__(
        self,
        *,
        status: int,
        reason: str = "",
        message: str = "",
        body: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}" if message else f"{status} {reason}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after

    @classmethod
    def from_status(cls, status_obj: Mapping[str, Any], *, http_status: int | None = None) -> Self:
        """Build from a ``Status`` object, e.g. the object of a watch ERROR event."""
        details = status_obj.get("details") or {}
        retry = details.get("retryAfterSeconds")
        return cls(
            status=int(status_obj.get("code") or http_status or 0),
            reason=str(status_obj.get("reason", "")),
            message=str(status_obj.get("message", "")),
            body=dict(status_obj),
            retry_after=float(retry) if retry else None,
        )

    @classmethod
    def from_response(
        cls, *, status: int, data: bytes, headers: Mapping[str, str], reason: str = ""
    ) -> Self:
        try:
            payload = json.loads(data) if data else None
        except ValueError:
            payload = None
        if isinstance(payload, dict) and payload.get("kind") == "Status":
            err = cls.from_status(payload, http_status=status)
            err.status = status
        else:
            text = data[:500].decode("utf-8", "replace")
            err = cls(status=status, reason=reason, message=text)
        header_retry = _parse_retry_after(headers.get("Retry-After"))
        if header_retry is not None:
            err.retry_after = header_retry
        return err

    @property
    def is_not_found(self) -> bool:
        return self.status == 404

    @property
    def is_conflict(self) -> bool:
        """A stale resourceVersion or precondition (409 other than AlreadyExists)."""
        return self.status == 409 and self.reason != "AlreadyExists"

    @property
    def is_already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def is_gone(self) -> bool:
        return self.status == 410

    @property
    def is_too_large_resource_version(self) -> bool:
        """A LIST asked for a resourceVersion the (restarted) watch cache has not reached yet."""
        causes = (self.body or {}).get("details", {}).get("causes") or []
        if any(c.get("reason") == "ResourceVersionTooLarge" for c in causes):
            return True
        return self.status == 504 and "Too large resource version" in self.message


class WatchInactive(TimeoutError):
    """No line arrived on a watch stream within its inactivity timeout."""


class NotLeader(Exception):
    """A write refused on this side: the replica does not hold the Lease (any more)."""


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # the HTTP-date form is not used by the API server
