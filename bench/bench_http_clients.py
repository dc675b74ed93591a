"""CPU per Kubernetes API request of HTTP client libraries, against a real kube-apiserver.

Is replacing aiohttp in :class:`KubeApi` worth it? This starts one API server and etcd
(:class:`ControlPlane`, as ``bench_requests.py`` does) and drives the same requests through:

``kubeapi``
    :class:`KubeApi` as the operator uses it (no rate limiter, no metrics): the product path,
    on :mod:`jobcontroller.runtime.http1` since this bench was first run (on aiohttp then).
``aiohttp``
    a bare ``aiohttp.ClientSession`` with the settings and timeouts ``KubeApi`` had on aiohttp.
``httptools``
    a minimal HTTP/1.1 keep-alive client defined here: an ``asyncio.Protocol`` feeding
    ``httptools.HttpResponseParser`` (which de-chunks), a pool of 20 connections, one write per
    request, a read timeout per request (a timer), nothing else.
``httpx``, ``httpx-h2``
    httpx over HTTP/1.1 and over HTTP/2 (one multiplexed connection), for reference; only when
    importable (``uv run --frozen --with 'httpx[http2]' ...``).

Every client uses the kubeconfig's TLS context (client certificate auth) and its auth headers;
bodies are encoded and answers decoded with :mod:`jobcontroller.runtime.codec` (orjson), as
``KubeApi`` does. httpx sets ALPN protocols on the context it is given, which would switch the
others to HTTP/2, so each httpx client gets its own context loaded from the same kubeconfig.

A round, per client: ``--pods`` pods created (``bench_requests.pod`` bodies), each read back
with a GET, each deleted (``gracePeriodSeconds: 0``), at concurrency 20 on one uvloop event
loop (the operator's). Every answer's status must be 201 (create) or 200 (get, delete) and
carry the pod's name, or the bench fails; after each round a list checks that the pods are gone
(outside the measurement). CPU is the process's (``time.process_time()``), so the API server,
etcd and other load on the machine do not count; it is divided by the round's requests. After
one warm-up round per client (which also opens the connections), ``--rounds`` rounds are run
with the clients interleaved, their order rotated every round; per client the median over
rounds is printed with the min and max.

Usage: ``uv run --frozen --with httptools --with 'httpx[http2]' python
bench/bench_http_clients.py [--pods 200] [--rounds 7] [--reverse] [--json PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import statistics
import time
from collections import deque
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

import aiohttp
import httptools
from bench_requests import CONCURRENCY, NS, pod

from jobcontroller.runtime import codec
from jobcontroller.runtime.kube import NAMESPACES, PODS, ApiSettings, KubeApi
from jobcontroller.runtime.kubeconfig import ClusterConfig, load_config
from jobcontroller.runtime.runner import run_loop
from jobcontroller.testing.controlplane import ControlPlane

DELETE_OPTIONS = {
    "kind": "DeleteOptions",
    "apiVersion": "v1",
    "propagationPolicy": "Background",
    "gracePeriodSeconds": 0,
}
READ_TIMEOUT = 60.0
PHASE_TIMEOUT = 300.0


class BenchFailure(RuntimeError):
    pass


def expect(status: int, wanted: int, data: bytes, what: str) -> Any:
    if status != wanted:
        raise BenchFailure(f"{what}: HTTP {status} (wanted {wanted}): {data[:300]!r}")
    return codec.loads(data)


def check_name(obj: Any, name: str, what: str) -> None:
    if not isinstance(obj, dict) or obj.get("metadata", {}).get("name") != name:
        raise BenchFailure(f"{what}: answer is not pod {name}: {str(obj)[:300]}")


class Client(Protocol):
    async def create(self, body: dict[str, Any]) -> None: ...
    async def get(self, name: str) -> None: ...
    async def delete(self, name: str) -> None: ...
    async def close(self) -> None: ...


def pods_path(name: str | None = None) -> str:
    return PODS.path(namespace=NS, name=name)


# -- 1: KubeApi ----------------------------------------------------------------------------------


class KubeApiClient:
    def __init__(self, config: ClusterConfig) -> None:
        self.api = KubeApi(config, qps=0)

    async def create(self, body: dict[str, Any]) -> None:
        name = body["metadata"]["name"]
        check_name(await self.api.create(PODS, body, namespace=NS), name, "create")

    async def get(self, name: str) -> None:
        check_name(await self.api.get(PODS, name, namespace=NS), name, "get")

    async def delete(self, name: str) -> None:
        # KubeApi raises on any status outside 2xx and returns nothing.
        await self.api.delete(PODS, name, namespace=NS, grace_period_seconds=0)

    async def close(self) -> None:
        await self.api.close()


class _RawClient:
    """The verbs over one ``_call`` (method, path, body, wanted status) -> decoded answer."""

    async def _call(self, method: str, path: str, body: Any, wanted: int, what: str) -> Any:
        raise NotImplementedError

    async def create(self, body: dict[str, Any]) -> None:
        obj = await self._call("POST", pods_path(), body, 201, "create")
        check_name(obj, body["metadata"]["name"], "create")

    async def get(self, name: str) -> None:
        check_name(await self._call("GET", pods_path(name), None, 200, "get"), name, "get")

    async def delete(self, name: str) -> None:
        obj = await self._call("DELETE", pods_path(name), DELETE_OPTIONS, 200, "delete")
        check_name(obj, name, "delete")


# -- 2: bare aiohttp -----------------------------------------------------------------------------


class AiohttpClient(_RawClient):
    def __init__(self, config: ClusterConfig, headers: dict[str, str]) -> None:
        self.config = config
        self.host = config.host.rstrip("/")
        self.headers = headers
        settings = ApiSettings()  # the timeouts KubeApi had on aiohttp
        self.timeout = aiohttp.ClientTimeout(
            total=None,
            connect=settings.connect_timeout,
            sock_connect=settings.connect_timeout,
            sock_read=settings.read_timeout,
        )
        self.session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(
                limit=100, ssl=config.ssl_context if config.ssl_context is not None else False
            ),
            trust_env=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding"),
            cookie_jar=aiohttp.DummyCookieJar(),
            auto_decompress=False,
        )

    async def _call(self, method: str, path: str, body: Any, wanted: int, what: str) -> Any:
        async with self.session.request(
            method,
            self.host + path,
            data=None if body is None else codec.dumps(body),
            headers=self.headers,
            timeout=self.timeout,
            server_hostname=self.config.server_hostname,
        ) as resp:
            data = await resp.read()
            return expect(resp.status, wanted, data, what)

    async def close(self) -> None:
        await self.session.close()


# -- 3: asyncio Protocol + httptools -------------------------------------------------------------


class _Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection, one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, bytes, bool]] | None = None
        self.chunks: list[bytes] = []
        self.closed = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's SSL transport

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(exc)
            if self.transport is not None:
                self.transport.close()

    # httptools calls only the callbacks defined.
    def on_body(self, body: bytes) -> None:
        self.chunks.append(body)

    def on_message_complete(self) -> None:
        waiter, self.waiter = self.waiter, None
        data = b"".join(self.chunks)
        self.chunks = []
        if waiter is not None and not waiter.done():
            status = self.parser.get_status_code()
            waiter.set_result((status, data, self.parser.should_keep_alive()))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(exc or ConnectionResetError("connection closed by the server"))

    def _fail(self, exc: BaseException) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    async def send(self, request: bytes) -> tuple[int, bytes, bool]:
        assert self.transport is not None
        loop = asyncio.get_running_loop()
        self.waiter = waiter = loop.create_future()
        self.transport.write(request)
        timer = loop.call_later(READ_TIMEOUT, self._fail, TimeoutError("read timeout"))
        try:
            return await waiter
        finally:
            timer.cancel()


class HttptoolsClient(_RawClient):
    def __init__(self, config: ClusterConfig, headers: dict[str, str], size: int) -> None:
        url = urlsplit(config.host)
        self.tls = url.scheme == "https"
        self.address = (url.hostname or "localhost", url.port or (443 if self.tls else 80))
        self.context = config.ssl_context
        self.server_hostname = config.server_hostname
        self.size = size
        self.idle: list[_Connection] = []
        self.opened = 0
        self.waiters: deque[asyncio.Future[None]] = deque()
        fixed = "".join(f"{k}: {v}\r\n" for k, v in headers.items() if k != "Content-Type")
        self.fixed = f"Host: {url.netloc}\r\n{fixed}"

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(
            _Connection,
            *self.address,
            ssl=self.context if self.tls else None,
            server_hostname=(self.server_hostname or self.address[0]) if self.tls else None,
        )
        return conn

    async def _acquire(self) -> _Connection:
        while True:
            while self.idle:
                conn = self.idle.pop()
                if not conn.closed:
                    return conn
                self.opened -= 1
            if self.opened < self.size:
                self.opened += 1
                try:
                    return await self._connect()
                except BaseException:
                    self.opened -= 1
                    raise
            waiter = asyncio.get_running_loop().create_future()
            self.waiters.append(waiter)
            await waiter

    def _release(self, conn: _Connection, reuse: bool) -> None:
        if reuse and not conn.closed:
            self.idle.append(conn)
        else:
            self.opened -= 1
            if conn.transport is not None:
                conn.transport.close()
        while self.waiters:
            waiter = self.waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                break

    async def request(
        self, method: str, path: str, body: Any, content_type: str = "application/json"
    ) -> tuple[int, bytes]:
        head = f"{method} {path} HTTP/1.1\r\n{self.fixed}Content-Type: {content_type}\r\n"
        if body is None:
            request = f"{head}\r\n".encode()
        else:
            data = codec.dumps(body)
            request = f"{head}Content-Length: {len(data)}\r\n\r\n".encode() + data
        conn = await self._acquire()
        reuse = False
        try:
            status, answer, reuse = await conn.send(request)
        finally:
            self._release(conn, reuse)
        return status, answer

    async def _call(self, method: str, path: str, body: Any, wanted: int, what: str) -> Any:
        status, data = await self.request(method, path, body)
        return expect(status, wanted, data, what)

    async def close(self) -> None:
        for conn in self.idle:
            if conn.transport is not None:
                conn.transport.close()
        self.idle.clear()


# -- 4: httpx (reference) ------------------------------------------------------------------------


class HttpxClient(_RawClient):
    def __init__(
        self, config: ClusterConfig, context: ssl.SSLContext, headers: dict[str, str], h2: bool
    ) -> None:
        import httpx

        self.client = httpx.AsyncClient(
            base_url=config.host.rstrip("/"),
            verify=context,
            http2=h2,
            trust_env=False,
            headers=headers,
            timeout=httpx.Timeout(READ_TIMEOUT),
        )
        self.h2 = h2

    async def _call(self, method: str, path: str, body: Any, wanted: int, what: str) -> Any:
        resp = await self.client.request(
            method, path, content=None if body is None else codec.dumps(body)
        )
        if self.h2 and resp.http_version != "HTTP/2":
            raise BenchFailure(f"{what}: httpx-h2 spoke {resp.http_version}")
        return expect(resp.status_code, wanted, resp.content, what)

    async def close(self) -> None:
        await self.client.aclose()


# -- the rounds ----------------------------------------------------------------------------------


async def bounded(calls: list[Callable[[], Awaitable[None]]]) -> None:
    queue = list(reversed(calls))

    async def worker() -> None:
        while queue:
            await queue.pop()()

    async with asyncio.timeout(PHASE_TIMEOUT):
        await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))


async def one_round(client: Client, checker: KubeApi, prefix: str, count: int) -> tuple[float, int]:
    """(CPU seconds, requests) of one round."""
    names = [f"{prefix}-{i:04d}" for i in range(count)]
    bodies = [pod(n) for n in names]  # built before the clock starts, as a caller's would be
    started = time.process_time()
    await bounded([lambda b=b: client.create(b) for b in bodies])
    await bounded([lambda n=n: client.get(n) for n in names])
    await bounded([lambda n=n: client.delete(n) for n in names])
    cpu = time.process_time() - started
    left, _ = await checker.list(PODS, namespace=NS)
    mine = set(names)
    if stray := [p["metadata"]["name"] for p in left if p["metadata"]["name"] in mine]:
        raise BenchFailure(f"{len(stray)} pods of round {prefix} still there: {stray[:5]}")
    return cpu, 3 * count


def have_httpx() -> bool:
    try:
        import h2  # noqa: F401
        import httpx  # noqa: F401
    except ImportError:
        return False
    return True


async def bench(
    kubeconfig: Path, count: int, rounds: int, reverse: bool, only: list[str] | None
) -> tuple[dict[str, list[tuple[float, int]]], list[str]]:
    config = load_config(str(kubeconfig))
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": "jobcontroller",
        **(await config.auth_headers()),
    }
    makers: dict[str, Callable[[], Client]] = {
        "kubeapi": lambda: KubeApiClient(config),
        "aiohttp": lambda: AiohttpClient(config, headers),
        "httptools": lambda: HttptoolsClient(config, headers, CONCURRENCY),
    }
    skipped = []
    if have_httpx():
        for label, h2 in (("httpx", False), ("httpx-h2", True)):
            own = load_config(str(kubeconfig)).ssl_context
            assert own is not None
            makers[label] = lambda own=own, h2=h2: HttpxClient(config, own, headers, h2)
    else:
        skipped.append("httpx (not importable: run with --with 'httpx[http2]')")
    names = [n for n in makers if only is None or n in only]
    if reverse:
        names.reverse()
    clients = {n: makers[n]() for n in names}
    results: dict[str, list[tuple[float, int]]] = {n: [] for n in names}
    async with KubeApi(config, qps=0) as checker:
        await checker.create(NAMESPACES, {"metadata": {"name": NS}})
        try:
            for i, n in enumerate(names):
                await one_round(clients[n], checker, f"warm{i}", min(count, 50))
            for r in range(rounds):
                shift = r % len(names)
                for n in names[shift:] + names[:shift]:
                    cpu, requests = await one_round(clients[n], checker, f"r{r}-{n}", count)
                    results[n].append((cpu, requests))
                    print(f"  round {r} {n:10s} {cpu * 1e6 / requests:8.1f} µs", flush=True)
        finally:
            for client in clients.values():
                await client.close()
    return results, skipped


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--reverse", action="store_true", help="reverse the clients' order")
    parser.add_argument("--only", nargs="+", default=None, help="clients to run")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--label", default="")
    args = parser.parse_args()
    wall = time.monotonic()
    with ControlPlane() as plane:
        results, skipped = run_loop(
            bench(plane.kubeconfig, args.pods, args.rounds, args.reverse, args.only)
        )
    summary: dict[str, Any] = {}
    for name, rounds in results.items():
        per_request = [cpu * 1e6 / requests for cpu, requests in rounds]
        median = statistics.median(per_request)
        requests = sum(requests for _, requests in rounds)
        print(
            f"{name:10s} {median:7.1f} µs CPU/request (median of {len(rounds)} rounds; "
            f"min {min(per_request):.1f}, max {max(per_request):.1f}), {requests} requests"
        )
        summary[name] = {
            "us_cpu_per_request": [round(x, 1) for x in per_request],
            "median_us_cpu_per_request": round(median, 1),
            "requests": requests,
        }
    for what in skipped:
        print(f"skipped: {what}")
    print(f"wall time {time.monotonic() - wall:.0f} s")
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "label": args.label,
                    "pods_per_round": args.pods,
                    "concurrency": CONCURRENCY,
                    "clients": summary,
                },
                indent=2,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
