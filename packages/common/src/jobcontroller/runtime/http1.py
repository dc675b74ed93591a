"""HTTP/1.1 to the API server: asyncio transports and the ``httptools`` parser, nothing else.

Every request and watch of :class:`~jobcontroller.runtime.kube.KubeApi` goes through one
:class:`Pool`. It exists for CPU: the same creates, GETs and deletes against a real API server
cost 179 µs of CPU each through aiohttp's ``ClientSession`` and about half that here
(``bench/bench_http_clients.py``), because a request to one known server needs none of a
general client's layers (URL objects, cookie jars, tracing hooks, multi-dicts, a stream reader
per response, redirects, content decoding). What it does:

* keep-alive connections, at most ``limit`` open, reused last-in first-out; one that the server
  closed (or that answered ``Connection: close``) is never reused, nor one idle for more than
  ``keepalive`` seconds (15, aiohttp's default: a connection a NAT or load balancer dropped
  silently would otherwise take a request with it);
* TLS with the caller's ``SSLContext`` and server name, the TLS handshake inside the connect
  timeout;
* an HTTP proxy: ``CONNECT`` tunnels for an ``https`` server (with ``Proxy-Authorization``
  when given), the absolute-form request target for a plain-``http`` one;
* a read timeout that is socket silence, as aiohttp's ``sock_read``: a long answer that keeps
  arriving is not cut; a paused stream (its reader is behind) is not silence;
* streams (watches) read line by line, with a cap on one line, reading paused while more than
  :data:`_PAUSE_LINES` lines wait for the reader, and a bound on a wait for the next line.

Failures are :class:`HttpError` (a ``ConnectionError``): :class:`ConnectFailed` when no
connection was made, so the request was never sent (retrying a POST is safe), and
:class:`Disconnected` when it broke after the request was written (the server may have acted).
A read timeout is ``TimeoutError``. A request cancelled half-way closes its connection.
"""

from __future__ import annotations

import asyncio
import collections
import select
import ssl
from collections.abc import Callable, Iterator, Mapping
from urllib.parse import urlsplit

import httptools
from typing_extensions import override

__all__ = ["ConnectFailed", "Disconnected", "Headers", "HttpError", "Pool", "Response", "Stream"]

#: A stream's reader may fall this many complete lines behind before reading is paused.
_PAUSE_LINES = 256
_RESUME_LINES = 64


class HttpError(ConnectionError):
    """The connection failed before an answer was read whole."""


class ConnectFailed(HttpError):
    """No connection (refused, unreachable, timed out, TLS handshake or proxy refused): the
    request was never sent."""


class Disconnected(HttpError):
    """The connection broke, or the answer could not be parsed, after the request was sent:
    the server may have acted on it."""


class LineSilence(TimeoutError):
    """No line of a stream within its ``line_timeout``."""


class Headers(Mapping[str, str]):
    """An answer's headers; lookups ignore case. A repeated header's values are joined with
    ``, ``."""

    __slots__ = ("raw",)

    def __init__(self) -> None:
        self.raw: dict[str, str] = {}
        """By lower-case name."""

    @override
    def __getitem__(self, key: str) -> str:
        return self.raw[key.lower()]

    @override
    def __iter__(self) -> Iterator[str]:
        return iter(self.raw)

    @override
    def __len__(self) -> int:
        return len(self.raw)


class Response:
    """A whole answer."""

    __slots__ = ("body", "headers", "reason", "status")

    def __init__(self, status: int, reason: str, headers: Headers, body: bytes) -> None:
        self.status = status
        self.reason = reason
        self.headers = headers
        self.body = body


class _Conn(asyncio.Protocol):
    """One connection and the answer in flight on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._parser = httptools.HttpResponseParser(self)
        self._timer: asyncio.TimerHandle | None = None
        self._read_timeout = 0.0
        self._last_read = 0.0
        self.idle_since = 0.0
        self.uses = 0
        self._begin()

    def _begin(self) -> None:
        self.status = 0
        self.reason = ""
        self.headers = Headers()
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.error: BaseException | None = None
        self._until_eof = False
        self.got_bytes = False
        self.unsent = False
        self._body: list[bytes] = []
        self._waiter: asyncio.Future[None] | None = None
        # Stream mode (a watch): lines instead of one body.
        self.lines: collections.deque[bytes] | None = None
        self._partial: list[bytes] = []
        self._partial_len = 0
        self._max_line = 0
        self._line_timeout = 0.0
        self._last_line = 0.0
        self._paused = False
        self._may_pause = True

    # -- sending and waiting ------------------------------------------------------------------

    def send(self, data: bytes, read_timeout: float) -> None:
        assert self.transport is not None
        if self._paused:  # a stream that ended while its reader was behind
            self.transport.resume_reading()
        self._begin()
        self.uses += 1
        self._read_timeout = read_timeout
        self._last_read = self._loop.time()
        self._arm(self._last_read + read_timeout)
        self.transport.write(data)
        # The loop writes at once what the socket takes; a write that failed there (the peer
        # had reset the connection) closed the transport already: nothing was sent.
        self.unsent = self.transport.is_closing()

    def streaming(self, max_line: int, line_timeout: float) -> None:
        self.lines = collections.deque()
        self._max_line = max_line
        self._line_timeout = line_timeout
        self._last_line = self._loop.time()

    async def wait_until(self, done: Callable[[], bool]) -> None:
        """Until ``done()``; the connection's error, when it has one first."""
        while not done():
            if self.error is not None:
                raise self.error
            self._waiter = self._loop.create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None

    async def wait_complete(self) -> None:
        await self.wait_until(self._is_complete)

    def _is_complete(self) -> bool:
        return self.complete

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self._wake()

    def body(self) -> bytes:
        return b"".join(self._body)

    # -- timers -------------------------------------------------------------------------------

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._check)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _check(self) -> None:
        self._timer = None
        if self.complete or self.error is not None or self.closed:
            return
        now = self._loop.time()
        if self._paused:  # the reader is behind: the socket is not being read, so not silent
            self._last_read = now
        due = self._last_read + self._read_timeout
        if now >= due:
            self.fail(TimeoutError(f"no data from the API server for {self._read_timeout:g}s"))
            self.abort()
            return
        if self.lines is not None and self._waiter is not None and not self.lines:
            # The reader waits for a line (waiting_for_line armed this check for it).
            line_due = self._last_line + self._line_timeout
            if now >= line_due:
                self.fail(LineSilence(f"no line for {self._line_timeout:g}s"))
                return
            due = min(due, line_due)
        self._arm(due)

    def waiting_for_line(self) -> None:
        """The reader waits for a line from now: its silence is counted from here."""
        self._last_line = self._loop.time()
        if self._timer is None or self._timer.when() > self._last_line + self._line_timeout:
            self._arm(self._last_line + self._line_timeout)

    # -- asyncio.Protocol ---------------------------------------------------------------------

    @override
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    @override
    def data_received(self, data: bytes) -> None:
        self._last_read = self._loop.time()
        self.got_bytes = True
        try:
            self._parser.feed_data(data)
        except Exception as exc:  # httptools' parse errors, a line too long
            self.fail(Disconnected(f"an answer that is not HTTP/1.1: {exc!r}"))
            self.abort()

    @override
    def eof_received(self) -> bool:
        return False  # close the transport

    @override
    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.disarm()
        if self.headers_done and self._until_eof and not self.complete:
            self.complete = True  # an answer delimited by the end of the connection
            self.keep_alive = False
            self._wake()
            return
        if not self.complete:
            self.fail(Disconnected(f"the API server closed the connection: {exc or 'EOF'}"))

    def abort(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    # -- httptools callbacks ------------------------------------------------------------------

    def on_status(self, status: bytes) -> None:
        self.reason = status.decode("latin-1")

    def on_header(self, name: bytes, value: bytes) -> None:
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        raw = self.headers.raw
        old = raw.get(key)
        raw[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        self.status = self._parser.get_status_code()
        self.headers_done = True
        raw = self.headers.raw
        self._until_eof = (
            self.status not in (204, 304)
            and "content-length" not in raw
            and "chunked" not in raw.get("transfer-encoding", "")
        )
        self._wake()

    def on_body(self, data: bytes) -> None:
        lines = self.lines
        if lines is None:
            self._body.append(data)
            return
        parts = data.split(b"\n")
        if len(parts) > 1:
            if self._partial:
                self._partial.append(parts[0])
                parts[0] = b"".join(self._partial)
                self._partial = []
            for line in parts[:-1]:
                if line and not line.isspace():
                    lines.append(line)
            self._partial_len = 0
            self._last_line = self._last_read
            if (
                len(lines) > _PAUSE_LINES
                and self._may_pause
                and not self._paused
                and self.transport is not None
            ):
                self._paused = True
                self.transport.pause_reading()
            self._wake()
        tail = parts[-1]
        if tail:
            self._partial.append(tail)
            self._partial_len += len(tail)
            if self._partial_len > self._max_line:
                self.fail(Disconnected(f"a line longer than {self._max_line} bytes"))
                raise ValueError("line too long")  # stops the parser; data_received aborts

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self._parser.should_keep_alive()
        self.disarm()
        if self.lines is not None and self._partial:
            line = b"".join(self._partial)
            self._partial = []
            if not line.isspace():
                self.lines.append(line)
        self._wake()

    def read_whole(self) -> None:
        """The reader takes the rest at once (an error's body): reading is never paused."""
        self._may_pause = False
        if self._paused:
            self._paused = False
            self._last_read = self._loop.time()
            if self.transport is not None:
                self.transport.resume_reading()

    def alive(self) -> bool:
        """Whether this idle connection can carry a request: open, and nothing to read on it
        (an idle connection that is readable holds the server's close or reset, which the loop
        may not have seen yet), as urllib3 checks a pooled connection."""
        transport = self.transport
        if self.closed or transport is None or transport.is_closing():
            return False
        sock = transport.get_extra_info("socket")
        if sock is None:
            return True
        try:
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN)
            return not poller.poll(0)
        except (OSError, ValueError):
            return False

    def took_line(self) -> None:
        if self._paused and self.lines is not None and len(self.lines) < _RESUME_LINES:
            self._paused = False
            self._last_read = self._loop.time()
            if self.transport is not None:
                self.transport.resume_reading()


class Stream:
    """An answer read line by line (a watch). Close it when done; a stream read to its end
    gives its connection back to the pool."""

    def __init__(self, pool: Pool, conn: _Conn) -> None:
        self._pool = pool
        self._conn: _Conn | None = conn
        self.status = conn.status
        self.reason = conn.reason
        self.headers = conn.headers

    async def next_line(self) -> bytes | None:
        """The next non-blank line, or None at the end of the answer. :class:`LineSilence`
        when none comes within the stream's line timeout."""
        conn = self._conn
        if conn is None:
            return None
        lines = conn.lines
        assert lines is not None
        if not lines:
            if conn.complete:
                return None
            conn.waiting_for_line()
            await conn.wait_until(lambda: bool(lines) or conn.complete)
            if not lines:
                return None
        line = lines.popleft()
        conn.took_line()
        return line

    async def read(self) -> bytes:
        """The rest of the answer whole (an error answer's body)."""
        conn = self._conn
        if conn is None:
            return b""
        conn.read_whole()
        await conn.wait_complete()
        lines = conn.lines or ()
        return b"\n".join(lines)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            lines = conn.lines
            self._pool._release(conn, reuse=conn.complete and conn.keep_alive and not lines)

    async def __aenter__(self) -> Stream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.close()


class Pool:
    """Keep-alive connections to one server."""

    def __init__(
        self,
        url: str,
        *,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None = None,
        limit: int = 100,
        connect_timeout: float = 10.0,
        keepalive: float = 15.0,
        proxy: str | None = None,
        proxy_headers: Mapping[str, str] | None = None,
    ) -> None:
        parts = urlsplit(url)
        self._tls = parts.scheme == "https"
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL of a server: {url!r}")
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._ssl = ssl_context if self._tls else None
        if self._tls and self._ssl is None:
            # A kubeconfig with insecure-skip-tls-verify: TLS without verification.
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            self._ssl = ctx
        self._server_hostname = server_hostname if self._tls else None
        self._host_header = parts.netloc
        self._prefix = parts.path.rstrip("/")
        self._limit = limit
        self._connect_timeout = connect_timeout
        self._keepalive = keepalive
        self._proxy: tuple[str, int] | None = None
        self._proxy_header = ""
        if proxy:
            p = urlsplit(proxy)
            if p.scheme != "http" or not p.hostname:
                raise ValueError(
                    f"proxy {proxy!r}: only an http:// proxy is supported (CONNECT for https)"
                )
            self._proxy = (p.hostname, p.port or 80)
            # Credentials come as headers (KubeApi takes them out of the proxy's URL).
            self._proxy_header = "".join(f"{k}: {v}\r\n" for k, v in (proxy_headers or {}).items())
        self._idle: list[_Conn] = []
        self._conns: set[_Conn] = set()
        """Every open connection, idle or in use."""
        self._slots: asyncio.Semaphore | None = None
        self._closed = False

    # -- the two ways to ask ------------------------------------------------------------------

    async def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        read_timeout: float,
    ) -> Response:
        """One request, its answer read whole. ``target`` is the path and query.

        A kept-alive connection is checked before it is used (:meth:`_Conn.alive`); one that
        the server reset after that check, so that the write itself failed and nothing was
        sent, is replaced by a new one for every method, as Go's transport does (its
        ``nothingWrittenError``). The loop reports a failed write at once on a plain
        connection; over TLS it reports it later, as a lost connection (:class:`Disconnected`)."""
        data = self._head(method, target, headers, body)
        while True:
            conn = await self._acquire()
            reuse = False
            try:
                conn.send(data, read_timeout)
                if not conn.complete:
                    await conn.wait_complete()
                reuse = conn.keep_alive
                return Response(conn.status, conn.reason, conn.headers, conn.body())
            except Disconnected:
                if conn.uses > 1 and conn.unsent and not conn.got_bytes:
                    continue  # released (not reused) below; a new connection next
                raise
            finally:
                self._release(conn, reuse=reuse)

    async def stream(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        *,
        read_timeout: float,
        max_line: int,
        line_timeout: float,
    ) -> Stream:
        """A request whose answer is read line by line; returns once its headers are in."""
        conn = await self._acquire()
        try:
            conn.send(self._head(method, target, headers, None), read_timeout)
            conn.streaming(max_line, line_timeout)
            await conn.wait_until(lambda: conn.headers_done)
        except BaseException:
            self._release(conn, reuse=False)
            raise
        return Stream(self, conn)

    def _head(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        if self._proxy is not None and not self._tls:
            target = self._origin + self._prefix + target
            extra = self._proxy_header
        else:
            target = self._prefix + target
            extra = ""
        lines = [f"{method} {target} HTTP/1.1\r\nHost: {self._host_header}\r\n{extra}"]
        lines.extend(f"{k}: {v}\r\n" for k, v in headers.items())
        if body is None:
            lines.append("\r\n" if method in ("GET", "HEAD") else "Content-Length: 0\r\n\r\n")
            return "".join(lines).encode("latin-1")
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        return "".join(lines).encode("latin-1") + body

    # -- connections --------------------------------------------------------------------------

    async def _acquire(self) -> _Conn:
        if self._closed:
            raise ConnectFailed("the client is closed")
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._limit)
        if self._slots.locked():
            # Every connection is in use: a wait for one counts as connecting.
            try:
                async with asyncio.timeout(self._connect_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise ConnectFailed(
                    f"no free connection of {self._limit} in {self._connect_timeout:g}s"
                ) from None
        else:
            await self._slots.acquire()
        try:
            stale = asyncio.get_running_loop().time() - self._keepalive
            while self._idle:
                conn = self._idle.pop()
                if conn.idle_since > stale and conn.alive():
                    return conn
                self._conns.discard(conn)
                conn.abort()
            conn = await self._connect()
        except BaseException:
            self._slots.release()
            raise
        self._conns.add(conn)
        return conn

    def _release(self, conn: _Conn, *, reuse: bool) -> None:
        conn.disarm()
        if reuse and not conn.closed and not self._closed:
            conn.idle_since = conn._loop.time()
            self._idle.append(conn)
        else:
            self._conns.discard(conn)
            conn.abort()
        assert self._slots is not None
        self._slots.release()

    async def _connect(self) -> _Conn:
        loop = asyncio.get_running_loop()
        conn = _Conn(loop)
        where = f"{self._host}:{self._port}"
        try:
            async with asyncio.timeout(self._connect_timeout):
                if self._proxy is None:
                    await loop.create_connection(
                        lambda: conn,
                        self._host,
                        self._port,
                        ssl=self._ssl,
                        server_hostname=self._server_hostname,
                        ssl_handshake_timeout=self._connect_timeout if self._ssl else None,
                    )
                else:
                    await self._through_proxy(loop, conn)
        except TimeoutError:
            conn.abort()
            raise ConnectFailed(f"connecting to {where}: timed out") from None
        except OSError as exc:  # ssl.SSLError included
            conn.abort()
            if isinstance(exc, ConnectFailed):
                raise
            raise ConnectFailed(f"connecting to {where}: {exc}") from exc
        return conn

    async def _through_proxy(self, loop: asyncio.AbstractEventLoop, conn: _Conn) -> None:
        phost, pport = self._proxy  # type: ignore[misc]
        if not self._tls:
            await loop.create_connection(lambda: conn, phost, pport)
            return
        tunnel = _Tunnel(loop)
        transport, _ = await loop.create_connection(lambda: tunnel, phost, pport)
        target = f"{self._host}:{self._port}"
        transport.write(
            f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{self._proxy_header}\r\n".encode(
                "latin-1"
            )
        )
        try:
            status = await tunnel.answer
            if status != 200:
                raise ConnectFailed(f"the proxy {phost}:{pport} refused CONNECT: {status}")
            tls = await loop.start_tls(
                transport,
                conn,
                self._ssl,  # type: ignore[arg-type]
                server_hostname=self._server_hostname or self._host,
                ssl_handshake_timeout=self._connect_timeout,
            )
        except BaseException:
            transport.abort()
            raise
        assert tls is not None
        conn.connection_made(tls)

    async def close(self) -> None:
        """Closes every connection: requests and streams still using one fail with
        :class:`Disconnected`."""
        self._closed = True
        self._idle = []
        conns, self._conns = self._conns, set()
        for conn in conns:
            conn.fail(Disconnected("the client was closed"))
            conn.abort()


class _Tunnel(asyncio.Protocol):
    """A proxy's answer to CONNECT: its status code, once the blank line after it is in."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.answer: asyncio.Future[int] = loop.create_future()
        self._buf = b""

    @override
    def data_received(self, data: bytes) -> None:
        if self.answer.done():
            return
        self._buf += data
        if b"\r\n\r\n" in self._buf:
            first = self._buf.split(b"\r\n", 1)[0].split()
            try:
                self.answer.set_result(int(first[1]))
            except (IndexError, ValueError):
                self.answer.set_exception(ConnectFailed(f"bad answer to CONNECT: {first!r}"))
        elif len(self._buf) > 65536:
            self.answer.set_exception(ConnectFailed("the proxy's answer to CONNECT is too long"))

    @override
    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(ConnectFailed(f"the proxy closed the connection: {exc}"))
