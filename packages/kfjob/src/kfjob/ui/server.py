"""The HTTP server of ``kfjob ui``: the standard library's threading server, a thread per
request (the pages are few and local; live updates are server-sent events, each holding its
thread while the page is open: ``streams``).

Safety, since the server acts with the user's kubeconfig:

- it binds 127.0.0.1 unless told otherwise, and answers only requests whose ``Host`` is the
  address it serves (a page of another site that resolves its name to 127.0.0.1, DNS
  rebinding, is refused);
- every POST (suspend, resume, delete, render) must carry the server's token, a random value
  made at start and written into its pages, and, when the browser sends them, an ``Origin``
  of this server and a ``Sec-Fetch-Site`` of same-origin: another site cannot make the
  browser act here (CSRF);
- every page is sent with a Content-Security-Policy allowing only this server's own script
  and stylesheet, so even markup that escaped escaping could not run script.
"""

from __future__ import annotations

import datetime as dt
import hmac
import ipaddress
import json
import re
import secrets
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from typing_extensions import override

from kfjob.client import ApiFailure
from kfjob.ui import pages, streams
from kfjob.ui.access import Access
from kfjob.ui.cluster import Cluster
from kfjob.ui.html import alert, layout
from kfjob.ui.hub import Hub
from kfjob.ui.jobfeed import JobFeed
from kfjob.ui.model import CANDIDATES, ServedKind
from kfjob.ui.renderpage import MAX_INPUT, render_page, run_render
from kfjob.ui.streams import EventStream

__all__ = ["UiServer", "allowed_hosts", "check_post"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
STATIC = {"ui.css": "text/css", "ui.js": "text/javascript", "icon.svg": "image/svg+xml"}
_JOB = re.compile(r"^/jobs/([^/]+)/([^/]+)/([^/]+)(?:/(stream|suspend|resume|delete))?$")
_LOG = re.compile(r"^/logs/([^/]+)/([^/]+)$")


def allowed_hosts(address: str, port: int) -> frozenset[str] | None:
    """The ``Host`` values the server answers; None (any) when bound to every address."""
    hosts = {f"{address}:{port}"}
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return frozenset(hosts)
    if ip.is_unspecified:
        return None
    if ip.version == 6:
        hosts = {f"[{address}]:{port}"}
    if ip.is_loopback:
        hosts |= {f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"}
    return frozenset(hosts)


def check_post(
    headers: Mapping[str, str], *, form_token: str | None, token: str, host: str
) -> str | None:
    """Why a POST is refused (None: accepted): the server's token, in the form or the
    ``X-CSRF-Token`` header, and a same-origin request as far as the browser says.
    ``headers``: the request's, names in lower case."""
    given = headers.get("x-csrf-token") or form_token or ""
    if not hmac.compare_digest(given.encode(), token.encode()):
        return "missing or wrong token: reload the page"
    origin = headers.get("origin")
    if origin is not None and origin != f"http://{host}":
        return f"a request from {origin} is not accepted"
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return f"a {site} request is not accepted"
    return None


class UiServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, cluster: Cluster, *, address: str, port: int, context: str) -> None:
        super().__init__((address, port), Handler)
        self.cluster = cluster
        self.hub = Hub(cluster)
        self.access = Access(cluster)
        self.token = secrets.token_urlsafe(32)
        self.context = context
        self.hosts = allowed_hosts(address, self.server_address[1])
        self.closing = threading.Event()
        self.streams: set[EventStream] = set()
        """The open live streams (woken when the server closes)."""
        self.on_feed: Callable[[JobFeed], None] = lambda feed: None
        """Called with each job page's feed (the tests follow its threads)."""
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.server_address[1]}/"

    def start(self) -> None:
        self.hub.start()

    def end_streams(self) -> None:
        """Stop the hub's watches and end every open stream (and the watches behind it)."""
        self.closing.set()
        self.hub.stop()
        with self._lock:
            open_streams = list(self.streams)
        for stream in open_streams:
            stream.waker.notify()

    def close(self) -> None:
        """Stop serving from another thread than ``serve_forever``'s, and close."""
        self.end_streams()
        self.shutdown()
        self.server_close()

    @contextmanager
    def stream(self, stream: EventStream) -> Iterator[EventStream]:
        with self._lock:
            self.streams.add(stream)
        try:
            yield stream
        finally:
            with self._lock:
                self.streams.discard(stream)
            stream.close()

    def kind(self, plural: str) -> ServedKind | None:
        return next((k for k in (*self.hub.kinds, *CANDIDATES) if k.plural == plural), None)


class Handler(BaseHTTPRequestHandler):
    server: UiServer
    server_version = "kfjob-ui"

    @override
    def log_message(self, format: str, *args: Any) -> None:  # the base's name
        pass  # the terminal shows the URL, not every request

    # ------------------------------------------------------------------ plumbing

    def _host_ok(self) -> bool:
        hosts = self.server.hosts
        if hosts is None or self.headers.get("Host") in hosts:
            return True
        self._send(HTTPStatus.MISDIRECTED_REQUEST, "text/plain", b"unexpected Host header\n")
        return False

    def _send(
        self, status: HTTPStatus | int, ctype: str, body: bytes, headers: Mapping[str, str] = {}
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", f"{ctype}; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self._security_headers()
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _security_headers(self) -> None:
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        # same-origin, not no-referrer: with no-referrer a browser sends a form's POST with
        # ``Origin: null``, which check_post must refuse.
        self.send_header("Referrer-Policy", "same-origin")
        self.send_header("Cache-Control", "no-store")

    def _page(self, title: str, page: str, body: str, status: int = 200) -> None:
        text = layout(
            title=title, page=page, body=body, csrf=self.server.token, context=self.server.context
        )
        self._send(status, "text/html", text.encode())

    def _json(self, status: int, data: object) -> None:
        self._send(status, "application/json", json.dumps(data).encode())

    @contextmanager
    def _event_stream(self) -> Iterator[EventStream]:
        """Answer with an event stream (its headers sent), closed when the block ends."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self._security_headers()
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()
        self.close_connection = True
        with self.server.stream(EventStream(self.wfile, self.connection)) as stream:
            yield stream

    # ------------------------------------------------------------------ routes

    def do_GET(self) -> None:  # the base's name
        if not self._host_ok():
            return
        url = urlsplit(self.path)
        path, query = unquote(url.path), {k: v[-1] for k, v in parse_qs(url.query).items()}
        try:
            if path == "/":
                self._jobs_page(query)
            elif path == "/events/jobs":
                with self._event_stream() as stream:
                    streams.jobs_stream(stream, hub=self.server.hub, closing=self.server.closing)
            elif path == "/render":
                self._page(
                    "Render",
                    "render",
                    render_page(
                        text="", namespace="", flags="", csrf=self.server.token, result=None
                    ),
                )
            elif path.startswith("/static/") and path[8:] in STATIC:
                name = path[8:]
                data = resources.files("kfjob.ui").joinpath("static", name).read_bytes()
                self._send(200, STATIC[name], data)
            elif path == "/healthz":
                self._send(200, "text/plain", b"ok\n")
            elif (m := _JOB.match(path)) and m[4] in (None, "stream"):
                since = query.get("t", "")
                kind = self.server.kind(m[1])
                if kind is None:
                    self._page("Not found", "job", alert(f"no job kind {m[1]!r}"), 404)
                elif m[4] == "stream":
                    self._job_stream(kind, m[2], m[3], since)
                else:
                    self._job_page(kind, m[2], m[3])
            elif m := _LOG.match(path):
                with self._event_stream() as stream:
                    streams.log_stream(
                        stream,
                        cluster=self.server.cluster,
                        namespace=m[1],
                        pod=m[2],
                        query=query,
                        closing=self.server.closing,
                    )
            else:
                self._page("Not found", "none", alert(f"nothing at {path}"), 404)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page went away

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_INPUT + 4096:
            self._send(413, "text/plain", b"too large\n")
            return
        form = {k: v[-1] for k, v in parse_qs(self.rfile.read(length).decode()).items()}
        refused = check_post(
            {k.lower(): v for k, v in self.headers.items()},
            form_token=form.get("csrf"),
            token=self.server.token,
            host=self.headers.get("Host") or "",
        )
        wants_json = "application/json" in (self.headers.get("Accept") or "")
        if refused:
            if wants_json:
                self._json(403, {"ok": False, "message": f"Refused by kfjob ui: {refused}"})
            else:
                self._page("Refused", "none", alert(f"Refused by kfjob ui: {refused}"), 403)
            return
        path = unquote(urlsplit(self.path).path)
        if path == "/render":
            result = run_render(
                form.get("yaml", ""),
                namespace=form.get("namespace", ""),
                operator_flags=form.get("flags", ""),
            )
            body = render_page(
                text=form.get("yaml", ""),
                namespace=form.get("namespace", ""),
                flags=form.get("flags", ""),
                csrf=self.server.token,
                result=result,
            )
            self._page("Render", "render", body, 422 if result.errors else 200)
            return
        m = _JOB.match(path)
        kind = self.server.kind(m[1]) if m else None
        if m is None or kind is None or m[4] not in ("suspend", "resume", "delete"):
            self._json(404, {"ok": False, "message": f"no action at {path}"})
            return
        self._action(kind, m[2], m[3], m[4], wants_json)

    # ------------------------------------------------------------------ jobs

    def _jobs_page(self, query: Mapping[str, str]) -> None:
        hub = self.server.hub
        hub.wait_discovered(10)
        namespaces = sorted({ns for nss in hub.scopes.values() for ns in nss if ns})
        body = pages.jobs_page(
            rows=hub.rows(),
            kinds=[k.kind for k in hub.kinds],
            namespaces=namespaces,
            filters=query,
            notes=sorted(set(hub.notes.values())),
            now=dt.datetime.now(dt.UTC),
        )
        self._page("Jobs", "jobs", body)

    def _job_page(self, kind: ServedKind, ns: str, name: str) -> None:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        try:
            view = JobFeed(self.server.cluster, kind, ns, name).load_once()
        except ApiFailure as exc:
            status = exc.status if 400 <= exc.status < 600 else 502
            self._page(name, "job", alert(f"{exc.status or 'error'}: {exc.message}"), status)
            return
        if view.job is None:
            self._page(name, "job", alert(f"404: {kind.kind} {ns}/{name} not found"), 404)
            return
        sections = streams.job_sections(
            view, kind, access=self.server.access, csrf=self.server.token, now=now, env_cache={}
        )
        # The stream renders ages against the page's time, so a section it sends is the same
        # markup as the page's until the job changes (the page skips what it has already).
        stream = f"{self.path.split('?')[0]}/stream?t={int(now.timestamp())}"
        body = pages.job_page(kind, view.job, sections, stream=stream)
        self._page(f"{kind.kind} {name}", "job", body)

    def _job_stream(self, kind: ServedKind, ns: str, name: str, since: str) -> None:
        start = (
            dt.datetime.fromtimestamp(int(since), dt.UTC)
            if since.isdigit()
            else dt.datetime.now(dt.UTC)
        )
        with self._event_stream() as stream:
            streams.job_stream(
                stream,
                cluster=self.server.cluster,
                access=self.server.access,
                kind=kind,
                namespace=ns,
                name=name,
                csrf=self.server.token,
                since=start,
                closing=self.server.closing,
                on_feed=self.server.on_feed,
            )

    def _action(self, kind: ServedKind, ns: str, name: str, action: str, wants_json: bool) -> None:
        cluster = self.server.cluster
        what = f"{kind.kind} {ns}/{name}"
        try:
            if action == "delete":
                cluster.delete_job(kind, ns, name)
            else:
                cluster.set_suspend(kind, ns, name, action == "suspend")
        except ApiFailure as exc:
            words = {403: "Forbidden", 404: "Not found", 409: "Conflict", 422: "Invalid"}
            message = (
                f"{action.capitalize()} refused by the API server: "
                f"{exc.status} {words.get(exc.status, '')}: {exc.message}"
            )
            if wants_json:
                self._json(
                    exc.status or 502, {"ok": False, "status": exc.status, "message": message}
                )
            else:
                self._page(name, "job", alert(message), exc.status or 502)
            return
        done = {"suspend": "suspended", "resume": "resumed", "delete": "deleted"}[action]
        message = f"{what} {done}."
        if wants_json:
            self._json(200, {"ok": True, "message": message})
        else:
            target = "/" if action == "delete" else self.path.rsplit("/", 1)[0]
            self._send(303, "text/plain", message.encode(), {"Location": target})
