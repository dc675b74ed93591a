"""The proxy to the API server is settled once, when the client is made: the kubeconfig's
proxy-url, else the environment's, never looked up again per request."""

from __future__ import annotations

import pytest

from jobcontroller.runtime.kube import KubeApi
from jobcontroller.runtime.kubeconfig import ClusterConfig


async def test_a_proxy_from_the_environment_is_taken_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:secret@proxy.example:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    api = KubeApi(ClusterConfig(host="https://10.0.0.1:6443"))
    try:
        assert api._proxy == "http://proxy.example:3128"
        assert api._proxy_headers is not None
        assert api._proxy_headers["Proxy-Authorization"].startswith("Basic ")
        # The connections go through it, authenticated, with nothing looked up per request.
        pool = api._connections_pool()
        assert pool._proxy == ("proxy.example", 3128)
        assert "Proxy-Authorization: Basic " in pool._proxy_header
    finally:
        await api.close()


async def test_no_proxy_for_a_bypassed_or_unset_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    api = KubeApi(ClusterConfig(host="https://127.0.0.1:6443"))
    assert api._proxy is None
    await api.close()


async def test_the_kubeconfig_proxy_url_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    api = KubeApi(ClusterConfig(host="https://10.0.0.1:6443", proxy="http://other:8080"))
    assert api._proxy == "http://other:8080"
    await api.close()
