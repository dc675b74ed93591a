"""Metrics.child: the labelled children of the hot paths looked up once, counting as labels()."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.runtime.metrics import Metrics


def test_a_child_counts_in_the_family_under_its_own_label_set() -> None:
    m = Metrics(process_collectors=False)
    for _ in range(3):
        m.child(m.api_requests, "GET", "pods", "200").inc()
    m.child(m.api_requests, "GET", "pods", "404").inc()
    m.api_requests.labels("GET", "pods", "200").inc()  # the uncached path sees the same child
    m.child(m.api_request_duration, "GET", "pods").observe(0.02)

    def sample(name: str, **labels: str) -> float | None:
        return m.registry.get_sample_value(name, labels)

    assert sample("jobcontroller_api_requests_total", verb="GET", resource="pods", code="200") == 4
    assert sample("jobcontroller_api_requests_total", verb="GET", resource="pods", code="404") == 1
    assert sample("jobcontroller_api_request_duration_seconds_count", verb="GET", resource="pods")
    assert m.child(m.api_requests, "GET", "pods", "200") is m.api_requests.labels(
        "GET", "pods", "200"
    )


def test_two_processes_metrics_keep_their_children_apart() -> None:
    a, b = Metrics(process_collectors=False), Metrics(process_collectors=False)
    a.child(a.reconcile_total, "tfjob-controller", "success").inc()
    labels = {"controller": "tfjob-controller", "result": "success"}
    assert a.registry.get_sample_value("controller_runtime_reconcile_total", labels) == 1
    assert b.registry.get_sample_value("controller_runtime_reconcile_total", labels) is None


def test_the_request_path_families_expose_what_prometheus_client_would() -> None:
    """The families every API request updates are lock-free (one thread updates them); a
    scrape shows exactly what prometheus_client's Counter and Histogram show for the same
    observations: names, help, types, label sets in order, cumulative buckets, count, sum."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    from jobcontroller.runtime.metrics import LoopCounter, LoopHistogram

    buckets = (0.001, 0.01, 0.1, 1, 10)
    observed = (0.0, 0.001, 0.0015, 0.5, 1, 9.99, 10, 11, 1e9)

    def exposition(counter: type[Any], histogram: type[Any]) -> str:
        r = CollectorRegistry()
        plain = histogram("wait_seconds", "Waits", (), buckets=buckets, registry=r)
        labelled = histogram(
            "req_seconds", "Requests", ("verb", "code"), buckets=buckets, registry=r
        )
        requests = counter("requests", "Requests by verb", ("verb",), registry=r)
        untouched = counter("untouched", "Never counted", ("verb",), registry=r)
        assert untouched is not None
        bare = counter("bare", "No labels", registry=r)
        for i, value in enumerate(observed):
            plain.observe(value)
            labelled.labels("GET" if i % 3 else "PUT", "200").observe(value)
            requests.labels("GET" if i % 2 else "LIST").inc()
        requests.labels("GET").inc(2.5)
        bare.inc()
        # Not a number: in the sum, in no bucket and not counted, as prometheus_client does.
        odd = histogram("odd_seconds", "Odd values", (), buckets=buckets, registry=r)
        odd.observe(0.5)
        odd.observe(float("nan"))
        with pytest.raises(ValueError):
            requests.labels("GET").inc(-1)
        with pytest.raises(ValueError):
            labelled.labels("GET")
        return generate_latest(r).decode()

    ours = exposition(LoopCounter, LoopHistogram)
    assert ours == exposition(Counter, Histogram)
    assert 'req_seconds_bucket{code="200",le="1.0",verb="GET"} 3.0' in ours
    assert "wait_seconds_count 9.0" in ours and 'requests_total{verb="GET"} 6.5' in ours
    assert "odd_seconds_count 1.0" in ours and "odd_seconds_sum NaN" in ours
