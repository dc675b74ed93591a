"""The HTTP/1.1 pool under the API client, against raw sockets scripted byte by byte: what a
well-behaved server (tests/integration/test_kube_api.py) never shows on demand.

Each server here is an asyncio server on loopback whose handler reads one request head and
writes exactly the bytes a test gives, so keep-alive, connection close, chunking, silence and
a cut answer are each one script.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import pytest
import pytest_asyncio

from jobcontroller.runtime.http1 import ConnectFailed, Disconnected, LineSilence, Pool

Answer = Callable[[bytes, asyncio.StreamWriter], Awaitable[None]]


@dataclass
class RawServer:
    """Answers the n-th request (over all connections) with ``script[n]`` (the last repeats)."""

    script: list[Answer] = field(default_factory=list)
    heads: list[bytes] = field(default_factory=list)
    connections: int = 0
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                self.heads.append(head + body)
                answer = self.script[min(len(self.heads), len(self.script)) - 1]
                await answer(head, writer)
                if writer.is_closing():
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def raw(data: bytes, *, close: bool = False) -> Answer:
    async def answer(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(data)
        await writer.drain()
        if close:
            writer.close()

    return answer


def json_answer(body: bytes, *, extra: str = "") -> Answer:
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n{extra}"
    return raw(f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body)


@pytest_asyncio.fixture(loop_scope="session")
async def server() -> AsyncIterator[RawServer]:
    srv = RawServer()
    listener = await asyncio.start_server(srv.serve, "127.0.0.1", 0)
    srv.port = listener.sockets[0].getsockname()[1]
    try:
        yield srv
    finally:
        listener.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await listener.wait_closed()


def pool(srv: RawServer, **kwargs: float) -> Pool:
    return Pool(f"http://127.0.0.1:{srv.port}", ssl_context=None, **kwargs)  # type: ignore[arg-type]


async def get(p: Pool, target: str = "/x", *, read_timeout: float = 5.0) -> tuple[int, bytes]:
    resp = await p.request("GET", target, {"Accept": "application/json"}, None, read_timeout=5.0)
    return resp.status, resp.body


async def test_a_kept_alive_connection_is_reused(server: RawServer) -> None:
    server.script = [json_answer(b'{"a": 1}')]
    p = pool(server)
    try:
        for _ in range(3):
            assert await get(p) == (200, b'{"a": 1}')
    finally:
        await p.close()
    assert server.connections == 1
    assert server.heads[0].startswith(b"GET /x HTTP/1.1\r\nHost: 127.0.0.1:")


async def test_an_answer_that_closes_the_connection_is_not_reused(server: RawServer) -> None:
    server.script = [json_answer(b"{}", extra="Connection: close\r\n"), json_answer(b"[]")]
    p = pool(server)
    try:
        assert await get(p) == (200, b"{}")
        assert await get(p) == (200, b"[]")
    finally:
        await p.close()
    assert server.connections == 2


async def test_a_connection_the_server_closed_while_idle_is_not_used(server: RawServer) -> None:
    server.script = [json_answer(b"{}", extra=""), json_answer(b"[]")]

    async def answer_then_close(head: bytes, writer: asyncio.StreamWriter) -> None:
        await json_answer(b"{}")(head, writer)
        writer.close()  # keep-alive promised, then closed while idle (an idle timeout)

    server.script = [answer_then_close, json_answer(b"[]")]
    p = pool(server)
    try:
        assert await get(p) == (200, b"{}")
        await asyncio.sleep(0.1)  # the FIN arrives
        assert await get(p) == (200, b"[]")
    finally:
        await p.close()
    assert server.connections == 2


async def test_an_answer_delimited_by_the_end_of_the_connection(server: RawServer) -> None:
    server.script = [raw(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nall of it", close=True)]
    p = pool(server)
    try:
        assert await get(p) == (200, b"all of it")
    finally:
        await p.close()


async def test_a_chunked_answer_is_read_whole(server: RawServer) -> None:
    server.script = [
        raw(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"
        )
    ]
    p = pool(server)
    try:
        assert await get(p) == (200, b"abcde")
    finally:
        await p.close()


async def test_an_answer_cut_short_is_a_disconnect_and_the_connection_is_dropped(
    server: RawServer,
) -> None:
    server.script = [
        raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this", close=True),
        json_answer(b"{}"),
    ]
    p = pool(server)
    try:
        with pytest.raises(Disconnected, match="closed the connection"):
            await get(p)
        assert await get(p) == (200, b"{}")
    finally:
        await p.close()
    assert server.connections == 2


async def test_garbage_is_a_disconnect(server: RawServer) -> None:
    server.script = [raw(b"SSH-2.0-OpenSSH_9.6\r\n\r\n")]
    p = pool(server)
    try:
        with pytest.raises(Disconnected, match=r"not HTTP/1\.1"):
            await get(p)
    finally:
        await p.close()


async def test_nothing_listening_is_a_failed_connect() -> None:
    p = Pool("http://127.0.0.1:9", ssl_context=None)  # discard port: nothing listens
    try:
        with pytest.raises(ConnectFailed, match=r"127\.0\.0\.1:9"):
            await p.request("POST", "/x", {}, b"{}", read_timeout=1)
    finally:
        await p.close()


async def test_the_read_timeout_is_silence_not_the_whole_answer(server: RawServer) -> None:
    async def slow_but_steady(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n")
        for piece in (b"ab", b"cd", b"ef", b"gh"):
            await asyncio.sleep(0.15)
            writer.write(piece)

    async def silent(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nab")
        await asyncio.sleep(2)

    server.script = [slow_but_steady, silent]
    p = pool(server)
    try:
        resp = await p.request("GET", "/x", {}, None, read_timeout=0.4)  # 0.6 s in all
        assert resp.body == b"abcdefgh"
        with pytest.raises(TimeoutError, match="no data"):
            await p.request("GET", "/x", {}, None, read_timeout=0.4)
    finally:
        await p.close()


async def test_a_cancelled_request_leaves_no_connection_behind(server: RawServer) -> None:
    async def never(head: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)

    server.script = [never, json_answer(b"{}")]
    p = pool(server, limit=1)
    try:
        task = asyncio.create_task(get(p))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The only slot is free again, on a new connection: the half-answered one is gone.
        assert await get(p) == (200, b"{}")
    finally:
        await p.close()
    assert server.connections == 2


async def test_a_full_pool_waits_then_fails_as_a_connect(server: RawServer) -> None:
    async def slow(head: bytes, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(0.3)
        await json_answer(b"{}")(head, writer)

    server.script = [slow]
    p = pool(server, limit=1, connect_timeout=0.1)
    try:
        first = asyncio.create_task(get(p))
        await asyncio.sleep(0.05)
        with pytest.raises(ConnectFailed, match="no free connection"):
            await get(p)
        assert await first == (200, b"{}")
        assert await get(p) == (200, b"{}")  # waits for nobody now
    finally:
        await p.close()


def _chunk(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


async def test_a_stream_gives_lines_split_anyhow_and_ends(server: RawServer) -> None:
    async def watch(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for piece in (b'{"a":', b' 1}\n{"b": 2}\n\n{"c"', b": 3}\n"):
            writer.write(_chunk(piece))
            await writer.drain()
            await asyncio.sleep(0.02)
        writer.write(b"0\r\n\r\n")

    server.script = [watch, json_answer(b"{}")]
    p = pool(server)
    try:
        stream = await p.stream("GET", "/w", {}, read_timeout=5, max_line=1000, line_timeout=5)
        async with stream:
            lines = [line async for line in _lines(stream)]
        assert lines == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}']
        assert await get(p) == (200, b"{}")  # the stream's connection, given back
    finally:
        await p.close()
    assert server.connections == 1


async def _lines(stream: object) -> AsyncIterator[bytes]:
    while (line := await stream.next_line()) is not None:  # type: ignore[attr-defined]
        yield line


async def test_a_stream_line_over_the_cap_is_refused(server: RawServer) -> None:
    async def huge(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunk(b"ok\n"))
        for _ in range(10):
            writer.write(_chunk(b"x" * 500))
        await writer.drain()
        await asyncio.sleep(1)

    server.script = [huge]
    p = pool(server)
    try:
        stream = await p.stream("GET", "/w", {}, read_timeout=5, max_line=2000, line_timeout=5)
        async with stream:
            assert await stream.next_line() == b"ok"
            with pytest.raises(Disconnected, match="longer than 2000 bytes"):
                await stream.next_line()
    finally:
        await p.close()


async def test_a_silent_stream_raises_line_silence(server: RawServer) -> None:
    async def quiet(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        writer.write(_chunk(b"one\n"))
        await writer.drain()
        await asyncio.sleep(3)

    server.script = [quiet]
    p = pool(server)
    try:
        stream = await p.stream("GET", "/w", {}, read_timeout=30, max_line=100, line_timeout=0.3)
        async with stream:
            assert await stream.next_line() == b"one"
            started = asyncio.get_running_loop().time()
            with pytest.raises(LineSilence):
                await stream.next_line()
            assert asyncio.get_running_loop().time() - started < 2
    finally:
        await p.close()


async def test_a_reader_far_behind_pauses_the_stream_without_timing_it_out(
    server: RawServer,
) -> None:
    """More lines than the pause mark arrive at once; the reader then takes longer than the read
    timeout before catching up. Reading was paused, not silent: every line arrives."""
    count = 2000

    async def flood(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        for i in range(count):
            writer.write(_chunk(b'{"i": %d}\n' % i))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    server.script = [flood]
    p = pool(server)
    try:
        stream = await p.stream("GET", "/w", {}, read_timeout=0.3, max_line=100, line_timeout=5)
        async with stream:
            await asyncio.sleep(0.2)
            got = 0
            while (line := await stream.next_line()) is not None:
                assert line == b'{"i": %d}' % got
                got += 1
                if got == 100:
                    await asyncio.sleep(0.6)  # behind by two read timeouts
        assert got == count
        server.script = [flood, json_answer(b"{}")]
        assert await get(p) == (200, b"{}")  # the same connection, reading again
    finally:
        await p.close()
    assert server.connections == 1


async def test_headers_are_looked_up_in_any_case(server: RawServer) -> None:
    server.script = [
        raw(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nContent-Length: 0\r\n\r\n")
    ]
    p = pool(server)
    try:
        resp = await p.request("POST", "/x", {}, b"{}", read_timeout=5)
    finally:
        await p.close()
    assert (resp.status, resp.reason) == (429, "Too Many Requests")
    assert resp.headers.get("Retry-After") == resp.headers["retry-after"] == "3"
    assert b"Content-Length: 2\r\n\r\n{}" in server.heads[0]


async def test_closing_the_pool_ends_a_stream_in_use(server: RawServer) -> None:
    async def endless(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        await asyncio.sleep(5)

    server.script = [endless]
    p = pool(server)
    stream = await p.stream("GET", "/w", {}, read_timeout=30, max_line=100, line_timeout=30)
    reading = asyncio.create_task(stream.next_line())
    await asyncio.sleep(0.05)
    await p.close()
    with pytest.raises(Disconnected, match="client was closed"):
        await asyncio.wait_for(reading, 2)
    stream.close()


async def test_a_post_on_a_connection_the_server_reset_while_idle_goes_on_a_new_one(
    server: RawServer,
) -> None:
    """The server reset a kept-alive connection before the loop could notice (its reading is
    paused here to make that certain): the pool sees the reset waiting on the idle socket (or,
    had it come a moment later, the write fails: nothing was sent), and the POST goes on a new
    connection rather than failing."""

    async def answer_then_reset(head: bytes, writer: asyncio.StreamWriter) -> None:
        await json_answer(b"{}")(head, writer)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # RST

    server.script = [answer_then_reset, json_answer(b'{"created": true}')]
    p = pool(server)
    try:
        assert await get(p) == (200, b"{}")
        [idle] = p._idle
        idle.transport.pause_reading()  # type: ignore[union-attr]
        await asyncio.sleep(0.1)  # the RST arrives, unread
        resp = await p.request("POST", "/x", {}, b"{}", read_timeout=5)
        assert (resp.status, resp.body) == (200, b'{"created": true}')
    finally:
        await p.close()
    assert server.connections == 2
    assert len(server.heads) == 2  # the POST reached the server once


async def test_a_connection_idle_past_the_keepalive_is_not_reused(server: RawServer) -> None:
    server.script = [json_answer(b"{}")]
    p = pool(server, keepalive=0.2)
    try:
        assert await get(p) == (200, b"{}")
        assert await get(p) == (200, b"{}")  # at once: the same connection
        await asyncio.sleep(0.3)
        assert await get(p) == (200, b"{}")
    finally:
        await p.close()
    assert server.connections == 2


async def test_a_connection_closed_with_connection_close_after_a_stream_is_not_reused(
    server: RawServer,
) -> None:
    async def one_line_then_close(head: bytes, writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 6\r\n\r\n{}\n{}\n")
        await writer.drain()
        await asyncio.sleep(0.3)  # the close comes late: the pool must not count on seeing it
        writer.close()

    server.script = [one_line_then_close, json_answer(b"[]")]
    p = pool(server)
    try:
        stream = await p.stream("GET", "/w", {}, read_timeout=5, max_line=100, line_timeout=5)
        async with stream:
            assert [line async for line in _lines(stream)] == [b"{}", b"{}"]
        assert await get(p) == (200, b"[]")
    finally:
        await p.close()
    assert server.connections == 2


async def test_an_error_body_longer_than_the_pause_mark_is_read_whole(server: RawServer) -> None:
    page = b"".join(b"<p>line %d</p>\n" % i for i in range(2000))
    head = b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: %d\r\n\r\n" % len(page)
    server.script = [raw(head + page)]
    p = pool(server)
    try:
        stream = await p.stream("GET", "/w", {}, read_timeout=5, max_line=100, line_timeout=5)
        async with stream:
            assert stream.status == 502
            await asyncio.sleep(0.1)  # all of it arrives: reading pauses at the mark
            body = await asyncio.wait_for(stream.read(), 2)
        assert body == page.rstrip(b"\n")
    finally:
        await p.close()
