"""The endpoint training pods report progress to: HTTPS in the operator process, on every
replica (upstream's status server, v2.3.0 pkg/statusserver), writing ``status.trainerStatus``.
One endpoint per process serves every kind its controllers register
(:meth:`ProgressServer.add_kind`): the TrainJob as upstream, and the v1 kinds as this project's
extension, each at its own URL.

``POST /apis/<group>/<version>/namespaces/{ns}/<plural>/{name}/status`` (for a TrainJob
``/apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status``, for a
PyTorchJob ``/apis/kubeflow.org/v1/namespaces/{ns}/pytorchjobs/{name}/status``) with
``{"trainerStatus": {...}}`` and ``Authorization: Bearer <projected token>``. In order:

1. a body over 64 KiB is refused (413), by its Content-Length before anything else, and while
   it is read otherwise;
2. the token must be a pod of that job's (:mod:`jobcontroller.controller.progressauth`): 401
   without a valid token, 403 with another job's or namespace's; upstream answers 403 to
   both;
3. the report must fit the CRD (:func:`~jobcontroller.core.progress.parse_report`): 422 with
   the field named;
4. the job must exist (404);
5. the write is bounded per job, on each replica (:class:`Coalescer`): the first report
   in a quiet period is written at once (200), later ones within
   :attr:`ProgressSettings.min_interval` seconds are coalesced, the last one kept and written
   when the interval ends (202). A report that changes nothing but the time is not written,
   nor one older than what another replica stored meanwhile. The write is a merge patch of
   the status subresource with a client of its own (5 QPS, burst 10: upstream's defaults), so
   reports never spend the reconcilers' API budget.

Errors answer with a ``metav1.Status`` body as upstream's do.

TLS: upstream serves with the webhook's certificate. This operator has no webhook, so it keeps
a CA and a serving certificate of its own in a Secret of its namespace (made by the first
replica, read by the others); the CA reaches a TrainJob's pods through its ``<job>-tls-config``
ConfigMap, a v1 job's in each pod's ``training.kubeflow.org/progress-ca`` annotation.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import socket
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

import structlog
from msgspec import Struct
from prometheus_client import CollectorRegistry, Counter

from jobcontroller.controller.progressauth import PodCheck, TokenAuthorizer, Verdict
from jobcontroller.controller.progresscoalescer import Coalescer
from jobcontroller.core.progress import (
    MAX_BODY_BYTES,
    ProgressTarget,
    ReportError,
    is_stale,
    parse_report,
    same_progress,
    status_patch,
)
from jobcontroller.runtime.httpserver import BodyTooLarge, HttpServer, Reply, Request, json_reply
from jobcontroller.runtime.kube import SECRETS, ApiError, KubeApi, Resource
from jobcontroller.runtime.progressflags import ProgressSettings
from jobcontroller.runtime.servingcert import ServingCert, serving_cert_from_child

__all__ = ["Coalescer", "ProgressServer", "progress_rules"]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

_CERT_RETRY_SECONDS = 10.0
READ_TIMEOUT = 10.0
"""Seconds a client has to send its body once authorized (upstream's server ReadTimeout)."""


def progress_rules(group: str, plural: str) -> tuple[Obj, ...]:
    """What the endpoint needs for one kind besides its controller's rules: a merge patch of
    its status subresource, the TokenReviews of the pods' tokens and those pods read (the
    certificate's Secret, made once and read by every replica, is the controller's to grant)."""
    return (
        {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["patch"]},
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
    )


class ProgressMetrics:
    """The endpoint's counters, every kind's (``trainjob_status_*``, the names they had when
    only TrainJobs reported; the progress itself is the ``trainjob_progress_percentage`` gauge
    the TrainJob controller computes at scrape time)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.reports = Counter(
            "trainjob_status_reports",
            "Progress reports received by the training-progress endpoint, by HTTP status code",
            ["code"],
            registry=registry,
        )
        self.writes = Counter(
            "trainjob_status_writes",
            "status.trainerStatus writes made from progress reports",
            registry=registry,
        )
        self.coalesced = Counter(
            "trainjob_status_coalesced_reports",
            "Progress reports held back by the per-job write interval (a later one won)",
            registry=registry,
        )


def _status(code: int, reason: str, message: str) -> Reply:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    headers = {"WWW-Authenticate": "Bearer"} if code == 401 else None
    return json_reply(body, status=code, headers=headers)


_REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


def _refused(verdict: Verdict) -> Reply:
    return _status(verdict.code, _REASONS.get(verdict.code, "Failure"), verdict.message)


def _too_large() -> Reply:
    return _status(413, "RequestEntityTooLarge", f"the body exceeds {MAX_BODY_BYTES} bytes")


class _Kind(Struct, frozen=True):
    resource: Resource
    current: Callable[[str, str], Obj | None]
    coalescer: Coalescer


class ProgressServer:
    """The endpoint; :meth:`run` serves until cancelled (a manager service). The kinds it
    serves are added with :meth:`add_kind` before it runs."""

    def __init__(
        self,
        *,
        settings: ProgressSettings,
        api: KubeApi,
        authorizer: TokenAuthorizer | None = None,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self._api = api
        self.authorizer = authorizer if authorizer is not None else TokenAuthorizer(api=api)
        self._clock = clock
        self._kinds: dict[tuple[str, str, str], tuple[ProgressTarget, _Kind]] = {}
        self.metrics = ProgressMetrics(registry)
        self.cert: ServingCert | None = None
        """Set once the certificate is loaded: the CA the pods get is ``cert.ca_pem``."""
        self._made: ServingCert | None = None  # made, not yet stored in the Secret
        self.port: int | None = None
        self.first_attempt_done = False
        """Whether the certificate was asked for once (had or not): the controllers hold
        planning until then, so that pods get the progress env from the start."""
        self._on_first_attempt: list[Callable[[], None]] = []
        self._server: HttpServer | None = None

    def add_kind(
        self,
        target: ProgressTarget,
        *,
        resource: Resource,
        current: Callable[[str, str], Obj | None],
        pod_check: PodCheck,
    ) -> None:
        """Serve ``target``'s reports: ``current`` reads a job from the controller's cache,
        ``pod_check`` says whether a pod is one of the job's."""

        async def write(namespace: str, name: str, status: Obj) -> bool:
            return await self._write(target, namespace, name, status)

        kind = _Kind(
            resource=resource,
            current=current,
            coalescer=Coalescer(interval=self.settings.min_interval, write=write),
        )
        self._kinds[(target.group, target.version, target.plural)] = (target, kind)
        self.authorizer.add_kind(target, pod_check)

    def when_first_attempt_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once :attr:`first_attempt_done` is set (now, if it is): the
        controllers queue again the jobs they held for it then, not on a timer."""
        if self.first_attempt_done:
            callback()
        else:
            self._on_first_attempt.append(callback)

    def _first_attempt(self) -> None:
        if self.first_attempt_done:
            return
        self.first_attempt_done = True
        callbacks, self._on_first_attempt = self._on_first_attempt, []
        for callback in callbacks:
            callback()

    @property
    def coalescer(self) -> Coalescer:
        """The first kind's bound (a server of one kind: its only one)."""
        return next(iter(self._kinds.values()))[1].coalescer

    async def run(self) -> None:
        """Serve until cancelled. Neither a certificate that cannot be had nor a port that
        cannot be bound stops the operator: both are retried, and jobs run meanwhile
        (their pods get no progress env while there is no certificate)."""
        try:
            cert = await self._certificate()
            while True:
                try:
                    await self.start(cert)
                    break
                except OSError as exc:
                    log.error(
                        "the training-progress endpoint cannot listen; retrying",
                        port=self.settings.port,
                        error=str(exc),
                    )
                    await self._close_server()
                    await asyncio.sleep(_CERT_RETRY_SECONDS)
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def start(self, cert: ServingCert) -> None:
        context = _ssl_context(cert)
        server = HttpServer(self._report, max_body=MAX_BODY_BYTES)
        self._server = server
        host = self.settings.bind_address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, self.settings.port), family=family)
        sock.setblocking(False)
        await server.listen(sock, ssl_context=context)
        self.port = sock.getsockname()[1]
        log.info("serving training progress", port=self.port, url=self.base_url)

    @property
    def base_url(self) -> str:
        return self.settings.base_url(self.port)

    async def stop(self) -> None:
        for _, kind in self._kinds.values():
            await kind.coalescer.close()
        await self._close_server()
        await self._api.close()

    async def _close_server(self) -> None:
        if self._server is not None:
            await self._server.close()
            self._server = None

    async def _certificate(self) -> ServingCert:
        """The shared certificate; retried (progress is optional, training is not blocked)."""
        while True:
            try:
                cert = await self._ensure_cert()
            except (ApiError, OSError, ValueError) as exc:
                self._first_attempt()
                log.warning(
                    "no certificate for the training-progress endpoint yet; retrying",
                    secret=f"{self.settings.namespace}/{self.settings.secret_name}",
                    error=str(exc),
                )
                await asyncio.sleep(_CERT_RETRY_SECONDS)
                continue
            self.cert = cert
            self._first_attempt()
            return cert

    async def _ensure_cert(self) -> ServingCert:
        ns, name = self.settings.namespace, self.settings.secret_name
        try:
            return _from_secret(await self._api.get(SECRETS, name, namespace=ns))
        except ApiError as exc:
            if exc.status != 404:
                raise
        # Made once, in a child process (cryptography's memory stays out of the operator),
        # and kept across retries: a Secret that cannot be created yet (no namespace, no
        # permission) does not cost a new pair every retry.
        if self._made is None:
            self._made = await serving_cert_from_child(hosts=self.settings.hosts, now=self._clock())
        cert = self._made
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": name, "namespace": ns},
            "type": "kubernetes.io/tls",
            "data": {
                k: base64.b64encode(v.encode()).decode()
                for k, v in (
                    ("ca.crt", cert.ca_pem),
                    ("tls.crt", cert.cert_pem),
                    ("tls.key", cert.key_pem),
                )
            },
        }
        try:
            await self._api.create(SECRETS, secret, namespace=ns)
        except ApiError as exc:
            if exc.status != 409:  # another replica made it first: use theirs
                raise
            return _from_secret(await self._api.get(SECRETS, name, namespace=ns))
        return cert

    async def _report(self, request: Request) -> Reply:
        try:
            response = await self._answer(request)
        except Exception as exc:  # an API client error, a bug: the reporter gets a Status
            log.warning("progress report failed", path=request.path, error=repr(exc))
            response = _status(500, "InternalError", "the report could not be handled")
        self.metrics.reports.labels(str(response.status)).inc()
        if response.status == 202:
            self.metrics.coalesced.inc()
        return response

    async def _answer(self, request: Request) -> Reply:
        # /apis/{group}/{version}/namespaces/{namespace}/{plural}/{name}/status
        parts = request.path.split("/")
        served = None
        if (
            len(parts) == 9
            and (parts[1], parts[4], parts[8]) == ("apis", "namespaces", "status")
            and all(parts[2:8])
        ):
            served = self._kinds.get((parts[2], parts[3], parts[6]))
        if served is None:
            return _status(404, "NotFound", f"no progress is served at {request.path}")
        if request.method != "POST":
            return _status(405, "MethodNotAllowed", f"{request.method} is not allowed; use POST")
        namespace, name = parts[5], parts[7]
        target, kind = served
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _too_large()
        verdict = await self.authorizer.authorize(
            request.headers.get("Authorization"), target, namespace, name
        )
        if not verdict.allowed:
            return _refused(verdict)
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                body = await request.read()
        except BodyTooLarge:
            return _too_large()
        except TimeoutError:
            return _status(408, "Timeout", f"the body did not arrive within {READ_TIMEOUT:g} s")
        try:
            status = parse_report(body, now=self._clock())
            if status is None:
                return json_reply({}, status=200)
            if kind.current(namespace, name) is None:
                raise _not_found(target, namespace, name)
            now = await kind.coalescer.submit(namespace, name, status)
        except ReportError as exc:
            return _status(exc.code, exc.reason, exc.message)
        return json_reply({"trainerStatus": status}, status=200 if now else 202)

    async def _write(self, target: ProgressTarget, namespace: str, name: str, status: Obj) -> bool:
        _, kind = self._kinds[(target.group, target.version, target.plural)]
        current = kind.current(namespace, name)
        if current is None:
            raise _not_found(target, namespace, name)
        have = (current.get("status") or {}).get("trainerStatus")
        if same_progress(have, status) or is_stale(have, status):
            return False
        try:
            await self._api.merge_patch(
                kind.resource,
                name,
                status_patch(status),
                namespace=namespace,
                subresource="status",
            )
        except ApiError as exc:
            if exc.status == 404:
                raise _not_found(target, namespace, name) from None
            if exc.status in (400, 422):
                raise ReportError(422, "Invalid", str(exc)) from None
            log.warning(
                "writing trainerStatus failed",
                kind=target.kind,
                job=f"{namespace}/{name}",
                error=str(exc),
            )
            raise ReportError(500, "InternalError", "the status could not be written") from None
        self.metrics.writes.inc()
        return True


def _not_found(target: ProgressTarget, namespace: str, name: str) -> ReportError:
    return ReportError(404, "NotFound", f"{target.kind} {namespace}/{name} not found")


def _ssl_context(cert: ServingCert) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory() as where:
        # The ssl module loads keys from files only; they live for this block.
        cert_file, key_file = os.path.join(where, "tls.crt"), os.path.join(where, "tls.key")
        for path, data in ((cert_file, cert.cert_pem), (key_file, cert.key_pem)):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write(data)
        context.load_cert_chain(cert_file, key_file)
    return context


def _from_secret(secret: Obj) -> ServingCert:
    data = secret.get("data") or {}

    def field_(key: str) -> str:
        value = data.get(key)
        if not isinstance(value, str) or not value:
            raise ValueError(f"the Secret has no {key}")
        return base64.b64decode(value).decode()

    return ServingCert(
        ca_pem=field_("ca.crt"), cert_pem=field_("tls.crt"), key_pem=field_("tls.key")
    )
