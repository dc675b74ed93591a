"""The endpoint trainer pods report progress to: HTTPS in the operator process, on every
replica (upstream's status server, v2.3.0 pkg/statusserver), writing ``status.trainerStatus``.

``POST /apis/trainer.kubeflow.org/v1alpha1/namespaces/{ns}/trainjobs/{name}/status`` with
``{"trainerStatus": {...}}`` and ``Authorization: Bearer <projected token>``. In order:

1. a body over 64 KiB is refused (413), by its Content-Length before anything else, and while
   it is read otherwise;
2. the token must be a pod of that TrainJob's (:mod:`trainer_operator.progressauth`): 401
   without a valid token, 403 with another TrainJob's or namespace's; upstream answers 403 to
   both;
3. the report must fit the CRD (:func:`~trainer_operator.progress.parse_report`): 422 with the
   field named;
4. the TrainJob must exist (404);
5. the write is bounded per TrainJob, on each replica (:class:`Coalescer`): the first report
   in a quiet period is written at once (200), later ones within
   :attr:`ProgressSettings.min_interval` seconds are coalesced, the last one kept and written
   when the interval ends (202). A report that changes nothing but the time is not written,
   nor one older than what another replica stored meanwhile. The write is a merge patch of
   the status subresource with a client of its own (5 QPS, burst 10: upstream's defaults), so
   reports never spend the reconcilers' API budget.

Errors answer with a ``metav1.Status`` body as upstream's do.

TLS: upstream serves with the webhook's certificate. This operator has no webhook, so it keeps
a CA and a serving certificate of its own in a Secret of its namespace (made by the first
replica, read by the others); the CA reaches the pods through ``<trainjob>-tls-config``.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import socket
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from jobcontroller import SECRETS, ApiError, KubeApi, Resource
from trainer_operator.progress import (
    MAX_BODY_BYTES,
    ReportError,
    is_stale,
    parse_report,
    same_progress,
    status_patch,
    status_path,
)
from trainer_operator.progressauth import TokenAuthorizer, Verdict
from trainer_operator.servingcert import ServingCert, new_serving_cert

__all__ = ["PROGRESS_RULES", "Coalescer", "ProgressServer", "ProgressSettings"]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

DEFAULT_PORT = 10443
"""Upstream's ``statusServer.port`` default."""
DEFAULT_MIN_INTERVAL = 5.0
"""Seconds between two status writes of one TrainJob: upstream's SDK throttles its reports to
one per 5 s on the client side; this holds whatever a pod sends."""
_CERT_RETRY_SECONDS = 10.0
READ_TIMEOUT = 10.0
"""Seconds a client has to send its body once authorized (upstream's server ReadTimeout)."""

PROGRESS_RULES: tuple[Obj, ...] = (
    # The reports' writes: a merge patch of the status subresource.
    {"apiGroups": ["trainer.kubeflow.org"], "resources": ["trainjobs/status"], "verbs": ["patch"]},
    # Authentication: the API server reviews the pods' tokens; their pods are read.
    {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
)
"""What the endpoint needs besides the controller's rules (the certificate's Secret is among
the Secrets the controller owns already)."""


@dataclass(frozen=True, slots=True)
class ProgressSettings:
    """Where and how the endpoint serves (``--trainjob-status-*`` flags)."""

    port: int = DEFAULT_PORT
    """The HTTPS port; 0 asks the OS for one (tests)."""
    bind_address: str = "0.0.0.0"
    namespace: str = "kubeflow"
    """The operator's namespace: the Secret of its certificate, and the Service's."""
    service: str = "training-operator"
    """The Service in front of the operator's pods: the certificate's host names."""
    url: str = ""
    """The base URL the pods are given; empty: ``https://<service>.<namespace>.svc:<port>``."""
    min_interval: float = DEFAULT_MIN_INTERVAL
    qps: float = 5.0
    burst: int = 10
    extra_hosts: tuple[str, ...] = ()
    """More names (or IPs) for the certificate (``localhost`` for a test)."""

    def base_url(self, port: int | None = None) -> str:
        """The pods' base URL; ``port``: the bound one, when the OS chose it."""
        where = port or self.port
        return self.url or f"https://{self.service}.{self.namespace}.svc:{where}"

    @property
    def secret_name(self) -> str:
        return f"{self.service}-trainjob-status-tls"

    @property
    def hosts(self) -> list[str]:
        s, ns = self.service, self.namespace
        return [s, f"{s}.{ns}", f"{s}.{ns}.svc", f"{s}.{ns}.svc.cluster.local", *self.extra_hosts]


Write = Callable[[str, str, Obj], Awaitable[bool]]
"""``(namespace, name, trainerStatus) -> whether it was written`` (False: it changed nothing)."""


@dataclass(slots=True)
class _Slot:
    pending: Obj | None = None
    task: asyncio.Task[None] | None = None


@dataclass(slots=True)
class Coalescer:
    """At most one status write per TrainJob per ``interval`` seconds, the latest report
    winning. Memory: one slot per TrainJob that reported within the last interval."""

    interval: float
    write: Write
    sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep
    writes: int = 0
    coalesced: int = 0
    _slots: dict[tuple[str, str], _Slot] = field(default_factory=dict)

    async def submit(self, namespace: str, name: str, status: Obj) -> bool:
        """True when written now (or found unchanged), False when held for later. A failed
        immediate write raises (the reporter is told); a deferred one is only logged."""
        key = (namespace, name)
        slot = self._slots.get(key)
        if slot is not None:
            slot.pending = status
            self.coalesced += 1
            return False
        slot = self._slots[key] = _Slot()
        slot.task = asyncio.get_running_loop().create_task(
            self._cool_down(key, slot), name=f"progress:{namespace}/{name}"
        )
        if await self.write(namespace, name, status):
            self.writes += 1
        return True

    @property
    def tracked(self) -> int:
        return len(self._slots)

    async def _cool_down(self, key: tuple[str, str], slot: _Slot) -> None:
        try:
            while True:
                await self.sleep(self.interval)
                pending, slot.pending = slot.pending, None
                if pending is None:
                    return
                try:
                    if await self.write(*key, pending):
                        self.writes += 1
                except ReportError as exc:
                    log.info("coalesced progress not written", trainjob=key, error=str(exc))
                except Exception as exc:
                    log.warning("coalesced progress not written", trainjob=key, error=repr(exc))
        finally:
            if self._slots.get(key) is slot:
                del self._slots[key]

    async def close(self) -> None:
        tasks = [s.task for s in self._slots.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)


class ProgressMetrics:
    """The endpoint's counters (``trainjob_status_*``; the progress itself is the
    ``trainjob_progress_percentage`` gauge the controller computes at scrape time)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        registry = registry if registry is not None else CollectorRegistry()
        self.reports = Counter(
            "trainjob_status_reports",
            "Progress reports received by the TrainJob status endpoint, by HTTP status code",
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
            "Progress reports held back by the per-TrainJob write interval (a later one won)",
            registry=registry,
        )


def _status(code: int, reason: str, message: str) -> web.Response:
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
    return web.json_response(body, status=code, headers=headers)


_REASONS = {
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    413: "RequestEntityTooLarge",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
}


def _refused(verdict: Verdict) -> web.Response:
    return _status(verdict.code, _REASONS.get(verdict.code, "Failure"), verdict.message)


def _too_large() -> web.Response:
    return _status(413, "RequestEntityTooLarge", f"the body exceeds {MAX_BODY_BYTES} bytes")


class ProgressServer:
    """The endpoint; :meth:`run` serves until cancelled (a manager service)."""

    def __init__(
        self,
        *,
        settings: ProgressSettings,
        api: KubeApi,
        trainjobs: Resource,
        current: Callable[[str, str], Obj | None],
        authorizer: TokenAuthorizer,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self._api = api
        self._trainjobs = trainjobs
        self._current = current
        self.authorizer = authorizer
        self._clock = clock
        self.coalescer = Coalescer(interval=settings.min_interval, write=self._write)
        self.metrics = ProgressMetrics(registry)
        self.cert: ServingCert | None = None
        """Set once the certificate is loaded: the CA the pods get is ``cert.ca_pem``."""
        self.port: int | None = None
        self.first_attempt_done = False
        """Whether the certificate was asked for once (had or not): the controller holds
        planning until then, so that JobSets get the progress env from the start."""
        app = web.Application(client_max_size=MAX_BODY_BYTES)
        app.router.add_post(status_path("{namespace}", "{name}"), self._report)
        self._app = app
        self._runner: web.AppRunner | None = None

    async def run(self) -> None:
        """Serve until cancelled. Neither a certificate that cannot be had nor a port that
        cannot be bound stops the operator: both are retried, and TrainJobs run meanwhile
        (their pods get no progress env while there is no certificate)."""
        try:
            cert = await self._certificate()
            while True:
                try:
                    await self.start(cert)
                    break
                except OSError as exc:
                    log.error(
                        "the TrainJob progress endpoint cannot listen; retrying",
                        port=self.settings.port,
                        error=str(exc),
                    )
                    await self._close_runner()
                    await asyncio.sleep(_CERT_RETRY_SECONDS)
            await asyncio.Event().wait()
        finally:
            await self.stop()

    async def start(self, cert: ServingCert) -> None:
        context = _ssl_context(cert)
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        self._runner = runner
        host = self.settings.bind_address
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.create_server((host, self.settings.port), family=family)
        sock.setblocking(False)
        await web.SockSite(runner, sock, ssl_context=context).start()
        self.port = sock.getsockname()[1]
        log.info("serving TrainJob progress", port=self.port, url=self.base_url)

    @property
    def base_url(self) -> str:
        return self.settings.base_url(self.port)

    async def stop(self) -> None:
        await self.coalescer.close()
        await self._close_runner()
        await self._api.close()

    async def _close_runner(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _certificate(self) -> ServingCert:
        """The shared certificate; retried (progress is optional, training is not blocked)."""
        while True:
            try:
                cert = await self._ensure_cert()
            except (ApiError, OSError, ValueError) as exc:
                self.first_attempt_done = True
                log.warning(
                    "no certificate for the TrainJob progress endpoint yet; retrying",
                    secret=f"{self.settings.namespace}/{self.settings.secret_name}",
                    error=str(exc),
                )
                await asyncio.sleep(_CERT_RETRY_SECONDS)
                continue
            self.cert = cert
            self.first_attempt_done = True
            return cert

    async def _ensure_cert(self) -> ServingCert:
        ns, name = self.settings.namespace, self.settings.secret_name
        try:
            return _from_secret(await self._api.get(SECRETS, name, namespace=ns))
        except ApiError as exc:
            if exc.status != 404:
                raise
        cert = new_serving_cert(hosts=self.settings.hosts, now=self._clock())
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

    async def _report(self, request: web.Request) -> web.Response:
        try:
            response = await self._answer(request)
        except Exception as exc:  # an API client error, a bug: the reporter gets a Status
            log.warning("progress report failed", path=request.path, error=repr(exc))
            response = _status(500, "InternalError", "the report could not be handled")
        self.metrics.reports.labels(str(response.status)).inc()
        if response.status == 202:
            self.metrics.coalesced.inc()
        return response

    async def _answer(self, request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if request.content_length is not None and request.content_length > MAX_BODY_BYTES:
            return _too_large()
        verdict = await self.authorizer.authorize(
            request.headers.get("Authorization"), namespace, name
        )
        if not verdict.allowed:
            return _refused(verdict)
        try:
            async with asyncio.timeout(READ_TIMEOUT):
                body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            return _too_large()
        except TimeoutError:
            return _status(408, "Timeout", f"the body did not arrive within {READ_TIMEOUT:g} s")
        try:
            status = parse_report(body, now=self._clock())
            if status is None:
                return web.json_response({}, status=200)
            if self._current(namespace, name) is None:
                raise ReportError(404, "NotFound", f"TrainJob {namespace}/{name} not found")
            now = await self.coalescer.submit(namespace, name, status)
        except ReportError as exc:
            return _status(exc.code, exc.reason, exc.message)
        return web.json_response({"trainerStatus": status}, status=200 if now else 202)

    async def _write(self, namespace: str, name: str, status: Obj) -> bool:
        current = self._current(namespace, name)
        if current is None:
            raise ReportError(404, "NotFound", f"TrainJob {namespace}/{name} not found")
        have = (current.get("status") or {}).get("trainerStatus")
        if same_progress(have, status) or is_stale(have, status):
            return False
        try:
            await self._api.merge_patch(
                self._trainjobs,
                name,
                status_patch(status),
                namespace=namespace,
                subresource="status",
            )
        except ApiError as exc:
            if exc.status == 404:
                raise ReportError(
                    404, "NotFound", f"TrainJob {namespace}/{name} not found"
                ) from None
            if exc.status in (400, 422):
                raise ReportError(422, "Invalid", str(exc)) from None
            log.warning(
                "writing trainerStatus failed", trainjob=f"{namespace}/{name}", error=str(exc)
            )
            raise ReportError(500, "InternalError", "the status could not be written") from None
        self.metrics.writes.inc()
        return True


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
