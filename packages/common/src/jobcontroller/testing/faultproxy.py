"""A fault-injecting HTTPS proxy between one API client and the API server, for chaos tests.

It terminates TLS with a serving certificate of the test cluster's CA (so the client's
kubeconfig only changes its server URL) and connects upstream with the client certificate of
the user it stands for, so the API server still sees (and audits) that user. Every request is
sent upstream with ``Connection: close``: one request per connection keeps the proxy a byte
pump with no HTTP/1.1 framing to follow, at the cost of a TLS handshake per request.

With probability ``rate`` a request meets one fault, chosen uniformly by a seeded RNG:

* ``reset-before``: the connection is dropped before anything is forwarded;
* ``reset-after``: the request reaches the API server, which answers, and the client never sees
  the answer (the interesting case for creations: the object exists, the client was told
  nothing);
* ``429``, ``500``, ``503``: an error Status is answered in the server's place (429 and 503 with
  ``Retry-After: 1``);
* ``stall``: the request waits a few seconds before it is forwarded, unless its client has
  closed the connection meanwhile (then it is dropped, as a reverse proxy does).

And once per proxy (``silent_watches``), a watch is left silent: the stream stays open and
nothing is relayed, for ``silent_seconds``, after which the connection is dropped. Once per proxy
too (``unanswered_watches``), a watch's answer is lost: the request reaches the API server and
the client hears nothing, not even the headers, until the server ends the watch (minutes).
Loopback only; it stops with :meth:`FaultProxy.stop`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import ssl
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["FAULTS", "FaultProxy"]

FAULTS = ("reset-before", "reset-after", "429", "500", "503", "stall")
_REASONS = {
    "429": "Too Many Requests",
    "500": "Internal Server Error",
    "503": "Service Unavailable",
}
_HEADER_LIMIT = 64 * 1024


@dataclass
class FaultProxy:
    upstream_host: str
    upstream_port: int
    ca_file: Path
    serving_cert: Path
    serving_key: Path
    client_cert: Path
    client_key: Path
    rate: float
    seed: int = 0
    stall_seconds: float = 3.0
    silent_watches: int = 1
    silent_seconds: float = 20.0
    unanswered_watches: int = 1
    port: int = 0
    injected: Counter[str] = field(default_factory=Counter)
    requests: int = 0

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def start(self) -> None:
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving.load_cert_chain(self.serving_cert, self.serving_key)
        self._upstream_tls = ssl.create_default_context(cafile=str(self.ca_file))
        self._upstream_tls.load_cert_chain(self.client_cert, self.client_key)
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port, ssl=serving)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._one_request(reader, writer)
        except (OSError, asyncio.IncompleteReadError, ssl.SSLError, asyncio.LimitOverrunError):
            pass
        finally:
            self._tasks.discard(task)
            writer.transport.abort()

    async def _one_request(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if len(head) > _HEADER_LIMIT:
            return
        lines = head.decode("latin-1").split("\r\n")
        request_line, headers = lines[0], [line for line in lines[1:] if line]
        length = 0
        kept: list[str] = []
        for header in headers:
            name, _, value = header.partition(":")
            lowered = name.strip().lower()
            if lowered == "content-length":
                length = int(value.strip())
            if lowered in ("connection", "keep-alive"):
                continue
            kept.append(header)
        body = await reader.readexactly(length) if length else b""
        self.requests += 1
        watch = "watch=true" in request_line.split(" ")[1].lower() if " " in request_line else False
        fault = self._choose(watch=watch)
        if fault is not None:
            self.injected[fault] += 1
        if fault == "reset-before":
            return
        if fault in _REASONS:
            await self._answer(writer, int(fault))
            return
        if fault == "stall" and await self._client_leaves(reader):
            # As a reverse proxy does (nginx, Envoy), a request whose client went away while it
            # waited is not forwarded: the client gave up on it and may already have acted on
            # that (a replica releasing its Lease after abandoning an Event's write).
            return
        upstream_reader, upstream_writer = await asyncio.open_connection(
            self.upstream_host,
            self.upstream_port,
            ssl=self._upstream_tls,
            server_hostname=self.upstream_host,
        )
        try:
            out = "\r\n".join([request_line, *kept, "Connection: close", "", ""]).encode("latin-1")
            upstream_writer.write(out + body)
            await upstream_writer.drain()
            if fault == "reset-after":
                await upstream_reader.read()  # the server has answered; the client hears nothing
                return
            if fault == "silent-watch":
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self.silent_seconds):
                        while await upstream_reader.read(65536):
                            pass  # swallowed
                return
            while chunk := await upstream_reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        finally:
            upstream_writer.transport.abort()

    async def _client_leaves(self, reader: asyncio.StreamReader) -> bool:
        """Wait out the stall; True if the client closed its connection meanwhile. It sends
        nothing more on this connection before its answer (no pipelining), so any end of the
        read (EOF, a reset) means it left."""
        try:
            async with asyncio.timeout(self.stall_seconds):
                await reader.read(1)
        except TimeoutError:
            return False
        except (OSError, ssl.SSLError):
            pass
        return True

    def _choose(self, *, watch: bool) -> str | None:
        if watch and self.silent_watches > 0 and self._rng.random() < self.rate:
            self.silent_watches -= 1
            return "silent-watch"
        if watch and self.unanswered_watches > 0 and self._rng.random() < self.rate:
            self.unanswered_watches -= 1
            return "reset-after"
        if self._rng.random() >= self.rate:
            return None
        return self._rng.choice(FAULTS)

    async def _answer(self, writer: asyncio.StreamWriter, code: int) -> None:
        status = {
            "kind": "Status",
            "apiVersion": "v1",
            "status": "Failure",
            "message": f"injected by the fault proxy: {code}",
            "reason": _REASONS[str(code)].replace(" ", ""),
            "code": code,
        }
        if code in (429, 503):
            status["details"] = {"retryAfterSeconds": 1}
        body = json.dumps(status).encode()
        extra = "Retry-After: 1\r\n" if code in (429, 503) else ""
        head = (
            f"HTTP/1.1 {code} {_REASONS[str(code)]}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n{extra}Connection: close\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + body)
        await writer.drain()
