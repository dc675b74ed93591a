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


def _proxy(monkeypatch: pytest.MonkeyPatch, host: str, **env: str) -> str | None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return KubeApi(ClusterConfig(host=host))._proxy


@pytest.mark.parametrize(
    ("host", "no_proxy", "proxied"),
    [
        ("https://api.corp.example:6443", "", True),
        ("https://api.corp.example:6443", "corp.example", False),  # a domain: its subdomains
        ("https://corp.example:6443", "corp.example", False),  # and itself
        ("https://corp.example:6443", ".corp.example", True),  # a .domain: subdomains only
        ("https://api.corp.example:6443", ".corp.example", False),
        ("https://notcorp.example:6443", "corp.example", True),  # not a suffix of a label
        ("https://api.corp.example:6443", "api.corp.example:443", True),  # another port
        ("https://api.corp.example:6443", "api.corp.example:6443", False),
        ("https://10.1.2.3:6443", "10.0.0.0/8", False),
        ("https://11.1.2.3:6443", "10.0.0.0/8, 12.0.0.1", True),
        ("https://[fd00::1]:6443", "fd00::/64", False),
        ("https://10.1.2.3:6443", "*", False),
        ("https://127.0.0.1:6443", "", False),  # loopback: never proxied, as in Go
        ("https://localhost:6443", "", False),
    ],
)
def test_no_proxy_follows_gos_rules(
    monkeypatch: pytest.MonkeyPatch, host: str, no_proxy: str, proxied: bool
) -> None:
    got = _proxy(monkeypatch, host, HTTPS_PROXY="http://proxy.example:3128", NO_PROXY=no_proxy)
    assert (got == "http://proxy.example:3128") is proxied, got


def test_the_variable_follows_the_servers_scheme(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _proxy(monkeypatch, "http://10.0.0.1:8080", https_proxy="http://s:1") is None
    assert _proxy(monkeypatch, "http://10.0.0.1:8080", http_proxy="h:3128") == "http://h:3128"
    assert _proxy(monkeypatch, "https://10.0.0.1:6443", https_proxy="s:1") == "http://s:1"


async def test_a_kubeconfig_proxy_url_with_credentials_authenticates() -> None:
    api = KubeApi(
        ClusterConfig(host="https://10.0.0.1:6443", proxy="http://u%40x:p%3Aw@other:8080")
    )
    assert api._proxy == "http://other:8080"
    assert api._proxy_headers == {"Proxy-Authorization": "Basic dUB4OnA6dw=="}  # u@x:p:w
    await api.close()


def test_a_proxy_this_client_cannot_use_is_refused_when_it_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(ValueError, match=r"only an http:// proxy is supported"):
        _proxy(monkeypatch, "https://10.0.0.1:6443", HTTPS_PROXY="socks5://user:pw@p:1080")
