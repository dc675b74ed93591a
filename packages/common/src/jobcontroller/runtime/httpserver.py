"""A small HTTP/1.1 server on asyncio and the ``httptools`` parser, for the operator's own
endpoints: ``/metrics`` and the probes (:mod:`jobcontroller.runtime.server`) and the
training-progress endpoint (:mod:`jobcontroller.controller.progressserver`).

Those serve a handful of routes with small answers, so a web framework is more than they
need: aiohttp's server and client were 10 MB of every operator's 58 MB at rest. Each
connection reads requests in order (pipelined ones too) and answers them in order, one
handler call at a time. The limits are the ones a server facing pods it does not trust needs:

* a request's line and headers: at most ``max_head`` bytes (431), within ``head_timeout``
  seconds of its first byte (the connection is closed: a slow client holds nothing long);
* a body: at most ``max_body`` bytes, refused as :class:`BodyTooLarge` by
  :meth:`Request.read`, which a handler calls only when it wants the body (after checking
  the caller), so an unauthenticated client cannot make the server buffer one;
* a kept-alive connection idle for ``idle_timeout`` seconds is closed;
* an answer given before its request's body was read closes the connection after it (the
  rest of the body is not read);
* answers wait for the client to read them: while the connection's write buffer is full, no
  further request is read or answered, and more than :data:`_QUEUE_MAX` requests parsed ahead
  of the one being answered close the connection; a connection closing after its answer is
  aborted when the answer is not taken within ``head_timeout`` seconds.

A handler that raises answers 500; one that cannot parse a request answers 400 and closes. A
client that goes away does not cancel its handler (a write it started completes); its answer is
dropped. ``HEAD`` is answered as ``GET`` without the body.
"""

from __future__ import annotations

import asyncio
import collections
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from urllib.parse import unquote

import httptools
import structlog
from typing_extensions import override

from jobcontroller.runtime import codec
from jobcontroller.runtime.http1 import Headers

__all__ = ["BodyTooLarge", "HttpServer", "Reply", "Request", "json_reply", "text_reply"]

log = structlog.get_logger(__name__)

#: Pipelined requests parsed ahead of the one being answered before reading is paused.
_QUEUE_PAUSE = 8
#: Requests parsed ahead from one read before the connection is refused.
_QUEUE_MAX = 64


class BodyTooLarge(Exception):
    """The request's body is larger than the server's ``max_body``."""


class Request:
    """A request: its line and headers at once, its body when :meth:`read` is awaited."""

    __slots__ = (
        "_body",
        "_done",
        "_error",
        "_size",
        "headers",
        "keep_alive",
        "max_body",
        "method",
        "path",
        "query",
    )

    def __init__(self, method: str, target: bytes, headers: Headers, max_body: int) -> None:
        url = httptools.parse_url(target)
        self.method = method
        self.path = unquote(url.path.decode("latin-1")) if url.path else "/"
        self.query = url.query.decode("latin-1") if url.query else ""
        self.headers = headers
        self.max_body = max_body
        self.keep_alive = True
        self._body: list[bytes] = []
        self._size = 0
        self._done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._error: BaseException | None = None

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("Content-Length")
        return int(value) if value is not None and value.isdigit() else None

    @property
    def body_read(self) -> bool:
        return self._done.done()

    async def read(self) -> bytes:
        """The whole body; :class:`BodyTooLarge` past ``max_body`` bytes, ``ConnectionError``
        when the client went away first."""
        await asyncio.shield(self._done)
        if self._error is not None:
            raise self._error
        return b"".join(self._body)

    def _feed(self, data: bytes) -> None:
        if self._error is not None:
            return
        self._size += len(data)
        if self._size > self.max_body:
            self._body = []
            self._end(BodyTooLarge(f"the body exceeds {self.max_body} bytes"))
            return
        self._body.append(data)

    def _end(self, error: BaseException | None = None) -> None:
        if error is not None and self._error is None:
            self._error = error
        if not self._done.done():
            self._done.set_result(None)


class Reply:
    """An answer: a status, a body and its type, and any other headers."""

    __slots__ = ("body", "content_type", "headers", "status")

    def __init__(
        self,
        status: int,
        body: bytes = b"",
        content_type: str = "text/plain; charset=utf-8",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers


def json_reply(data: object, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
    return Reply(status, codec.dumps(data), "application/json", headers)


def text_reply(text: str, status: int = 200) -> Reply:
    return Reply(status, text.encode())


Handler = Callable[[Request], Awaitable[Reply]]


class HttpServer:
    """Serves ``handler`` on listening sockets given to :meth:`listen`."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body: int = 1 << 20,
        max_head: int = 16384,
        head_timeout: float = 10.0,
        idle_timeout: float = 75.0,
    ) -> None:
        self.handler = handler
        self.max_body = max_body
        self.max_head = max_head
        self.head_timeout = head_timeout
        self.idle_timeout = idle_timeout
        self._servers: list[asyncio.AbstractServer] = []
        self._conns: set[_ServerConn] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    async def listen(self, sock: socket.socket, ssl_context: ssl.SSLContext | None = None) -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _ServerConn(self), sock=sock, ssl=ssl_context, start_serving=True
        )
        self._servers.append(server)

    async def close(self) -> None:
        servers, self._servers = self._servers, []
        for server in servers:
            server.close()
        for conn in list(self._conns):
            conn.abort()
        tasks, self._tasks = self._tasks, set()
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
        for server in servers:
            await server.wait_closed()


class _ServerConn(asyncio.Protocol):
    def __init__(self, server: HttpServer) -> None:
        self._server = server
        self._loop = asyncio.get_running_loop()
        self._parser = httptools.HttpRequestParser(self)
        self._transport: asyncio.Transport | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._queue: collections.deque[Request] = collections.deque()
        self._wakeup: asyncio.Future[None] | None = None
        self._paused = False
        self._closing = False
        self._drained: asyncio.Future[None] | None = None
        """Set while the transport's write buffer is full."""
        # The request being parsed.
        self._in_head = False
        self._head_size = 0
        """Bytes of the head the parser handed over (line, names, values)."""
        self._head_raw = 0
        """Bytes received while a head was incomplete (the parser holds a partial header)."""
        self._url: list[bytes] = []
        self._headers = Headers()
        self._current: Request | None = None

    # -- asyncio.Protocol ---------------------------------------------------------------------

    @override
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self._server._conns.add(self)
        self._arm(self._server.idle_timeout)
        task = self._loop.create_task(self._answer_in_order())
        self._server._tasks.add(task)
        task.add_done_callback(self._server._tasks.discard)

    @override
    def data_received(self, data: bytes) -> None:
        if self._closing:
            return
        if self._in_head:
            self._head_raw += len(data)
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._refuse(HTTPStatus.BAD_REQUEST, "protocol upgrades are not served")
        except (httptools.HttpParserError, ValueError) as exc:
            if self._head_size > self._server.max_head:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "headers too large")
            else:
                self._refuse(HTTPStatus.BAD_REQUEST, f"not an HTTP/1.1 request: {exc}")
        else:
            if self._in_head and self._head_raw > self._server.max_head:
                self._refuse(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, "headers too large")

    @override
    def connection_lost(self, exc: Exception | None) -> None:
        self._closing = True
        self._server._conns.discard(self)
        self._disarm()
        lost = ConnectionResetError("the client closed the connection")
        if self._current is not None:
            self._current._end(lost)
        for request in self._queue:
            request._end(lost)
        # A handler under way finishes (its answer is dropped); a wait for work ends.
        for future in (self._wakeup, self._drained):
            if future is not None and not future.done():
                future.set_result(None)

    @override
    def pause_writing(self) -> None:
        if self._drained is None:
            self._drained = self._loop.create_future()

    @override
    def resume_writing(self) -> None:
        drained, self._drained = self._drained, None
        if drained is not None and not drained.done():
            drained.set_result(None)

    def abort(self) -> None:
        self._closing = True
        if self._transport is not None:
            self._transport.abort()

    # -- httptools callbacks ------------------------------------------------------------------

    def _count(self, size: int) -> None:
        self._head_size += size
        if self._head_size > self._server.max_head:
            raise ValueError("headers too large")  # stops the parser: answered 431

    def on_message_begin(self) -> None:
        self._in_head = True
        self._head_size = 0
        self._head_raw = 0
        self._url = []
        self._headers = Headers()
        self._arm(self._server.head_timeout)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        self._url.append(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)
        raw = self._headers.raw
        key = name.decode("latin-1").lower()
        text = value.decode("latin-1")
        old = raw.get(key)
        raw[key] = text if old is None else f"{old}, {text}"

    def on_headers_complete(self) -> None:
        self._in_head = False
        self._disarm()
        request = Request(
            self._parser.get_method().decode("latin-1"),
            b"".join(self._url),
            self._headers,
            self._server.max_body,
        )
        request.keep_alive = self._parser.should_keep_alive()
        if len(self._queue) >= _QUEUE_MAX:
            raise ValueError(f"more than {_QUEUE_MAX} pipelined requests")
        self._current = request
        self._queue.append(request)
        if len(self._queue) > _QUEUE_PAUSE and not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def on_body(self, body: bytes) -> None:
        if self._current is not None:
            self._current._feed(body)

    def on_message_complete(self) -> None:
        if self._current is not None:
            self._current._end()
            self._current = None

    # -- answering ----------------------------------------------------------------------------

    async def _answer_in_order(self) -> None:
        while not self._closing:
            if not self._queue:
                self._wakeup = self._loop.create_future()
                await self._wakeup
                self._wakeup = None
                continue
            request = self._queue[0]
            try:
                reply = await self._server.handler(request)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("an HTTP handler failed", path=request.path, error=repr(exc))
                reply = text_reply("internal error\n", 500)
            self._queue.popleft()
            if self._paused and len(self._queue) <= _QUEUE_PAUSE // 2:
                self._paused = False
                if self._transport is not None:
                    self._transport.resume_reading()
            keep = (
                request.body_read
                and request._error is None
                and request.keep_alive
                and not self._closing
            )
            self._write(reply, keep_alive=keep, head_only=request.method == "HEAD")
            if not keep:
                self._close()
                return
            if self._drained is not None:
                # The client is not reading its answers: read and answer nothing more until
                # it has (the idle timer would not run while a handler's answer waits).
                if self._transport is not None and not self._paused:
                    self._paused = True
                    self._transport.pause_reading()
                self._arm(self._server.idle_timeout)
                await self._drained
                if self._closing:
                    return
                self._disarm()
                if self._paused and len(self._queue) <= _QUEUE_PAUSE // 2:
                    self._paused = False
                    if self._transport is not None:
                        self._transport.resume_reading()
            if not self._queue and self._current is None and not self._in_head:
                self._arm(self._server.idle_timeout)  # (a head under way keeps its own)

    def _write(self, reply: Reply, *, keep_alive: bool, head_only: bool = False) -> None:
        if self._transport is None or self._transport.is_closing():
            return
        try:
            phrase = HTTPStatus(reply.status).phrase
        except ValueError:
            phrase = ""
        head = [
            f"HTTP/1.1 {reply.status} {phrase}\r\n"
            f"Content-Type: {reply.content_type}\r\n"
            f"Content-Length: {len(reply.body)}\r\n"
        ]
        if not keep_alive:
            head.append("Connection: close\r\n")
        if reply.headers:
            head.extend(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        head.append("\r\n")
        data = "".join(head).encode("latin-1")
        self._transport.write(data if head_only else data + reply.body)

    def _refuse(self, status: HTTPStatus, message: str) -> None:
        """A request that cannot be parsed: answered at once (out of turn) and closed."""
        self._closing = True
        self._write(text_reply(message + "\n", status.value), keep_alive=False)
        self._close()

    def _close(self) -> None:
        """Closes once the answer is sent; aborts if the client does not take it in time."""
        self._closing = True
        self._arm(self._server.head_timeout)
        if self._transport is not None:
            self._transport.close()

    # -- timers -------------------------------------------------------------------------------

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._timer = self._loop.call_later(seconds, self.abort)

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
