"""The operator's own HTTP server, driven over raw sockets: the limits a server facing pods it
does not trust must keep, pipelining, keep-alive, and the probe server's routes."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator

import pytest_asyncio
from prometheus_client import CollectorRegistry, Counter

from jobcontroller.runtime.httpserver import (
    BodyTooLarge,
    HttpServer,
    Reply,
    Request,
    json_reply,
    text_reply,
)
from jobcontroller.runtime.server import OperatorServer


async def echo(request: Request) -> Reply:
    """Answers with what it got; /fail raises, /early answers without reading the body."""
    if request.path == "/fail":
        raise RuntimeError("a bug")
    if request.path == "/early":
        return text_reply("no\n", 401)
    if request.path == "/slow":
        await asyncio.sleep(0.2)
    try:
        body = await request.read()
    except BodyTooLarge:
        return text_reply("too large\n", 413)
    return json_reply(
        {"method": request.method, "path": request.path, "query": request.query, "len": len(body)}
    )


@pytest_asyncio.fixture(loop_scope="session")
async def port() -> AsyncIterator[int]:
    server = HttpServer(echo, max_body=100, max_head=2048, head_timeout=0.3, idle_timeout=0.5)
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    await server.listen(sock)
    try:
        yield sock.getsockname()[1]
    finally:
        await server.close()


async def exchange(port: int, data: bytes, *, wait: float = 2.0) -> bytes:
    """Sends ``data`` and reads until the server closes or ``wait`` seconds pass."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    out = b""
    try:
        async with asyncio.timeout(wait):
            while chunk := await reader.read(65536):
                out += chunk
    except TimeoutError:
        pass
    writer.close()
    return out


def answers(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The status, headers and body of each answer in ``raw``."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        length = int(headers["Content-Length"])
        out.append((int(lines[0].split()[1]), headers, rest[:length]))
        raw = rest[length:]
    return out


async def test_pipelined_requests_are_answered_in_order_on_one_connection(port: int) -> None:
    raw = await exchange(
        port,
        b"GET /slow?a=1 HTTP/1.1\r\nHost: x\r\n\r\n"
        b"POST /b%20c HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
        b"GET /d HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    (s1, h1, b1), (s2, _, b2), (s3, h3, _) = answers(raw)
    assert (s1, json.loads(b1)) == (
        200,
        {"method": "GET", "path": "/slow", "query": "a=1", "len": 0},
    )
    assert (s2, json.loads(b2)["path"], json.loads(b2)["len"]) == (200, "/b c", 5)
    assert s3 == 200
    assert "Connection" not in h1 and h3["Connection"] == "close"


async def test_a_body_over_the_limit_is_refused(port: int) -> None:
    raw = await exchange(port, b"POST /x HTTP/1.1\r\nContent-Length: 500\r\n\r\n" + b"x" * 500)
    [(status, headers, body)] = answers(raw)
    assert (status, body, headers["Connection"]) == (413, b"too large\n", "close")


async def test_a_chunked_body_over_the_limit_is_refused(port: int) -> None:
    chunks = b"".join(b"32\r\n" + b"x" * 50 + b"\r\n" for _ in range(4)) + b"0\r\n\r\n"
    raw = await exchange(port, b"POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
    assert answers(raw)[0][0] == 413


async def test_an_answer_before_the_body_closes_the_connection(port: int) -> None:
    raw = await exchange(
        port,
        b"POST /early HTTP/1.1\r\nContent-Length: 50\r\n\r\n"
        b"GET /x HTTP/1.1\r\n\r\n",  # read as body bytes: never answered
    )
    [(status, headers, _)] = answers(raw)
    assert (status, headers["Connection"]) == (401, "close")


async def test_headers_over_the_limit_are_refused(port: int) -> None:
    raw = await exchange(port, b"GET /x HTTP/1.1\r\nX-Big: " + b"y" * 4000 + b"\r\n\r\n")
    assert answers(raw)[0][0] == 431


async def test_a_slow_head_is_cut_off(port: int) -> None:
    started = asyncio.get_running_loop().time()
    raw = await exchange(port, b"GET /x HTTP/1.1\r\nX-Slow: ", wait=5)
    assert raw == b""  # closed without an answer
    assert asyncio.get_running_loop().time() - started < 2


async def test_an_idle_connection_is_closed(port: int) -> None:
    started = asyncio.get_running_loop().time()
    raw = await exchange(port, b"GET /x HTTP/1.1\r\n\r\n", wait=5)
    assert answers(raw)[0][0] == 200
    assert asyncio.get_running_loop().time() - started < 2  # the idle timeout, 0.5 s


async def test_garbage_and_a_failing_handler(port: int) -> None:
    raw = await exchange(port, b"\x16\x03\x01\x00\xa5 not http\r\n\r\n")
    assert answers(raw)[0][0] == 400
    raw = await exchange(port, b"GET /fail HTTP/1.1\r\nConnection: close\r\n\r\n")
    assert answers(raw)[0][0] == 500


async def test_the_probe_server_routes_and_formats() -> None:
    registry = CollectorRegistry()
    Counter("things", "Things.", registry=registry).inc(3)
    server = OperatorServer(
        registry=registry,
        readiness=lambda: {"synced": False, "leader": False},
        host="127.0.0.1",
        metrics_port=0,
        health_port=0,
    )
    await server.start()
    try:
        m, h = server.metrics_port, server.health_port
        ready = answers(await exchange(h, b"GET /readyz HTTP/1.1\r\nConnection: close\r\n\r\n"))
        assert (ready[0][0], json.loads(ready[0][2])) == (503, {"synced": False, "leader": False})
        text = answers(await exchange(m, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n"))
        assert text[0][1]["Content-Type"].startswith("text/plain; version=0.0.4")
        assert b"things_total 3.0" in text[0][2]
        om = answers(
            await exchange(
                m,
                b"GET /metrics HTTP/1.1\r\nAccept: application/openmetrics-text\r\n"
                b"Connection: close\r\n\r\n",
            )
        )
        assert om[0][1]["Content-Type"].startswith("application/openmetrics-text")
        assert om[0][2].endswith(b"# EOF\n")
        missing = answers(await exchange(h, b"GET /nope HTTP/1.1\r\nConnection: close\r\n\r\n"))
        posted = answers(await exchange(h, b"POST /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"))
        assert (missing[0][0], posted[0][0], posted[0][1]["Allow"]) == (404, 405, "GET, HEAD")
    finally:
        await server.stop()


async def test_health_answers_500_once_the_manager_failed() -> None:
    healthy = [True]
    server = OperatorServer(
        registry=CollectorRegistry(),
        readiness=dict,
        healthy=lambda: healthy[0],
        host="127.0.0.1",
        metrics_port=0,
        health_port=0,
    )
    await server.start()
    try:
        ask = b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"
        assert answers(await exchange(server.health_port, ask))[0][0] == 200
        healthy[0] = False
        assert answers(await exchange(server.health_port, ask))[0][0] == 500
    finally:
        await server.stop()


async def test_a_client_that_never_reads_its_answers_is_not_answered_without_bound() -> None:
    handled = 0

    async def big(request: Request) -> Reply:
        nonlocal handled
        handled += 1
        return Reply(200, b"x" * 65536)

    server = HttpServer(big, max_body=0, idle_timeout=5)
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    await server.listen(sock)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        for _ in range(40):  # 2,000 small requests, sent in pieces as a client would
            writer.write(b"GET /m HTTP/1.1\r\n\r\n" * 50)
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
        # The socket buffers hold a few answers; the server then waits for the client.
        assert 0 < handled < 100
        writer.close()
    finally:
        await server.close()


async def test_a_handler_under_way_finishes_when_its_client_leaves() -> None:
    finished = asyncio.Event()

    async def slow(request: Request) -> Reply:
        await asyncio.sleep(0.3)
        finished.set()  # e.g. the status write a report started
        return text_reply("done\n")

    server = HttpServer(slow, max_body=0)
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setblocking(False)
    await server.listen(sock)
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
        writer.write(b"GET /x HTTP/1.1\r\n\r\n")
        await asyncio.sleep(0.05)
        writer.transport.abort()
        await asyncio.wait_for(finished.wait(), 2)
    finally:
        await server.close()


async def test_head_is_get_without_the_body(port: int) -> None:
    raw = await exchange(port, b"HEAD /x HTTP/1.1\r\nConnection: close\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and b"Content-Length: " in head
    assert body == b""


async def test_a_head_in_pieces_is_measured_once(port: int) -> None:
    """A 1.5 KiB head (the limit here is 2 KiB) sent in three pieces is served, and one of
    3 KiB sent the same way is refused."""
    for size, status in ((1500, 200), (3000, 431)):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = b"GET /x HTTP/1.1\r\nConnection: close\r\nX-Pad: " + b"p" * size + b"\r\n\r\n"
        for i in range(0, len(head), len(head) // 3 + 1):
            writer.write(head[i : i + len(head) // 3 + 1])
            await asyncio.sleep(0.02)
        raw = await asyncio.wait_for(reader.read(), 2)
        writer.close()
        assert answers(raw)[0][0] == status
