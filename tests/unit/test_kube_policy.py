"""Pure parts of the API client: URL paths, metric labels, error parsing, the retry policy."""

from __future__ import annotations

import json

import pytest

from jobcontroller.runtime.http1 import ConnectFailed, Disconnected
from jobcontroller.runtime.kube import (
    CONFIGMAPS,
    CRDS,
    HPAS,
    JOBS,
    NAMESPACES,
    PODS,
    ApiError,
    ApiSettings,
    Resource,
    path_resource_label,
    retry_delay,
    should_retry_exception,
    should_retry_status,
)

TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")


class TestResource:
    def test_api_version_core_and_group(self) -> None:
        assert PODS.api_version == "v1"
        assert JOBS.api_version == "batch/v1"
        assert HPAS.api_version == "autoscaling/v2"

    def test_paths(self) -> None:
        assert PODS.path() == "/api/v1/pods"
        assert PODS.path(namespace="ns") == "/api/v1/namespaces/ns/pods"
        assert TFJOBS.path(namespace="ns", name="j", subresource="status") == (
            "/apis/kubeflow.org/v1/namespaces/ns/tfjobs/j/status"
        )
        assert CRDS.path(name="tfjobs.kubeflow.org") == (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/tfjobs.kubeflow.org"
        )

    def test_names_are_escaped(self) -> None:
        assert (
            CONFIGMAPS.path(namespace="ns", name="a/b") == "/api/v1/namespaces/ns/configmaps/a%2Fb"
        )

    def test_namespace_on_cluster_scoped_is_refused(self) -> None:
        with pytest.raises(ValueError, match="cluster-scoped"):
            NAMESPACES.path(namespace="ns")

    def test_subresource_needs_a_name(self) -> None:
        with pytest.raises(ValueError):
            PODS.path(namespace="ns", subresource="status")


@pytest.mark.parametrize(
    ("path", "label"),
    [
        ("/api/v1/namespaces/ns/pods/p", "pods"),
        ("/api/v1/pods", "pods"),
        ("/api/v1/namespaces", "namespaces"),
        ("/api/v1/namespaces/ns", "namespaces"),
        ("/api/v1/namespaces/ns/status", "namespaces/status"),
        ("/apis/kubeflow.org/v1/namespaces/ns/tfjobs/j/status", "tfjobs.kubeflow.org/status"),
        ("/apis/coordination.k8s.io/v1/namespaces/ns/leases", "leases.coordination.k8s.io"),
        ("/apis/kubeflow.org/v1", "discovery"),
        ("/version", "other"),
    ],
)
def test_path_resource_label(path: str, label: str) -> None:
    assert path_resource_label(path) == label


class TestApiError:
    def test_from_status_body(self) -> None:
        body = {
            "kind": "Status",
            "code": 409,
            "reason": "AlreadyExists",
            "message": 'configmaps "a" already exists',
        }
        err = ApiError.from_response(status=409, data=json.dumps(body).encode(), headers={})
        assert err.status == 409
        assert err.is_already_exists
        assert not err.is_conflict
        assert err.message == 'configmaps "a" already exists'
        assert err.body == body

    def test_conflict_is_not_already_exists(self) -> None:
        err = ApiError(status=409, reason="Conflict")
        assert err.is_conflict
        assert not err.is_already_exists

    def test_retry_after_from_header_wins_over_details(self) -> None:
        body = {"kind": "Status", "code": 429, "details": {"retryAfterSeconds": 2}}
        from_body = ApiError.from_response(status=429, data=json.dumps(body).encode(), headers={})
        assert from_body.retry_after == 2.0
        both = ApiError.from_response(
            status=429, data=json.dumps(body).encode(), headers={"Retry-After": "5"}
        )
        assert both.retry_after == 5.0

    def test_non_json_body(self) -> None:
        err = ApiError.from_response(status=502, data=b"<html>bad gateway</html>", headers={})
        assert err.status == 502
        assert "bad gateway" in err.message
        assert err.body is None

    def test_watch_error_event_status(self) -> None:
        err = ApiError.from_status({"code": 410, "reason": "Expired", "message": "too old"})
        assert err.is_gone

    def test_too_large_resource_version(self) -> None:
        body = {
            "kind": "Status",
            "code": 504,
            "reason": "Timeout",
            "message": "Too large resource version: 300, current: 200",
            "details": {"causes": [{"reason": "ResourceVersionTooLarge"}]},
        }
        err = ApiError.from_response(status=504, data=json.dumps(body).encode(), headers={})
        assert err.is_too_large_resource_version
        assert not ApiError(status=504, reason="Timeout").is_too_large_resource_version


class TestRetryPolicy:
    @pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "POST"])
    def test_429_is_retried_for_every_verb(self, method: str) -> None:
        assert should_retry_status(method=method, status=429)

    @pytest.mark.parametrize("code", [500, 502, 503, 504])
    def test_5xx_only_for_idempotent_verbs(self, code: int) -> None:
        assert should_retry_status(method="GET", status=code)
        assert should_retry_status(method="PATCH", status=code)
        assert not should_retry_status(method="POST", status=code)

    @pytest.mark.parametrize("code", [400, 401, 403, 404, 409, 410, 422])
    def test_client_errors_are_final(self, code: int) -> None:
        assert not should_retry_status(method="GET", status=code)

    def test_post_retried_only_when_never_connected(self) -> None:
        refused = ConnectFailed("connecting to 10.0.0.1:6443: refused")
        assert should_retry_exception(method="POST", exc=refused)
        assert not should_retry_exception(method="POST", exc=Disconnected("reset"))
        assert not should_retry_exception(method="POST", exc=TimeoutError())
        assert should_retry_exception(method="GET", exc=Disconnected("reset"))
        assert should_retry_exception(method="GET", exc=TimeoutError())
        # Not a transport failure of the client: never retried.
        assert not should_retry_exception(method="GET", exc=ValueError("bad JSON"))

    def test_delay_doubles_with_jitter_and_caps(self) -> None:
        settings = ApiSettings(backoff_base=0.2, backoff_max=1.0)
        for attempt, full in [(1, 0.2), (2, 0.4), (3, 0.8), (4, 1.0), (9, 1.0)]:
            for _ in range(20):
                delay = retry_delay(attempt=attempt, settings=settings, retry_after=None)
                assert full / 2 <= delay <= full

    def test_delay_honours_retry_after_up_to_cap(self) -> None:
        settings = ApiSettings(backoff_base=0.2, max_retry_after=10.0)
        assert retry_delay(attempt=1, settings=settings, retry_after=3.0) == 3.0
        assert retry_delay(attempt=1, settings=settings, retry_after=60.0) == 10.0
