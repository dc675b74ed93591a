"""KubeApi through an HTTP proxy to the real kube-apiserver: a CONNECT tunnel, TLS inside it
verified against the cluster's CA, the client certificate presented through it, and watches."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
import pytest_asyncio

from jobcontroller.runtime.http1 import ConnectFailed
from jobcontroller.runtime.kube import CONFIGMAPS, KubeApi


@dataclass
class ConnectProxy:
    """A forward proxy that only tunnels (CONNECT), as a corporate egress proxy does."""

    password: str | None = None
    connects: list[str] = field(default_factory=list)
    port: int = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            method, target, _ = head.split("\r\n", 1)[0].split(" ", 2)
            wanted = base64.b64encode(f"u:{self.password}".encode()).decode()
            if self.password is not None and f"Proxy-Authorization: Basic {wanted}" not in head:
                writer.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                return
            if method != "CONNECT":
                writer.write(b"HTTP/1.1 405 Method Not Allowed\r\n\r\n")
                return
            self.connects.append(target)
            host, port = target.rsplit(":", 1)
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


@pytest_asyncio.fixture(loop_scope="session")
async def proxy() -> AsyncIterator[ConnectProxy]:
    p = ConnectProxy()
    server = await asyncio.start_server(p.serve, "127.0.0.1", 0)
    p.port = server.sockets[0].getsockname()[1]
    try:
        yield p
    finally:
        server.close()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(2):
                await server.wait_closed()


def through(kube: KubeApi, proxy_url: str) -> KubeApi:
    return KubeApi(dataclasses.replace(kube.config, proxy=proxy_url), qps=0, burst=1)


async def test_requests_and_a_watch_go_through_a_connect_tunnel(
    kube: KubeApi, namespace: str, proxy: ConnectProxy
) -> None:
    proxy.password = "s3cret:with/odd@chars"
    quoted = "s3cret%3Awith%2Fodd%40chars"
    api = through(kube, f"http://u:{quoted}@127.0.0.1:{proxy.port}")
    name = f"via-proxy-{uuid.uuid4().hex[:6]}"
    try:
        created = await api.create(
            CONFIGMAPS, {"metadata": {"name": name}, "data": {"k": "v"}}, namespace=namespace
        )
        got = await kube.get(CONFIGMAPS, name, namespace=namespace)  # seen without the proxy
        assert got["metadata"]["uid"] == created["metadata"]["uid"]
        events = api.watch(
            CONFIGMAPS,
            namespace=namespace,
            field_selector=f"metadata.name={name}",
            resource_version=created["metadata"]["resourceVersion"],
            timeout_seconds=30,
            inactivity_timeout=30,
        )
        await kube.merge_patch(CONFIGMAPS, name, {"data": {"k": "w"}}, namespace=namespace)
        event = await anext(events)
        await events.aclose()
        assert (event["type"], event["object"]["data"]) == ("MODIFIED", {"k": "w"})
    finally:
        await api.close()
    host = kube.config.host.split("://", 1)[1]
    assert proxy.connects and set(proxy.connects) == {host}


async def test_a_proxy_that_refuses_is_a_failed_connect(kube: KubeApi, proxy: ConnectProxy) -> None:
    proxy.password = "right"
    api = through(kube, f"http://u:wrong@127.0.0.1:{proxy.port}")
    try:
        with pytest.raises(ConnectFailed, match="refused CONNECT: 407"):
            await api.call("GET", "/api/v1/namespaces/default")
    finally:
        await api.close()
    assert proxy.connects == []
