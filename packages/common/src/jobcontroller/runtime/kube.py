"""Kubernetes API access with plain JSON dicts.

Objects travel as the dicts the API server sent, over one pool of HTTP/1.1 connections
(:mod:`jobcontroller.runtime.http1`): no generated client (its model classes are slow and
memory-hungry to build for every pod, and importing them alone cost 70 MB and 1.8 s of CPU).
Where the server is and how to authenticate comes from :mod:`jobcontroller.runtime.kubeconfig`.

Timeouts. Without a read timeout a half-open TCP connection could block forever. Every request
here has a connect timeout and a read timeout, counted as socket silence (:class:`ApiSettings`).
Watch streams get a socket read timeout a margin above the server-side ``timeoutSeconds`` and,
on top, an inactivity timeout between two lines (the server sends bookmarks about once a
minute, so silence means a dead stream). The server sends a watch's headers at once, so a watch
left unanswered fails after ``watch_answer_timeout``, not after minutes.

Retries. :meth:`KubeApi.request` retries a bounded number of times with jittered exponential
backoff, never sleeping less than the server's ``Retry-After``:

* 429 Too Many Requests, for every verb: the server (max-in-flight or priority-and-fairness)
  rejected the request before doing anything.
* 500, 502, 503, 504 and connection errors or read timeouts, only for verbs that are safe to
  repeat: GET, HEAD, PUT (carries ``metadata.resourceVersion``, so a repeat of an applied update
  is a 409 the caller handles), PATCH (merge patches are idempotent) and DELETE (a repeat of an
  applied delete is a 404, which the caller sees).
* POST (create) is retried on 429 and when no connection could be established
  (:class:`~jobcontroller.runtime.http1.ConnectFailed`): in both cases the server never
  processed it. A 5xx, a reset connection or a read timeout after the request was sent may
  hide a create that happened, and a blind repeat could duplicate a ``generateName`` object,
  so those are raised to the caller.

409 Conflict is never retried here: callers re-read and recompute instead of overwriting newer
state. Errors the server sent are raised as :class:`ApiError`; transport failures surface as
:class:`~jobcontroller.runtime.http1.HttpError` (a ``ConnectionError``) or ``TimeoutError``
after the retries are spent.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import ipaddress
import os
import re
import sys
import time
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, Literal, Self, overload
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

import structlog

from jobcontroller.runtime import codec
from jobcontroller.runtime.apitypes import (
    CONFIGMAPS,
    CRDS,
    EVENTS,
    HPAS,
    JOBS,
    LEASES,
    NAMESPACES,
    NODES,
    PODS,
    SECRETS,
    SERVICE_ACCOUNTS,
    SERVICES,
    ApiError,
    NotLeader,
    Resource,
    WatchInactive,
)
from jobcontroller.runtime.http1 import (
    ConnectFailed,
    Disconnected,
    HttpError,
    LineSilence,
    Pool,
    Response,
    Stream,
)
from jobcontroller.runtime.kubeconfig import ClusterConfig, load_config
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.projection import Projected
from jobcontroller.runtime.ratelimit import TokenBucket
from jobcontroller.runtime.retry import (
    ApiSettings,
    retry_delay,
    should_retry_exception,
    should_retry_status,
)

__all__ = [
    "CONFIGMAPS",
    "CRDS",
    "EVENTS",
    "HPAS",
    "JOBS",
    "LEASES",
    "METADATA_ONLY",
    "NAMESPACES",
    "NODES",
    "PODS",
    "SECRETS",
    "SERVICES",
    "SERVICE_ACCOUNTS",
    "ApiError",
    "ApiSettings",
    "ConnectFailed",
    "Disconnected",
    "HttpError",
    "KubeApi",
    "NotLeader",
    "Obj",
    "Resource",
    "WatchInactive",
    "path_resource_label",
    "retry_delay",
    "should_retry_exception",
    "should_retry_status",
]

log = structlog.get_logger(__name__)

_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Obj = dict[str, Any]
#: Module-level alias: inside KubeApi the name ``list`` is a method.
ObjList = list[Obj]
QueryValue = str | int | bool | None

#: ``Accept`` for an object's metadata only (as client-go's metadata client asks), falling back
#: to the whole object where a server cannot convert (:meth:`KubeApi.get_metadata`).
METADATA_ONLY = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"

#: Above this size a response is decoded in a worker thread, so a big LIST does not stall the
#: event loop (and with it lease renewals and other watches).
_THREAD_DECODE_BYTES = 1 << 20


#: One watch event is one line, and a pod of a large TFJob is a long one (its TF_CONFIG lists
#: every host). The API server takes at most 3 MiB per request
#: and etcd stores at most 1.5 MiB per object, so this bounds memory without refusing one.
_MAX_WATCH_LINE = 8 * 2**20


class _NoAnswer(Exception):
    """No status line and headers within a request's ``answer_within``."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no answer in {seconds:.0f}s")
        self.seconds = seconds


def path_resource_label(path: str) -> str:
    """Metric label for a URL path: ``pods``, ``tfjobs.kubeflow.org/status``..."""
    segs = [s for s in path.split("?", 1)[0].split("/") if s]
    if len(segs) >= 2 and segs[0] == "api":
        group, rest = "", segs[2:]
    elif len(segs) >= 3 and segs[0] == "apis":
        group, rest = segs[1], segs[3:]
    else:
        return "other"
    if len(rest) > 2 and rest[0] == "namespaces" and rest[2] not in ("status", "finalize"):
        rest = rest[2:]
    if not rest:
        return "discovery"
    label = f"{rest[0]}.{group}" if group else rest[0]
    return f"{label}/{rest[2]}" if len(rest) > 2 else label


def _encode_query(query: Mapping[str, QueryValue] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in (query or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        else:
            out[key] = str(value)
    return out


#: What a path segment may hold unescaped (RFC 3986 pchar, and "/" between segments).
_PATH_SAFE = "/:@!$&'()*+,;=-._~"
_PATH_UNSAFE = re.compile(r"[^A-Za-z0-9/:@!$&'()*+,;=\-._~]")


def _target(path: str, query: Mapping[str, QueryValue] | None) -> str:
    """The request target: the path, escaped where it must be, and the query."""
    if _PATH_UNSAFE.search(path) is not None:
        path = quote(path, safe=_PATH_SAFE)
    if query and (params := _encode_query(query)):
        return f"{path}?{urlencode(params, quote_via=quote)}"
    return path


async def _decode(data: bytes) -> Any:
    if not data:
        return None
    if len(data) > _THREAD_DECODE_BYTES:
        return await asyncio.to_thread(codec.loads, data)
    return codec.loads(data)


class KubeApi:
    """The one client every runtime component shares (one connection pool, one QPS budget)."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        qps: float = 20.0,
        burst: int = 30,
        metrics: Metrics | None = None,
        user_agent: str = "jobcontroller",
        settings: ApiSettings | None = None,
        connections: int = 100,
    ) -> None:
        self.config = config
        self._host = config.host.rstrip("/")
        self._host_label = urlsplit(self._host).netloc  # client-go's `host` label: host:port
        self._proxy, self._proxy_headers = _proxy_for(config)
        self._connections = connections
        self._pool: Pool | None = None
        self._owner: KubeApi | None = None
        """For :meth:`with_own_budget`'s clients: the one whose connections they share."""
        self._bucket = TokenBucket(qps, burst) if qps > 0 else None
        self.reserve = burst // 2
        """Tokens of the rate limiter :meth:`backlog` and :meth:`spare` keep for the requests
        that start jobs: half the burst. A burst of new jobs spends the bucket on their pods
        and Services, and the writes that may wait start waiting once half of it is gone,
        rather than when it is empty (100 TFJobs at QPS 200 / burst 300: all their objects
        in 3.5 s rather than 3.7, with 12% fewer status writes; docs/performance.md)."""
        self._metrics = metrics
        self._user_agent = user_agent
        self.settings = settings or ApiSettings()
        self.write_gate: Callable[[], bool] | None = None
        """Asked right before every write (after the rate limiter's wait) except to Leases;
        False refuses it with :class:`NotLeader`. The manager sets it to the elector's
        ``holds_lease``, so a replica that lost the Lease, or woke from a freeze past its
        renew deadline, sends no write from a reconcile still under way."""

    @classmethod
    async def from_config(
        cls,
        *,
        kubeconfig: str | None = None,
        context: str | None = None,
        qps: float = 20.0,
        burst: int = 30,
        metrics: Metrics | None = None,
        user_agent: str = "jobcontroller",
        settings: ApiSettings | None = None,
    ) -> KubeApi:
        """In-cluster config when running in a pod and no kubeconfig is named, else a kubeconfig
        (``kubeconfig``, then ``$KUBECONFIG``, then ``~/.kube/config``): see
        :mod:`jobcontroller.runtime.kubeconfig`."""
        return cls(
            load_config(kubeconfig, context),
            qps=qps,
            burst=burst,
            metrics=metrics,
            user_agent=user_agent,
            settings=settings,
        )

    def with_limits(self, *, qps: float, burst: int, user_agent: str) -> KubeApi:
        """Another client to the same cluster with a rate limit of its own and no write gate:
        for a component that must not spend the reconcilers' budget and writes on every
        replica (the TrainJob status server). Close it when done."""
        return KubeApi(
            self.config,
            qps=qps,
            burst=burst,
            metrics=self._metrics,
            user_agent=user_agent,
            settings=self.settings,
            connections=self._connections,
        )

    def with_own_budget(self) -> KubeApi:
        """This client with a QPS budget of its own, as large as this one's, sharing its
        connections and its write gate: client-go's second clientset from the same config (the
        mpi-operator writes MPIJob status through its own). Nothing to close."""
        view = copy.copy(self)
        view._owner = self._owner or self
        if self._bucket is not None:
            view._bucket = TokenBucket(self._bucket.qps, self._bucket.burst)
        owner = view._owner
        view.write_gate = lambda: owner.write_gate is None or owner.write_gate()
        return view

    def _connections_pool(self) -> Pool:
        """One connection pool, made on first use. The proxy was settled once, when this
        client was made. No ``Accept-Encoding`` is sent: the API server would gzip large lists,
        which costs more CPU on both sides than the bytes it saves next to the cluster."""
        if self._owner is not None:
            return self._owner._connections_pool()
        if self._pool is None:
            self._pool = Pool(
                self._host,
                ssl_context=self.config.ssl_context,
                server_hostname=self.config.server_hostname,
                limit=self._connections,
                connect_timeout=self.settings.connect_timeout,
                proxy=self._proxy,
                proxy_headers=self._proxy_headers,
            )
        return self._pool

    async def close(self) -> None:
        if self._owner is None and self._pool is not None:
            await self._pool.close()
            self._pool = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    # -- verbs --------------------------------------------------------------------------------

    async def get(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        result: Obj = await self.request("GET", path)
        return result

    async def get_metadata(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
    ) -> Obj:
        """The object's ``metadata`` only, as a ``PartialObjectMetadata`` (client-go's metadata
        client; a server that cannot convert answers the whole object): what a look for
        whether an object exists needs. A CustomResourceDefinition with the pod template's
        schema is 0.2 to 0.4 MB whole, its metadata about 1 KB.
        ``resource_version="0"`` takes the API server's cache (any version it has, maybe a
        moment old) instead of a read of etcd: for a big object, a twentieth of the time."""
        path = resource.path(namespace=namespace, name=name)
        query = None if resource_version is None else {"resourceVersion": resource_version}
        result: Obj = await self.request("GET", path, query=query, accept=METADATA_ONLY)
        return result

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        limit: int | None = None,
        each: Callable[[Obj], Obj] | None = None,
    ) -> tuple[ObjList, str]:
        """All items, following ``continue`` pages, and the list's resourceVersion.

        ``each`` is applied to every item as its page is decoded, so only what it returns
        is kept from one page to the next: with a ``limit``, a list of any length holds one
        page's body and decoded items at a time beside the results.
        """
        items: ObjList = []
        token: str | None = None
        while True:
            query: dict[str, QueryValue] = {
                "labelSelector": label_selector,
                "fieldSelector": field_selector,
                "limit": limit,
            }
            if token:
                # The token carries the list's resourceVersion: both fields are refused with it.
                query["continue"] = token
            else:
                query["resourceVersion"] = resource_version
                query["resourceVersionMatch"] = resource_version_match
            page = await self.request("GET", resource.path(namespace=namespace), query=query)
            meta = page.get("metadata") or {}
            # Popped, so that the page's decoded items go as soon as they are gone through.
            for item in page.pop("items", None) or ():
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(each(item) if each is not None else item)
            token = meta.get("continue")
            if not token:
                return items, str(meta.get("resourceVersion", ""))

    @overload
    async def create(
        self,
        resource: Resource,
        body: Obj,
        *,
        namespace: str | None = None,
        decode: Literal[True] = True,
    ) -> Obj: ...

    @overload
    async def create(
        self, resource: Resource, body: Obj, *, namespace: str | None = None, decode: Literal[False]
    ) -> None: ...

    async def create(
        self, resource: Resource, body: Obj, *, namespace: str | None = None, decode: bool = True
    ) -> Obj | None:
        """POST ``body``; the object created, unless not ``decode`` (for a caller that does
        not read it, as the watch brings it: an answer's decoding was 3% of an MPIJob's CPU).
        An error's answer is always read."""
        path = resource.path(namespace=namespace)
        result: Obj | None = await self.request("POST", path, body=body, decode=decode)
        return result

    async def replace(
        self,
        resource: Resource,
        body: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        if isinstance(body, Projected) or isinstance(body.get("metadata"), Projected):
            # What the cache dropped would be wiped on the server: patch, or GET and PUT that.
            raise ValueError(f"refusing to PUT a cache's projection of a {resource.kind}")
        name = body["metadata"]["name"]
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        result: Obj = await self.request("PUT", path, body=body)
        return result

    async def merge_patch(
        self,
        resource: Resource,
        name: str,
        patch: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
    ) -> Obj:
        path = resource.path(namespace=namespace, name=name, subresource=subresource)
        result: Obj = await self.request(
            "PATCH", path, body=patch, content_type="application/merge-patch+json"
        )
        return result

    async def delete(
        self,
        resource: Resource,
        name: str,
        *,
        namespace: str | None = None,
        uid: str | None = None,
        propagation_policy: str | None = "Background",
        grace_period_seconds: int | None = None,
    ) -> None:
        options: Obj = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation_policy is not None:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if uid is not None:
            options["preconditions"] = {"uid": uid}
        await self.request("DELETE", resource.path(namespace=namespace, name=name), body=options)

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str,
        timeout_seconds: int,
        inactivity_timeout: float,
        send_initial_events: bool = False,
    ) -> AsyncGenerator[Obj, None]:
        """Raw watch events until the server closes the stream.

        ``send_initial_events`` asks for a streaming list (KEP-3157): first an ADDED event for
        each object as of a version not older than ``resource_version`` (``""``: a consistent
        read), then a BOOKMARK annotated ``k8s.io/initial-events-end``, then the changes.

        Raises :class:`ApiError` for an error response or an ERROR event (410 Gone included),
        :class:`WatchInactive` when no line arrives for ``inactivity_timeout`` seconds.
        """
        query: dict[str, QueryValue] = {
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
        }
        if send_initial_events:
            query["sendInitialEvents"] = True
            query["resourceVersionMatch"] = "NotOlderThan"
        path = resource.path(namespace=namespace)
        # The API server answers a watch's headers at once; a request left unanswered (a proxy
        # that forwarded it and dropped the answer) would otherwise hold this stream, blind,
        # until the socket read timeout (timeoutSeconds and a margin): minutes.
        try:
            resp = await self._open_stream(
                path,
                query=query,
                read_timeout=timeout_seconds + self.settings.watch_read_margin,
                line_timeout=inactivity_timeout,
                answer_within=min(inactivity_timeout, self.settings.watch_answer_timeout),
            )
        except _NoAnswer as exc:
            raise WatchInactive(
                f"no answer to a watch of {resource.label} in {exc.seconds:.0f}s"
            ) from None
        async with resp:
            if resp.status != 200:
                raise ApiError.from_response(
                    status=resp.status,
                    data=await resp.read(),
                    headers=resp.headers,
                    reason=resp.reason or "",
                )
            while True:
                try:
                    line = await resp.next_line()
                except LineSilence as exc:
                    raise WatchInactive(
                        f"no watch event for {inactivity_timeout:.0f}s on {resource.label}"
                    ) from exc
                if line is None:
                    return
                # The line's own bytes, decoded in one pass (no str copy of it first).
                event: Obj = codec.loads(line)
                if event.get("type") == "ERROR":
                    raise ApiError.from_status(event.get("object") or {})
                yield event

    # -- the generic seam ---------------------------------------------------------------------

    def backlog(self) -> float:
        """Seconds until this client has a request to spare (0: it has one now): until a
        request made then would get its token at once and leave :attr:`reserve` more in the
        client-side rate limiter. The writes that only inform wait that long (the status
        writer's holds, a child's patch that can wait), so the reserve is left to the requests
        that start jobs."""
        return 0.0 if self._bucket is None else self._bucket.backlog(self.reserve)

    def spare(self) -> int:
        """Requests that could be made now without waiting for the client-side rate limiter,
        and leave :attr:`reserve` tokens in it."""
        return sys.maxsize if self._bucket is None else self._bucket.spare(self.reserve)

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        content_type: str | None = None,
        decode: bool = True,
        accept: str | None = None,
    ) -> Any:
        """One API call with rate limiting, bounded retries and metrics; returns decoded JSON
        (None when not ``decode``: a success's body is then not read). ``accept`` replaces
        the ``Accept`` header (:data:`METADATA_ONLY`)."""
        method = method.upper()
        attempt = 0
        while True:
            attempt += 1
            started = time.monotonic()
            try:
                resp = await self.call(
                    method, path, query=query, body=body, content_type=content_type, accept=accept
                )
                data, status, headers, reason = resp.body, resp.status, resp.headers, resp.reason
                if (m := self._metrics) is not None:
                    m.child(m.api_request_duration, method, path_resource_label(path)).observe(
                        time.monotonic() - started
                    )
            except (HttpError, TimeoutError) as exc:
                if attempt >= self.settings.max_attempts or not should_retry_exception(
                    method=method, exc=exc
                ):
                    raise
                delay = retry_delay(attempt=attempt, settings=self.settings, retry_after=None)
                log.info(
                    "API request failed in transit; retrying",
                    method=method,
                    path=path,
                    error=repr(exc),
                    delay=round(delay, 3),
                )
                await asyncio.sleep(delay)
                continue
            if 200 <= status < 300:
                return await _decode(data) if decode else None
            err = ApiError.from_response(status=status, data=data, headers=headers, reason=reason)
            too_long = (
                err.retry_after is not None and err.retry_after > self.settings.max_retry_after
            )
            if (
                attempt >= self.settings.max_attempts
                or too_long
                or not should_retry_status(method=method, status=status)
            ):
                raise err
            delay = retry_delay(
                attempt=attempt, settings=self.settings, retry_after=err.retry_after
            )
            # A 429 is the API server's flow control asking for patience (at start-up every
            # informer lists at once): routine, so debug; a 5xx is worth an info line.
            (log.debug if status == 429 else log.info)(
                "API server asked to retry" if status == 429 else "API request failed; retrying",
                method=method,
                path=path,
                status=status,
                delay=round(delay, 3),
            )
            await asyncio.sleep(delay)

    async def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, QueryValue] | None = None,
        body: Any = None,
        content_type: str | None = None,
        read_timeout: float | None = None,
        accept: str | None = None,
    ) -> Response:
        """One attempt, its answer whole and not decoded (a pod's log is text): rate limited,
        gated and counted as :meth:`request`'s are, but neither retried nor raised on an
        error status."""
        headers = await self._headers(method, path, content_type)
        if accept is not None:
            headers["Accept"] = accept
        code = "error"
        try:
            resp = await self._connections_pool().request(
                method,
                _target(path, query),
                headers,
                None if body is None else codec.dumps(body),
                read_timeout=self.settings.read_timeout if read_timeout is None else read_timeout,
            )
            code = str(resp.status)
            return resp
        finally:
            self._count(method, method, path, code)

    async def _open_stream(
        self,
        path: str,
        *,
        query: Mapping[str, QueryValue],
        read_timeout: float,
        line_timeout: float,
        answer_within: float,
    ) -> Stream:
        """A watch's GET, once its status line and headers are in (:class:`_NoAnswer` when
        they are not within ``answer_within`` seconds); the caller closes it."""
        headers = await self._headers("GET", path, None)
        code = "error"
        try:
            try:
                async with asyncio.timeout(answer_within) as deadline:
                    resp = await self._connections_pool().stream(
                        "GET",
                        _target(path, query),
                        headers,
                        read_timeout=read_timeout,
                        max_line=_MAX_WATCH_LINE,
                        line_timeout=line_timeout,
                    )
            except TimeoutError:
                if deadline.expired():
                    raise _NoAnswer(answer_within) from None
                raise
            code = str(resp.status)
            return resp
        finally:
            self._count("WATCH", "GET", path, code)

    async def _headers(self, method: str, path: str, content_type: str | None) -> dict[str, str]:
        """After the rate limiter and the write gate: the request's headers."""
        if self._bucket is not None:
            waited = await self._bucket.acquire()
            if self._metrics is not None:
                self._metrics.api_rate_limiter_wait.observe(waited)
        gate = self.write_gate
        if gate is not None and method in _WRITES and "/leases" not in path and not gate():
            raise NotLeader(f"{method} {path}: this replica does not hold the Lease")
        return {
            "Accept": "application/json",
            "Content-Type": content_type or "application/json",
            "User-Agent": self._user_agent,
            **(await self.config.auth_headers()),
        }

    def _count(self, verb: str, method: str, path: str, code: str) -> None:
        if (m := self._metrics) is not None:
            m.child(m.api_requests, verb, path_resource_label(path), code).inc()
            m.child(
                m.rest_client_requests,
                "<error>" if code == "error" else code,
                method,
                self._host_label,
            ).inc()


def _proxy_for(config: ClusterConfig) -> tuple[str | None, dict[str, str] | None]:
    """The proxy to the API server and its ``Proxy-Authorization`` header: the kubeconfig's
    ``proxy-url``, else the environment's as client-go reads it (``$HTTPS_PROXY`` for an https
    server, ``$HTTP_PROXY`` for http, either case; ``$NO_PROXY``), looked up once here."""
    proxy = config.proxy or _env_proxy(config.host)
    if not proxy:
        return None, None
    if "://" not in proxy:
        proxy = "http://" + proxy  # as Go's httpproxy reads a bare host:port
    parts = urlsplit(proxy)
    if parts.scheme != "http" or not parts.hostname:
        # Refused when the client is made (at start), not at every request.
        raise ValueError(
            f"proxy {parts.scheme}://{parts.hostname}: only an http:// proxy is supported "
            "(the API server is reached through its CONNECT tunnel)"
        )
    if parts.username is None:
        return proxy, None
    secret = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
    netloc = parts.netloc.rpartition("@")[2]
    headers = {"Proxy-Authorization": "Basic " + base64.b64encode(secret.encode()).decode()}
    return urlunsplit(parts._replace(netloc=netloc)), headers


def _env_proxy(server: str) -> str | None:
    """golang.org/x/net/http/httpproxy's rules: no proxy for localhost or a loopback address,
    nor for a host ``$NO_PROXY`` names (``*``; an address or CIDR; a domain, which covers its
    subdomains, or a ``.domain``, which covers only them; each with an optional port)."""
    env = os.environ
    url = urlsplit(server)
    names = (
        ("HTTPS_PROXY", "https_proxy") if url.scheme == "https" else ("HTTP_PROXY", "http_proxy")
    )
    proxy = next((env[n] for n in names if env.get(n)), None)
    host = (url.hostname or "").lower()
    if not proxy or not host or host == "localhost":
        return None
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        address: ipaddress.IPv4Address | ipaddress.IPv6Address | None = ipaddress.ip_address(host)
    except ValueError:
        address = None
    if address is not None and address.is_loopback:
        return None
    for raw in (env.get("NO_PROXY") or env.get("no_proxy") or "").split(","):
        entry = raw.strip().lower()
        if entry == "*":
            return None
        if not entry:
            continue
        if "/" in entry:
            try:
                if address is not None and address in ipaddress.ip_network(entry, strict=False):
                    return None
            except ValueError:
                pass
            continue
        name, _, entry_port = entry.rpartition(":") if entry.count(":") == 1 else (entry, "", "")
        if entry_port and entry_port != str(port):
            continue
        name = name.strip("[]")
        if name == host or (not name.startswith(".") and host.endswith("." + name)):
            return None
        if name.startswith(".") and host.endswith(name):
            return None
    return proxy
