"""The proxy environment is read once when the client is made, not on every request."""

from __future__ import annotations

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from jobcontroller.runtime.kube import KubeApi


async def _client(host: str) -> tuple[KubeApi, ApiClient]:
    config = Configuration()
    config.host = host
    api_client = ApiClient(configuration=config)
    return KubeApi(api_client), api_client


async def test_a_proxy_from_the_environment_is_taken_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    _, api_client = await _client("https://10.0.0.1:6443")
    rest = api_client.rest_client
    try:
        assert rest.proxy == "http://proxy.example:3128"
        assert rest.proxy_headers["Proxy-Authorization"].startswith("Basic ")
        # No lookups per request any more: aiohttp's env handling is off.
        assert rest.pool_manager.trust_env is False
    finally:
        await api_client.close()


async def test_no_proxy_for_a_bypassed_or_unset_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    _, api_client = await _client("https://127.0.0.1:6443")
    try:
        assert not api_client.rest_client.proxy
        assert api_client.rest_client.pool_manager.trust_env is False
    finally:
        await api_client.close()
