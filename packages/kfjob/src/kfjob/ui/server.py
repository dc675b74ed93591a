"""The HTTP server of ``kfjob ui``: the standard library's threading server, a thread per
request (the pages are few and local; live updates are server-sent events, each holding its
thread while the page is open).

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
import queue
import re
import secrets
import threading
from collections.abc import Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from typing_extensions import override

from kfjob.client import ApiFailure
from kfjob.render import RenderError, render_job
from kfjob.ui import pages
from kfjob.ui.cluster import Cluster, abort
from kfjob.ui.html import alert, esc, job_row_html, layout
from kfjob.ui.hub import Hub
from kfjob.ui.model import CANDIDATES, ServedKind
from kfjob.ui.renderpage import MAX_INPUT, render_page, run_render

__all__ = ["UiServer", "allowed_hosts", "check_post"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
STATIC = {"ui.css": "text/css", "ui.js": "text/javascript", "icon.svg": "image/svg+xml"}
#: How often a job's page looks at the job, its pods and events again.
POLL = 1.0
#: A comment line this often keeps an idle stream open and finds closed pages.
HEARTBEAT = 15.0
LOG_TAIL = 2000
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
        self.token = secrets.token_urlsafe(32)
        self.context = context
        self.hosts = allowed_hosts(address, self.server_address[1])
        self.closing = threading.Event()

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.server_address[1]}/"

    def start(self) -> None:
        self.hub.start()

    def close(self) -> None:
        self.closing.set()
        self.hub.stop()
        self.shutdown()
        self.server_close()

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

    def _sse_start(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self._security_headers()
        self.send_header("X-Accel-Buffering", "no")
        self.end_headers()

    def _sse(self, event: str, data: object) -> None:
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def _ping(self) -> None:
        self.wfile.write(b": ping\n\n")
        self.wfile.flush()

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
                self._jobs_stream()
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
                self._log_stream(m[1], m[2], query)
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

    def _jobs_stream(self) -> None:
        hub = self.server.hub
        sub, rows = hub.subscribe()
        try:
            self._sse_start()
            now = dt.datetime.now(dt.UTC)
            self._sse("reset", {"rows": [_row(r, now) for r in rows]})
            while not self.server.closing.is_set():
                try:
                    kind, item = sub.queue.get(timeout=HEARTBEAT)
                except queue.Empty:
                    if sub.dropped:
                        return  # too slow: the page reconnects and starts again
                    self._ping()
                    continue
                now = dt.datetime.now(dt.UTC)
                if kind == "upsert":
                    self._sse("upsert", _row(item, now))
                else:
                    self._sse("delete", {"key": item})
        finally:
            hub.unsubscribe(sub)

    def _load(
        self, kind: ServedKind, ns: str, name: str, *, now: dt.datetime, env_cache: dict[str, str]
    ) -> tuple[dict[str, Any], dict[str, str]]:
        cluster = self.server.cluster
        job = cluster.get_job(kind, ns, name)
        pods = cluster.job_pods(kind, ns, name)
        pod_names = [str(p["metadata"]["name"]) for p in pods]
        events = cluster.job_events(kind, ns, name, pod_names)
        ident = " ".join(f"{p['metadata'].get('uid')}" for p in pods)
        if env_cache.get("ident") != ident or "html" not in env_cache:
            env_cache["ident"], env_cache["html"] = ident, _env(kind, job, pods)
        sections = pages.job_sections(
            kind,
            job,
            pods=pods,
            events=events,
            env=env_cache["html"],
            csrf=self.server.token,
            now=now,
        )
        return job, sections

    def _job_page(self, kind: ServedKind, ns: str, name: str) -> None:
        now = dt.datetime.now(dt.UTC).replace(microsecond=0)
        try:
            job, sections = self._load(kind, ns, name, now=now, env_cache={})
        except ApiFailure as exc:
            status = exc.status if 400 <= exc.status < 600 else 502
            self._page(name, "job", alert(f"{exc.status or 'error'}: {exc.message}"), status)
            return
        # The stream renders ages against the page's time, so a section it sends is the same
        # markup as the page's until the job changes (the page skips what it has already).
        stream = f"{self.path.split('?')[0]}/stream?t={int(now.timestamp())}"
        self._page(f"{kind.kind} {name}", "job", pages.job_page(kind, job, sections, stream=stream))

    def _job_stream(self, kind: ServedKind, ns: str, name: str, since: str) -> None:
        """The page's sections, re-sent when they change (the server looks every POLL s;
        ages are rendered against the page's time, ``since``, and kept current by the page)."""
        self._sse_start()
        start = (
            dt.datetime.fromtimestamp(int(since), dt.UTC)
            if since.isdigit()
            else dt.datetime.now(dt.UTC)
        )
        last: dict[str, str] = {}
        env_cache: dict[str, str] = {}
        quiet = 0.0
        while not self.server.closing.is_set():
            try:
                _, sections = self._load(kind, ns, name, now=start, env_cache=env_cache)
            except ApiFailure as exc:
                if exc.status == 404:
                    self._sse("gone", {"message": f"{kind.kind} {ns}/{name} is gone (deleted)."})
                    return
                self._sse("refused", {"message": f"{exc.status}: {exc.message}"})
                sections = {}
            changed = {k: v for k, v in sections.items() if last.get(k) != v}
            if changed:
                last.update(changed)
                self._sse("sections", changed)
                quiet = 0.0
            else:
                quiet += POLL
                if quiet >= HEARTBEAT:
                    self._ping()
                    quiet = 0.0
            self.server.closing.wait(POLL)

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

    # ------------------------------------------------------------------ logs

    def _log_stream(self, ns: str, pod: str, query: Mapping[str, str]) -> None:
        """A pod's log as events of lines. A reader thread reads the API's stream, so this
        one can send heartbeats and notice a closed page, then end the API's stream."""
        self._sse_start()
        try:
            resp = self.server.cluster.open_log(
                ns,
                pod,
                container=query.get("container") or None,
                follow=query.get("follow") == "1",
                previous=query.get("previous") == "1",
                tail_lines=LOG_TAIL,
            )
        except ApiFailure as exc:
            self._sse("failed", {"message": f"{exc.status}: {exc.message}"})
            return
        lines: queue.Queue[str | None] = queue.Queue(maxsize=1000)

        def read() -> None:
            buffer = b""
            try:
                for chunk in resp.stream(4096, decode_content=True):
                    buffer += chunk
                    *done, buffer = buffer.split(b"\n")
                    for line in done:
                        lines.put(line.decode(errors="replace"))
                if buffer:
                    lines.put(buffer.decode(errors="replace"))
            except Exception:  # aborted below, or the API ended it
                pass
            finally:
                lines.put(None)

        threading.Thread(target=read, name=f"kfjob-ui-log {ns}/{pod}", daemon=True).start()
        try:
            while not self.server.closing.is_set():
                try:
                    first = lines.get(timeout=HEARTBEAT)
                except queue.Empty:
                    self._ping()
                    continue
                batch = [first]
                while first is not None and len(batch) < 500:
                    try:
                        batch.append(lines.get_nowait())
                    except queue.Empty:
                        break
                    if batch[-1] is None:
                        break
                text = [b for b in batch if b is not None]
                if text:
                    self._sse("lines", text)
                if batch[-1] is None:
                    self._sse("end", {"message": "The log ended."})
                    return
        finally:
            abort(resp)


def _row(row: Any, now: dt.datetime) -> dict[str, str]:
    return {
        "key": row.key,
        "kind": row.kind,
        "namespace": row.namespace,
        "state": row.state,
        "html": job_row_html(row, now=now),
    }


def _env(kind: ServedKind, job: dict[str, Any], pods: list[dict[str, Any]]) -> str:
    """The env of the job's pods; with none (suspended, not yet created), the env the
    operator would write, rendered offline from the job's spec."""
    if pods or kind.job_kind is None:
        return pages.env_html(pods)
    spec_only = {k: v for k, v in job.items() if k != "status"}
    try:
        rendered = render_job(spec_only, controller=kind.job_kind.controller())
    except RenderError as exc:
        return f'<p class="note">{esc(f"No pods, and the job does not render: {exc}")}</p>'
    return pages.env_html(
        rendered.pods, note="No pods now: the env the operator writes, rendered offline."
    )
